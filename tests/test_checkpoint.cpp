// Checkpoints (train/trainer/checkpoint.h): round trip of model, AdamW state and meta; corruption (every data
// byte flipped, truncation, wrong version, a changed header value) always reported, never a crash; a
// failed save (each system call failing in turn: disk full, I/O error; a device or FIFO as the target)
// keeps the previous file and leaves no temp; a hostile config in the metadata is an error; and the
// resume test: 10 steps + save + fresh process-like restore + 10 steps gives
// the same losses and weights, bit for bit, as 20 uninterrupted steps.
#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "core/version.h"
#include "layers/linear.h"
#include "layers/models.h"
#include "file_testing.h"
#include "testing.h"
#include "train/trainer/checkpoint.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"
#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

void check_same_state(const std::vector<std::pair<std::string, Tensor>>& a,
                      const std::vector<std::pair<std::string, Tensor>>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].first == b[k].first);
    CHECK_MESSAGE(bitwise_equal(a[k].second, b[k].second), "entry '" << a[k].first << "' differs");
  }
}

// One AdamW step on a fixed input, so that the optimizer state is not all zeros.
void adam_step(Linear& model, Optimizer& opt, uint64_t seed) {
  opt.zero_grad();
  Tensor x = relgrad::testing::uniform({4, model.weight.size(1)}, -1, 1, kFloat32, seed);
  sum(mul(model(x), model(x))).backward();
  opt.step();
}

// A saved tiny checkpoint (Linear(2, 2) + AdamW after one step): the subject of the sweeps.
std::string tiny_checkpoint(const std::string& path) {
  Generator init(3);
  Linear model(2, 2, true, &init);
  AdamW opt(model.parameters(), AdamWOptions(0.1));
  adam_step(model, opt, 4);
  CheckpointMeta meta;
  meta.step = 1;
  meta.config_json = "{}";
  save_checkpoint(path, model, &opt, meta);
  return read_bytes(path);
}

