// What `relgrad train --resume` and `relgrad probe --compare` do with the files they are given
// (docs/cli.md "Resume", "Run directories", "Probe"): a resume writes beside the checkpoint it resumed
// from, a refused run leaves no folder behind, a finished run resumed in place writes nothing, a config
// that names another model is refused naming the key, a longer resume says what its lr schedule does
// (optim.decay_steps keeps the trained one), and probe checks --compare before it writes anything.
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "cli_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "train/optim/schedule.h"
#include "train/trainer/checkpoint.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// relgrad train with a tiny encoder–decoder on the reverse task (about 0.1 s), 4 steps, plus `extra`.
CliResult train_tiny(const std::string& out_dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {
      "train", "--train.out_dir=" + out_dir, "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
      "--model.n_encoder_layers=1", "--model.n_decoder_layers=1", "--model.cross.max_length=8",
      "--data.num_symbols=6", "--data.min_len=3", "--data.max_len=6", "--data.batch_size=4",
      "--optim.warmup_steps=2", "--train.steps=4", "--train.log_every=1", "--train.eval_batches=1",
      "--train.samples=0", "--train.target_accuracy=0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_relgrad(args);
}

// Every regular file under a directory, relative name → bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_bytes(e.path().string());
  return files;
}

// The lr of each "train" record of a log.jsonl, by step.
std::map<int64_t, double> lr_by_step(const std::string& log) {
  std::map<int64_t, double> lr;
  std::istringstream lines(read_bytes(log));
  const std::regex record(R"re("event":"train","step":(\d+),.*"lr":([-+0-9.eE]+))re");
  std::string line;
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_search(line, m, record)) lr[std::stoll(m[1].str())] = std::stod(m[2].str());
  return lr;
}

}  // namespace

TEST_CASE("cli resume: a copied run continues in the copy, and says where it writes") {
  TempDir dir;
  const std::string a = dir.file("A"), b = dir.file("B");
  REQUIRE_MESSAGE(train_tiny(a).code == 0, "the tiny run failed");
  fs::copy(a, b, fs::copy_options::recursive);
  const auto a_before = files_of(a);
  CliResult r = run_relgrad({"train", "--resume", b + "/checkpoint.safetensors", "--train.steps=6"});
  CHECK_CLI(r, 0);
  CHECK_MESSAGE(contains(r.out, "run directory " + b + "\n"), r.out);
  CHECK(r.out.find("run directory ") < r.out.find("step 5/6"));  // before the first step
  CHECK(files_of(a) == a_before);  // the original run is left as it was
  CHECK(load_checkpoint(b + "/checkpoint.safetensors").meta.step == 6);
  CHECK(lr_by_step(b + "/log.jsonl").count(6) == 1);
  // --train.out_dir still chooses another directory.
  const std::string c = dir.file("C");
  CliResult elsewhere =
      run_relgrad({"train", "--resume", b + "/checkpoint.safetensors", "--train.steps=8", "--train.out_dir=" + c});
  CHECK_CLI(elsewhere, 0);
  CHECK(contains(elsewhere.out, "run directory " + c + "\n"));
  CHECK(load_checkpoint(c + "/checkpoint.safetensors").meta.step == 8);
  CHECK(load_checkpoint(b + "/checkpoint.safetensors").meta.step == 6);
}

TEST_CASE("cli resume: a refused run leaves no folder, and a finished run resumed in place writes nothing") {
  TempDir dir;
  const std::string a = dir.file("A"), ck = a + "/checkpoint.safetensors";
  REQUIRE_MESSAGE(train_tiny(a).code == 0, "the tiny run failed");
  // Nothing to train into a new folder (refused once the directory is locked) and another seed.
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{}, {"--train.seed=9", "--train.steps=8"}}) {
    std::vector<std::string> args = {"train", "--resume", ck, "--train.out_dir=" + dir.file("new/run")};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = run_relgrad(args);
    CHECK_CLI(r, 1);
    CHECK_MESSAGE(!fs::exists(dir.file("new")), "relgrad train --resume ... " << extra.size() << " left " << r.err);
  }
  // In place, a finished run is evaluated and reported; its plot and log stay byte for byte.
  write_bytes(a + "/loss.svg", "the plot as it was");
  const auto before = files_of(a);
  CliResult again = run_relgrad({"train", "--resume", ck});
  CHECK_CLI(again, 0);
  CHECK(contains(again.out, "eval  step 4 | held-out loss "));
  CHECK(files_of(a) == before);
}

TEST_CASE("cli resume: a config that names another model is refused naming the key and both values") {
  TempDir dir;
  const std::string ck = dir.file("A/checkpoint.safetensors");
  REQUIRE_MESSAGE(train_tiny(dir.file("A")).code == 0, "the tiny run failed");
  CliResult wider = run_relgrad({"train", "--resume", ck, "--model.d_model=32", "--train.steps=6"});
  CHECK_CLI(wider, 1);
  CHECK_MESSAGE(contains(wider.err, "cannot resume from " + ck + ": model.d_model is 16 there and 32 here"),
                wider.err);
  CHECK_FALSE(contains(wider.err, "does not describe its tensors"));
  const std::string config = dir.file("decoder.toml");
  write_bytes(config, "[model]\ntype = \"decoder-only\"\n");
  CliResult kind = run_relgrad({"train", "--resume", ck, "--config", config, "--train.steps=6", "--optim.warmup_steps=2"});
  CHECK_CLI(kind, 1);
  CHECK_MESSAGE(contains(kind.err, "model.type is \"encoder-decoder\" there and \"decoder-only\" here"), kind.err);
}

