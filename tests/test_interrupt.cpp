// Interrupted training (SIGINT / SIGTERM → request_training_stop): the trainer finishes the step it
// is in, saves a checkpoint and returns; resuming from it gives the same log records (apart from
// wall-clock fields) and bit-identical weights as the run that was never interrupted.
#include <csignal>
#include <filesystem>
#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {
// tiny_ed with an evaluation every 4 steps, so eval records are in the compared logs too.
RunConfig tiny(const std::string& out_dir) {
  RunConfig c = tiny_ed(out_dir);
  c.train.steps = 12;
  c.train.eval_every = 4;
  c.train.eval_batches = 1;
  return c;
}

// The log without the fields that measure wall-clock time.
std::string log_without_timing(const std::string& path) {
  std::istringstream in(read_bytes(path));
  std::string line, out;
  while (std::getline(in, line)) {
    for (const char* field : {",\"tokens_per_s\":", ",\"elapsed_s\":"}) {
      size_t at = line.find(field);
      if (at == std::string::npos) continue;
      size_t end = line.find_first_of(",}", at + std::string(field).size());
      line.erase(at, end - at);
    }
    out += line + "\n";
  }
  return out;
}
}  // namespace

TEST_CASE("interrupt: a stop request saves a checkpoint — resuming matches the uninterrupted run bit for bit") {
  TempDir dir;
  Trainer straight(trainer_options(tiny(dir.file("straight"))));
  straight.train();

  for (int signal : {SIGINT, SIGTERM}) {
    CAPTURE(signal);
    const std::string out = dir.file("interrupted" + std::to_string(signal));
    // The request is already pending when train() starts: it runs one step, saves, stops.
    Trainer first(trainer_options(tiny(out)));
    request_training_stop(signal);
    TrainResult r = first.train();
    clear_training_stop();
    CHECK(r.interrupted_by == signal);
    CHECK(r.steps == 1);  // the step in progress is finished, then it stops
    REQUIRE(std::filesystem::exists(out + "/checkpoint.safetensors"));
    CHECK(load_checkpoint(out + "/checkpoint.safetensors").meta.step == 1);

    Trainer resumed(trainer_options(tiny(out)));
    resumed.resume(out + "/checkpoint.safetensors");
    TrainResult rest = resumed.train();
    CHECK(rest.interrupted_by == 0);
    CHECK(rest.steps == 12);
    CHECK(log_without_timing(out + "/log.jsonl") == log_without_timing(dir.file("straight") + "/log.jsonl"));
    // Same weights, optimizer state, RNG state and data position (the config differs in out_dir only).
    Checkpoint a = load_checkpoint(out + "/checkpoint.safetensors");
    Checkpoint b = load_checkpoint(dir.file("straight") + "/checkpoint.safetensors");
    CHECK(a.meta.step == b.meta.step);
    CHECK(a.meta.data_position == b.meta.data_position);
    CHECK(a.meta.rng_seed == b.meta.rng_seed);
    CHECK(a.meta.rng_offset == b.meta.rng_offset);
    CHECK(a.meta.extra == b.meta.extra);
    REQUIRE(a.model.size() == b.model.size());
    REQUIRE(a.optimizer.size() == b.optimizer.size());
    for (const auto* maps : {&a.model, &a.optimizer}) {
      const auto& other = maps == &a.model ? b.model : b.optimizer;
      for (const auto& entry : *maps) {
        const auto& name = entry.first;
        const auto& t = entry.second;
        CAPTURE(name);
        REQUIRE(other.count(name) == 1);
        CHECK(bitwise_equal(t, other.at(name)));
      }
    }
  }
}

TEST_CASE("interrupt: the stop flag is an atomic the handler can set — clear resets it") {
  clear_training_stop();
  CHECK(training_stop_requested() == 0);
  request_training_stop(SIGTERM);
  CHECK(training_stop_requested() == SIGTERM);
  clear_training_stop();
  CHECK(training_stop_requested() == 0);
}