// Loads `path`, which must fail with relgrad::Error (anything else, or success, fails the test).
bool load_fails(const std::string& path, std::string* message = nullptr) {
  try {
    load_checkpoint(path);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("checkpoint: model, AdamW state and meta round trip into fresh objects") {
  TempDir dir;
  std::string path = dir.file("ck.safetensors");
  Generator init(1);
  auto model = std::make_unique<Linear>(3, 2, true, &init);
  auto opt = std::make_unique<AdamW>(model->parameters(), AdamWOptions(0.05));
  adam_step(*model, *opt, 2);
  adam_step(*model, *opt, 3);
  Generator rng(77);
  rng.next_offset();
  rng.next_offset();

  CheckpointMeta meta;
  meta.step = 2;
  meta.config_json = "{\"d_model\": 16, \"name\": \"caf\xc3\xa9 \\\"q\\\"\"}";
  meta.rng_seed = rng.seed();
  meta.rng_offset = rng.offset();
  meta.data_position = 123456789012345LL;
  meta.num_threads = 4;
  meta.extra = {{"git", "abc123"}, {"note", "line\nbreak"}, {"checksum", "user key, kept apart"}};
  save_checkpoint(path, *model, opt.get(), meta);
  auto saved_model = model->state_dict();
  auto saved_optim = opt->state_tensors();
  for (auto& [name, t] : saved_model) t = t.clone();
  for (auto& [name, t] : saved_optim) t = t.clone();
  model.reset();
  opt.reset();

  Checkpoint ck = load_checkpoint(path);
  CHECK(ck.path == path);
  CHECK(ck.meta.format_version == 1);
  CHECK(ck.meta.step == 2);
  CHECK(ck.meta.config_json == meta.config_json);
  CHECK(ck.meta.rng_seed == 77);
  CHECK(ck.meta.rng_offset == 2);
  CHECK(ck.meta.data_position == meta.data_position);
  CHECK(ck.meta.num_threads == 4);
  CHECK(ck.meta.writer == std::string("relgrad ") + version());  // the project(VERSION) of CMakeLists.txt
  CHECK(ck.meta.extra == meta.extra);
  CHECK(ck.optimizer_name == "AdamW");
  CHECK(ck.model.size() == 2);
  CHECK(ck.optimizer.count("step_count") == 1);

  Generator other_init(999);  // different initial weights: restore must overwrite every one
  Linear fresh(3, 2, true, &other_init);
  AdamW fresh_opt(fresh.parameters(), AdamWOptions(0.05));
  Generator fresh_rng(5);
  restore(ck, fresh, &fresh_opt, &fresh_rng);
  check_same_state(fresh.state_dict(), saved_model);
  check_same_state(fresh_opt.state_tensors(), saved_optim);
  CHECK(fresh_opt.step_count() == 2);
  CHECK(fresh_rng.seed() == 77);
  CHECK(fresh_rng.offset() == 2);

  // Without an optimizer: the file holds only the model, and restores into one.
  save_checkpoint(path, fresh, nullptr, meta);
  Checkpoint model_only = load_checkpoint(path);
  CHECK(model_only.optimizer.empty());
  CHECK(model_only.optimizer_name.empty());
  Linear again(3, 2, true, &other_init);
  restore(model_only, again, nullptr, nullptr);
  check_same_state(again.state_dict(), saved_model);
}

TEST_CASE("checkpoint: flipping any single byte of the data section is detected") {
  TempDir dir;
  std::string path = dir.file("tiny.safetensors");
  const std::string good = tiny_checkpoint(path);
  const size_t start = safetensors_data_start(good);
  REQUIRE(start < good.size());
  size_t detected = 0, by_checksum = 0;
  for (size_t k = start; k < good.size(); ++k) {
    std::string bad = good;
    bad[k] = static_cast<char>(bad[k] ^ 0xFF);
    write_bytes(path, bad);
    std::string message;
    bool failed = load_fails(path, &message);
    CHECK_MESSAGE(failed, "byte " << k << " flipped was not detected");
    detected += failed;
    if (message.find("checksum mismatch") != std::string::npos) ++by_checksum;
  }
  CHECK(detected == good.size() - start);
  CHECK(by_checksum == good.size() - start);  // no bool tensors here: every flip reaches the checksum

  // The exact message, for one flip.
  std::string bad = good;
  bad[start] = static_cast<char>(bad[start] ^ 0x01);
  write_bytes(path, bad);
  check_throws_with([&] { load_checkpoint(path); }, "[checkpoint] " + path + ": checksum mismatch (stored ");
  check_throws_with([&] { load_checkpoint(path); }, "): the file is corrupt");

  write_bytes(path, good);
  CHECK_NOTHROW(load_checkpoint(path));
}

TEST_CASE("checkpoint: truncated files are refused") {
  TempDir dir;
  std::string path = dir.file("tiny.safetensors");
  const std::string good = tiny_checkpoint(path);
  const size_t start = safetensors_data_start(good), size = good.size();
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, start / 2, start - 1, start, start + 1,
                     (start + size) / 2, size - 8, size - 1}) {
    write_bytes(path, good.substr(0, len));
    std::string message;
    CHECK_MESSAGE(load_fails(path, &message), "truncated to " << len << " bytes was accepted");
    CHECK_MESSAGE(message.rfind("[checkpoint] " + path + ": ", 0) == 0, message);
  }
  check_throws_with([&] { load_checkpoint(dir.file("missing.safetensors")); }, "[checkpoint] ");
}