TEST_CASE("cli resume: a longer resume stretches the lr schedule with a note, or keeps it with optim.decay_steps") {
  TempDir dir;
  const std::string a = dir.file("A");
  REQUIRE_MESSAGE(train_tiny(a, {"--optim.lr=1e-3", "--optim.min_lr=1e-4"}).code == 0, "the tiny run failed");
  const std::string stretch = dir.file("stretch"), keep = dir.file("keep");
  fs::copy(a, stretch, fs::copy_options::recursive);
  fs::copy(a, keep, fs::copy_options::recursive);

  // Default: the cosine decay is stretched to the new train.steps (PyTorch: a scheduler made anew with
  // the new T_max), and the note says so and how to keep the trained schedule.
  CliResult s = run_relgrad({"train", "--resume", stretch + "/checkpoint.safetensors", "--train.steps=8"});
  CHECK_CLI(s, 0);
  CHECK_MESSAGE(contains(s.out, "note: the lr schedule (optim.decay = cosine) ends at step 4 in the checkpoint "
                                "and now at step 8 (train.steps)"),
                s.out);
  CHECK(contains(s.out, "--optim.decay_steps=4 keeps the schedule it was trained with"));
  const LrSchedule stretched(1e-3, 2, 8, 1e-4), trained(1e-3, 2, 4, 1e-4);
  std::map<int64_t, double> lr = lr_by_step(stretch + "/log.jsonl");
  REQUIRE(lr.size() == 8);
  for (int64_t step = 1; step <= 4; ++step) CHECK(lr[step] == doctest::Approx(trained.lr_at(step - 1)));
  for (int64_t step = 5; step <= 8; ++step) CHECK(lr[step] == doctest::Approx(stretched.lr_at(step - 1)));
  CHECK(lr[5] > 5e-4);  // back up from min_lr

  // optim.decay_steps = the trained total keeps that schedule: min_lr from step 4 on (PyTorch: the
  // scheduler's state restored, T_max unchanged), also for a later resume of that run.
  CliResult k =
      run_relgrad({"train", "--resume", keep + "/checkpoint.safetensors", "--train.steps=8", "--optim.decay_steps=4"});
  CHECK_CLI(k, 0);
  CHECK_MESSAGE(contains(k.out, "note: the lr schedule (optim.decay = cosine) ends at step 4 (optim.decay_steps), "
                                "so the lr stays at optim.min_lr = 0.0001 from step 4 to 8"),
                k.out);
  lr = lr_by_step(keep + "/log.jsonl");
  REQUIRE(lr.size() == 8);
  for (int64_t step = 1; step <= 4; ++step) CHECK(lr[step] == doctest::Approx(trained.lr_at(step - 1)));
  for (int64_t step = 5; step <= 8; ++step) CHECK(lr[step] == doctest::Approx(1e-4));
  CliResult later = run_relgrad({"train", "--resume", keep + "/checkpoint.safetensors", "--train.steps=10"});
  CHECK_CLI(later, 0);
  CHECK(lr_by_step(keep + "/log.jsonl")[10] == doctest::Approx(1e-4));
  // A decay that would end inside the warmup is a config error.
  CliResult bad = run_relgrad({"train", "--dry-run", "--optim.warmup_steps=10", "--optim.decay_steps=5"});
  CHECK_CLI(bad, 2);
  CHECK(contains(bad.err, "optim.decay_steps must be 0 (= train.steps) or at least optim.warmup_steps = 10"));
}

TEST_CASE("cli probe: --compare is opened and checked before any output is written") {
  TempDir dir;
  const std::string ck = dir.file("A/checkpoint.safetensors");
  REQUIRE_MESSAGE(train_tiny(dir.file("A")).code == 0, "the tiny run failed");
  REQUIRE(run_relgrad({"train", "--train.out_dir=" + dir.file("D"), "--model.type=decoder-only", "--model.d_model=16",
                       "--model.n_heads=2", "--model.d_ff=32", "--model.n_decoder_layers=1", "--data.num_symbols=6",
                       "--data.min_len=3", "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=2",
                       "--train.steps=2", "--train.eval_batches=1", "--train.samples=0"})
              .code == 0);
  const std::string out = dir.file("pictures");
  const std::string missing = dir.file("missing.safetensors"), decoder = dir.file("D/checkpoint.safetensors");
  CliResult m = run_relgrad({"probe", ck, "--compare", missing, "--out", out});
  CHECK_CLI(m, 1);
  CHECK_MESSAGE(contains(m.err, "[probe] --compare " + missing + ": cannot be opened"), m.err);
  CHECK_FALSE(fs::exists(out));
  CliResult k = run_relgrad({"probe", ck, "--compare", decoder, "--out", out});
  CHECK_CLI(k, 1);
  CHECK_MESSAGE(contains(k.err, "[probe] --compare " + decoder + ": model.type is decoder-only there and "
                                "encoder-decoder in " + ck),
                k.err);
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(dir.file("A/probe")));
}