TEST_CASE("checkpoint: unknown format_version and malformed metadata are refused") {
  TempDir dir;
  std::string path = dir.file("ck.safetensors");
  Generator init(3);
  Linear model(2, 2, true, &init);
  CheckpointMeta meta;
  meta.format_version = 2;
  check_throws_with([&] { save_checkpoint(path, model, nullptr, meta); }, "cannot write format_version 2");
  CHECK_FALSE(fs::exists(path));

  // A file as a later version might write it: the version is checked before anything else.
  meta.format_version = 1;
  save_checkpoint(path, model, nullptr, meta);
  SafetensorsFile f = load_safetensors(path);
  // A rewrite as a buggy writer would make it: the header checksum matches the new metadata.
  auto rewrite = [&](const std::string& key, const std::string& value, bool fix_header_checksum = true) {
    auto md = f.metadata;
    if (value.empty()) md.erase(key); else md[key] = value;
    if (fix_header_checksum) md["header_checksum"] = checksum_hex(checkpoint_header_checksum(md, f.tensors));
    save_safetensors(path, f.tensors, md);
  };
  // A changed value without the matching header checksum (a flipped bit): corrupt.
  rewrite("step", "7", false);
  check_throws_with([&] { load_checkpoint(path); }, "[checkpoint] " + path + ": header checksum mismatch (stored ");
  rewrite("header_checksum", "12345", false);
  check_throws_with([&] { load_checkpoint(path); }, "header_checksum '12345' is not 16 hex digits");
  rewrite("header_checksum", "", false);  // files from before the header checksum load without it
  CHECK(load_checkpoint(path).meta.step == 0);
  rewrite("format_version", "2");
  check_throws_with([&] { load_checkpoint(path); }, "[checkpoint] " + path + ": unsupported format_version 2");
  rewrite("format_version", "one");
  check_throws_with([&] { load_checkpoint(path); }, "format_version 'one' is not an integer");
  rewrite("format_version", "");
  check_throws_with([&] { load_checkpoint(path); }, "metadata lacks 'format_version'");
  rewrite("checksum", "xyz");
  check_throws_with([&] { load_checkpoint(path); }, "checksum 'xyz' is not 16 hex digits");
  rewrite("step", "-1");
  check_throws_with([&] { load_checkpoint(path); }, "step -1 is negative");
  rewrite("rng_offset", "-1");
  check_throws_with([&] { load_checkpoint(path); }, "metadata 'rng_offset' is '-1', not a non-negative integer");
  rewrite("surprise", "1");
  check_throws_with([&] { load_checkpoint(path); }, "unexpected metadata key 'surprise'");
}

TEST_CASE("checkpoint: restore names what does not fit and leaves everything as it was") {
  TempDir dir;
  std::string path = dir.file("ck.safetensors");
  Generator init(3);
  Linear model(3, 2, true, &init);
  AdamW opt(model.parameters(), AdamWOptions(0.1));
  adam_step(model, opt, 4);
  CheckpointMeta meta;
  meta.rng_seed = 11;
  meta.rng_offset = 12;
  save_checkpoint(path, model, &opt, meta);
  Checkpoint ck = load_checkpoint(path);

  Linear wider(4, 2, true, &init);
  check_throws_with([&] { restore(ck, wider, nullptr, nullptr); },
                    "[checkpoint] " + path + ": model state does not fit this model: [load_state_dict]");

  Linear same(3, 2, true, &init);
  SGD sgd(same.parameters(), SGDOptions(0.1));
  check_throws_with([&] { restore(ck, same, &sgd, nullptr); }, "holds AdamW state, but the optimizer to restore is SGD");

  // An optimizer over a different parameter set: refused after the model was loaded, so the model's
  // previous values must be put back, and the rng must not move.
  AdamW weight_only(TensorList{same.weight}, AdamWOptions(0.1));
  std::vector<std::pair<std::string, Tensor>> before = same.state_dict();
  for (auto& [name, t] : before) t = t.clone();
  Generator rng(1);
  check_throws_with([&] { restore(ck, same, &weight_only, &rng); },
                    "optimizer state does not fit this optimizer: [AdamW.load_state_tensors]");
  check_same_state(same.state_dict(), before);
  CHECK(rng.seed() == 1);
  CHECK(rng.offset() == 0);

  save_checkpoint(path, model, nullptr, meta);
  Checkpoint no_optim = load_checkpoint(path);
  check_throws_with([&] { restore(no_optim, same, &opt, nullptr); }, "holds no optimizer state");
}

TEST_CASE("checkpoint: a failed save leaves the previous checkpoint byte-identical") {
  TempDir dir;
  std::string path = dir.file("ck.safetensors");
  const std::string previous = tiny_checkpoint(path);
  Generator init(8);
  Linear big(64, 64, true, &init);
  AdamW opt(big.parameters(), AdamWOptions(0.1));
  CheckpointMeta meta;

  // A path under a regular file: the temp file cannot even be created.
  std::string blocker = dir.file("not_a_dir");
  write_bytes(blocker, "x");
  check_throws_with([&] { save_checkpoint(blocker + "/ck.safetensors", big, &opt, meta); }, "cannot create");

  // A metadata value that safetensors refuses (invalid UTF-8): nothing is written.
  meta.extra["bad"] = "\xff";
  check_throws_with([&] { save_checkpoint(path, big, &opt, meta); }, "not valid UTF-8");
  meta.extra.clear();
  CHECK(read_bytes(path) == previous);

  // Running out of space mid-write, at the same path (a file-size limit works for root too): the
  // write fails with EFBIG halfway through the data, the temp file is removed, the old file stays.
  struct rlimit old_limit {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the process
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;  // the big checkpoint is ~100 KB
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  try {
    save_checkpoint(path, big, &opt, meta);
  } catch (const Error& e) {
    threw = true;
    MESSAGE("failed save: " << std::string(e.what()));
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK(read_bytes(path) == previous);
  CHECK_NOTHROW(load_checkpoint(path));
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) files += entry.path().filename() != "not_a_dir";
  CHECK(files == 1);  // no temp file left behind
}

// ---- the resume test --------------------------------------------------------------------------------
namespace {

constexpr uint64_t kDataSeed = 1234;
constexpr int64_t kBatch = 2, kSeqLen = 7, kVocab = 8;

TransformerConfig resume_config() {
  TransformerConfig c;
  c.vocab_size = kVocab;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.n_decoder_layers = 1;
  c.dropout = 0.1;  // dropout draws from the default generator: its state must be checkpointed too
  c.decoder_self.scheme = "t5";
  c.decoder_self.num_buckets = 8;
  c.decoder_self.max_distance = 16;
  return c;
}

// The batch at a position of the data stream: a pure function of the position, as a real loader that
// can seek, so the checkpoint's data_position is all a resume needs.
Tensor batch_at(int64_t position) {
  Generator g;
  g.set_state(kDataSeed, static_cast<uint64_t>(position));
  return randint(0, kVocab, {kBatch, kSeqLen}, TensorOptions(kInt64), &g);
}

struct Run {
  std::unique_ptr<DecoderLM> model;
  std::unique_ptr<AdamW> opt;
  LrSchedule schedule{3e-2, 3, 20, 3e-3};
  int64_t step = 0, data_position = 0;

  explicit Run(uint64_t init_seed) {
    Generator init(init_seed);
    model = std::make_unique<DecoderLM>(resume_config(), &init);
    opt = std::make_unique<AdamW>(decay_groups(model->named_parameters(), 3e-2, 0.1),
                                  AdamWOptions().betas(0.9, 0.95));
  }

  void train(int64_t steps, std::vector<double>& losses) {
    for (int64_t k = 0; k < steps; ++k, ++step) {
      Tensor batch = batch_at(data_position++);
      Tensor input = batch.slice(1, 0, kSeqLen - 1).contiguous();   // (B, T)
      Tensor target = batch.slice(1, 1, kSeqLen).contiguous();      // (B, T)
      opt->zero_grad();
      Tensor logits = (*model)(input);                              // (B, T, V)
      Tensor loss = cross_entropy(logits.reshape({kBatch * (kSeqLen - 1), kVocab}),
                                  target.reshape({kBatch * (kSeqLen - 1)}));
      loss.backward();
      clip_grad_norm_(model->parameters(), 0.5);
      opt->set_lr(schedule.lr_at(step));
      opt->step();
      losses.push_back(loss.item());
    }
  }
};

}  // namespace

TEST_CASE("checkpoint: resume after 10 steps is bit-identical to 20 uninterrupted steps") {
  TempDir dir;
  std::string path = dir.file("resume.safetensors");

  // Uninterrupted.
  manual_seed(42);
  std::vector<double> straight;
  Run a(5);
  a.train(20, straight);
  auto straight_weights = a.model->state_dict();
  auto straight_optim = a.opt->state_tensors();

  // 10 steps, checkpoint, destroy everything.
  manual_seed(42);
  std::vector<double> resumed;
  {
    Run b(5);
    b.train(10, resumed);
    CheckpointMeta meta;
    meta.step = b.step;
    meta.config_json = "{\"vocab_size\": 8, \"d_model\": 16, \"n_heads\": 2, \"n_decoder_layers\": 1}";
    meta.rng_seed = default_generator().seed();
    meta.rng_offset = default_generator().offset();
    meta.data_position = b.data_position;
    meta.num_threads = 1;
    save_checkpoint(path, *b.model, b.opt.get(), meta);
  }
  manual_seed(999);  // whatever the process did meanwhile: restore must bring the dropout stream back

  // Fresh objects (other initial weights), restore, 10 more steps.
  Run c(6);
  Checkpoint ck = load_checkpoint(path);
  restore(ck, *c.model, c.opt.get(), &default_generator());
  c.step = ck.meta.step;
  c.data_position = ck.meta.data_position;
  CHECK(c.step == 10);
  CHECK(c.opt->step_count() == 10);
  c.train(10, resumed);

  REQUIRE(resumed.size() == straight.size());
  for (size_t k = 0; k < straight.size(); ++k) CHECK_MESSAGE(resumed[k] == straight[k], "loss at step " << k);
  check_same_state(c.model->state_dict(), straight_weights);
  check_same_state(c.opt->state_tensors(), straight_optim);
  CHECK(straight.back() < straight.front());  // it did train
}

// ---- disk full and failing system calls -------------------------------------------------------------
namespace {

// The fault hook's plan: fail `op` with `error` once `calls` earlier calls of that op went through.
struct FaultPlan {
  FileOp op = FileOp::Write;
  int error = 0;
  int calls = 0;
  int seen = 0;
};
FaultPlan g_plan;
int planned_fault(FileOp op, uint64_t) {
  if (op != g_plan.op) return 0;
  return g_plan.seen++ == g_plan.calls ? g_plan.error : 0;
}
struct HookGuard {
  explicit HookGuard(FileFaultHook hook) { set_file_fault_hook(hook); }
  ~HookGuard() { set_file_fault_hook(nullptr); }
};

const char* op_name(FileOp op) {
  switch (op) {
    case FileOp::Create: return "create";
    case FileOp::Write: return "write";
    case FileOp::Fsync: return "fsync";
    case FileOp::Close: return "close";
    case FileOp::Rename: return "rename";
    case FileOp::OpenDir: return "open dir";
    case FileOp::FsyncDir: return "fsync dir";
  }
  return "?";
}

size_t files_in(const fs::path& dir) { return std::distance(fs::directory_iterator(dir), fs::directory_iterator()); }

}  // namespace

TEST_CASE("disk full: each failing system call of a save is an error naming the file, and the previous checkpoint stays") {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  const std::string previous = tiny_checkpoint(path);
  Generator init(8);
  Linear model(16, 16, true, &init);
  AdamW opt(model.parameters(), AdamWOptions(0.1));
  adam_step(model, opt, 9);
  CheckpointMeta meta;
  meta.step = 2;
  // The writes of one save: the length field, the header, then one per tensor (5 here).
  int writes = 0;
  {
    static int* counter = nullptr;
    counter = &writes;
    HookGuard hook([](FileOp op, uint64_t) { *counter += op == FileOp::Write; return 0; });
    save_checkpoint(dir.file("count.safetensors"), model, &opt, meta);
    fs::remove(dir.file("count.safetensors"));
  }
  REQUIRE(writes >= 3);
  int cases = 0;
  for (int error : {ENOSPC, EIO, EDQUOT}) {
    std::vector<std::pair<FileOp, int>> plans = {{FileOp::Create, 0}, {FileOp::Fsync, 0}, {FileOp::Close, 0}, {FileOp::Rename, 0}};
    for (int k = 0; k < writes; ++k) plans.push_back({FileOp::Write, k});
    for (const auto& entry : plans) {
      const auto& op = entry.first;
      const auto& calls = entry.second;
      CAPTURE(op_name(op));
      CAPTURE(calls);
      CAPTURE(std::strerror(error));
      g_plan = FaultPlan{op, error, calls, 0};
      std::string message = "(no error)";
      {
        HookGuard hook(planned_fault);
        try {
          save_checkpoint(path, model, &opt, meta);
        } catch (const Error& e) {
          message = e.what();
        }
      }
      CHECK_MESSAGE(message.find("[safetensors] " + path + ": ") == 0, message);
      CHECK_MESSAGE(message.find(std::strerror(error)) != std::string::npos, message);
      CHECK(read_bytes(path) == previous);
      CHECK(files_in(dir.path) == 1);  // no temp file left behind
      ++cases;
    }
  }
  // After the rename the new file is in place and complete; a failing directory fsync is still
  // reported (its durability is in doubt), except EINVAL: the filesystem cannot fsync directories.
  for (FileOp op : {FileOp::OpenDir, FileOp::FsyncDir}) {
    CAPTURE(op_name(op));
    g_plan = FaultPlan{op, EIO, 0, 0};
    {
      HookGuard hook(planned_fault);
      check_throws_with([&] { save_checkpoint(path, model, &opt, meta); }, "directory");
    }
    CHECK(load_checkpoint(path).meta.step == 2);
    CHECK(files_in(dir.path) == 1);
    write_bytes(path, previous);
  }
  g_plan = FaultPlan{FileOp::FsyncDir, EINVAL, 0, 0};
  {
    HookGuard hook(planned_fault);
    CHECK_NOTHROW(save_checkpoint(path, model, &opt, meta));
  }
  CHECK(load_checkpoint(path).meta.step == 2);
  MESSAGE("disk full: ", cases, " injected failures (create, each of ", writes, " writes, fsync, close, rename) x "
          "(ENOSPC, EIO, EDQUOT): all errors, previous file kept, no temp left");
}

TEST_CASE("disk full: a device, FIFO or directory under the checkpoint's name is refused, never replaced") {
  TempDir dir;
  Generator init(3);
  Linear model(2, 2, true, &init);
  CheckpointMeta meta;
  std::string fifo = dir.file("fifo.safetensors");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  check_throws_with([&] { save_checkpoint(fifo, model, nullptr, meta); }, "exists and is a FIFO, not a regular file");
  CHECK(fs::is_fifo(fifo));
  std::string sub = dir.file("empty_dir");
  fs::create_directory(sub);
  check_throws_with([&] { save_checkpoint(sub, model, nullptr, meta); }, "exists and is a directory");
  CHECK(fs::is_directory(sub));
  // /dev/full (as root, renaming over it would replace the device with a regular file).
  if (fs::is_character_file("/dev/full")) {
    check_throws_with([&] { save_checkpoint("/dev/full", model, nullptr, meta); },
                      "[safetensors] /dev/full: exists and is a character device, not a regular file");
    CHECK(fs::is_character_file("/dev/full"));
  } else {
    MESSAGE("skipped: no /dev/full");
  }
  CHECK(files_in(dir.path) == 2);  // the FIFO and the directory, no temp files
}

TEST_CASE("checkpoint: a hostile config in the metadata is an error, not a crash") {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  Generator init(3);
  Linear model(2, 2, true, &init);
  // 100,000 nested objects (500 KB): parsing is fine, but walking it recursively overflowed the stack.
  std::string nested;
  for (int k = 0; k < 100000; ++k) nested += "{\"model\":";
  nested += "1" + std::string(100000, '}');
  const std::vector<std::pair<std::string, std::string>> configs = {
      {nested, "unknown key 'model.model.model.model'"},
      {"{\"model\":", "not valid JSON"},
      {"[1,2]", "the top level must be an object"},
      {"{\"model\":{\"d_model\":\"wide\"}}", "model.d_model"},
  };
  for (const auto& entry : configs) {
    const auto& config = entry.first;
    const auto& message = entry.second;
    CAPTURE(message);
    CheckpointMeta meta;
    meta.config_json = config;
    save_checkpoint(path, model, nullptr, meta);
    CHECK(load_checkpoint(path).meta.config_json == config);  // opaque to the checkpoint layer
    check_throws_with([&] { load_run(path); }, "[checkpoint] " + path + ": its config cannot be used: ");
    check_throws_with([&] { load_run(path); }, message);
  }
}
