// Data-parallel training under a real mpirun (train/trainer/distributed.h, docs/distributed.md), with the
// real `relgrad` binary: N ranks give the losses and weights of one process trained on the whole
// batch; a 2-rank run resumed at step 10 equals one that ran 20 steps; a rank that fails, hangs, dies
// or is interrupted ends the whole job promptly with a message naming what happened. Skipped (with a
// message) when relgrad was built without MPI or mpirun is not installed (tools/setup.sh installs
// Open MPI, so CI runs them).
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "file_testing.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/distributed.h"

extern char** environ;

using namespace relgrad;
using relgrad::testing::TempDir;

namespace {

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// Why the tests below cannot run here ("" when they can).
std::string missing() {
  if (!mpi_built()) return "skipped: relgrad was built without MPI (RELGRAD_MPI; apt-get install libopenmpi-dev openmpi-bin)";
  if (find_program("mpirun").empty()) return "skipped: mpirun is not installed (apt-get install openmpi-bin)";
  // Open MPI refuses to run as root without these; harmless otherwise.
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  // Containers often forbid the cross-memory attach Open MPI's shared-memory transport tries first.
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  return "";
}

struct Job {
  pid_t pid = -1;
  std::string out_path, err_path;
};

Job spawn(const std::vector<std::string>& args, const TempDir& dir, const std::string& tag) {
  Job job;
  job.out_path = dir.file(tag + ".out");
  job.err_path = dir.file(tag + ".err");
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, job.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, 2, job.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: a stuck job can be killed whole
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  REQUIRE(posix_spawn(&job.pid, argv[0], &files, &attr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  return job;
}

struct Finished {
  int status = -1;  // exit status, or -1 when it had to be killed at the deadline
  double seconds = 0;
  std::string out, err;
};

Finished finish(const Job& job, double timeout_s) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  Finished f;
  int status = 0;
  for (;;) {
    if (::waitpid(job.pid, &status, WNOHANG) == job.pid) {
      f.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::duration<double>(clock::now() - start).count() > timeout_s) {
      ::kill(-job.pid, SIGKILL);  // the whole group: mpirun and its ranks
      ::waitpid(job.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  f.seconds = std::chrono::duration<double>(clock::now() - start).count();
  f.out = relgrad::testing::read_bytes(job.out_path);
  f.err = relgrad::testing::read_bytes(job.err_path);
  return f;
}

std::vector<std::string> relgrad_args(const std::vector<std::string>& extra) {
  std::vector<std::string> a = {RELGRAD_CLI_PATH, "train"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::vector<std::string> mpirun_args(int ranks, const std::vector<std::string>& extra) {
  std::vector<std::string> a = {find_program("mpirun"), "-np", std::to_string(ranks), "--oversubscribe",
                                "--bind-to", "none"};
  std::vector<std::string> r = relgrad_args(extra);
  a.insert(a.end(), r.begin(), r.end());
  return a;
}

Finished run(const std::vector<std::string>& args, const TempDir& dir, const std::string& tag, double timeout_s = 120) {
  return finish(spawn(args, dir, tag), timeout_s);
}

// A tiny encoder–decoder with dropout and gradient accumulation, one thread per process.
std::vector<std::string> tiny(const std::string& out_dir, const std::vector<std::string>& more = {}) {
  std::vector<std::string> a = {"--train.out_dir=" + out_dir, "--model.d_model=16", "--model.n_heads=2",
                                "--model.d_ff=32", "--model.n_encoder_layers=1", "--model.n_decoder_layers=1",
                                "--model.dropout=0.1", "--model.cross.max_length=8", "--data.num_symbols=6",
                                "--data.min_len=3", "--data.max_len=6", "--data.batch_size=7",
                                "--train.grad_accum=2", "--optim.warmup_steps=2", "--train.steps=8",
                                "--train.log_every=1", "--train.eval_every=4", "--train.eval_batches=3",
                                "--train.samples=0", "--train.target_accuracy=0", "--train.threads=1",
                                "--train.batch_shards=1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// (event, step, loss) of every record of a JSONL log.
struct Record {
  std::string event;
  int64_t step;
  double loss;
};
std::vector<Record> read_log(const std::string& path) {
  std::vector<Record> records;
  std::ifstream in(path);
  std::string line;
  auto number = [&](const std::string& key) {
    size_t at = line.find("\"" + key + "\":");
    return at == std::string::npos ? NAN : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
  };
  while (std::getline(in, line)) {
    size_t e = line.find("\"event\":\"");
    if (e == std::string::npos) continue;
    records.push_back({line.substr(e + 9, line.find('"', e + 9) - e - 9), int64_t(number("step")), number("loss")});
  }
  return records;
}

void check_same_losses(const std::string& log_a, const std::string& log_b, double rtol) {
  std::vector<Record> a = read_log(log_a), b = read_log(log_b);
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() > 2);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].event == b[i].event);
    CHECK(a[i].step == b[i].step);
    CHECK_MESSAGE(std::fabs(a[i].loss - b[i].loss) <= rtol * std::fabs(b[i].loss), a[i].event, " step ", a[i].step,
                  ": loss ", a[i].loss, " vs ", b[i].loss);
  }
}

// Model (and optimizer) tensors of two checkpoints within atol + rtol |b|, or bit for bit (tol < 0).
// The attention key biases get `key_bias_tol`: their exact gradient is zero (softmax ignores a shift
// shared by all keys), so what they receive is rounding noise, which Adam scales up to steps of
// about lr: any other summation order (thread count, row split) moves them by up to lr per step.
void check_same_checkpoints(const std::string& a_path, const std::string& b_path, double tol, bool optimizer,
                            double key_bias_tol = -2) {
  Checkpoint a = load_checkpoint(a_path), b = load_checkpoint(b_path);
  CHECK(a.meta.step == b.meta.step);
  REQUIRE(a.model.size() == b.model.size());
  for (const auto& entry : a.model) {
    const auto& name = entry.first;
    const auto& t = entry.second;
    INFO("tensor ", name);
    REQUIRE(b.model.count(name) == 1);
    const bool key_bias = name.size() > 11 && name.compare(name.size() - 11, 11, "k_proj.bias") == 0;
    const double within = key_bias && key_bias_tol > -2 ? key_bias_tol : tol;
    if (within < 0) CHECK_MESSAGE(relgrad::testing::bitwise_equal(t, b.model.at(name)), name);
    else if (key_bias && key_bias_tol > -2) CHECK_CLOSE(t, b.model.at(name), within, 0);
    else CHECK_CLOSE(t, b.model.at(name), within, within);
  }
  if (optimizer) {
    REQUIRE(a.optimizer.size() == b.optimizer.size());
    for (const auto& entry : a.optimizer) {
      const auto& name = entry.first;
      const auto& t = entry.second;
      CHECK_MESSAGE(relgrad::testing::bitwise_equal(t, b.optimizer.at(name)), name);
    }
  }
}

#define SKIP_WITHOUT_MPI()                   \
  do {                                        \
    const std::string why = missing();        \
    if (!why.empty()) {                       \
      MESSAGE(why);                           \
      return;                                 \
    }                                         \
  } while (0)

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
#define CHECK_HAS(text, part) CHECK_MESSAGE(has(text, part), "'", text, "' lacks '", part, "'")

// The pid of rank `rank` among mpirun's children (Open MPI puts OMPI_COMM_WORLD_RANK in their environment).
pid_t rank_pid(pid_t mpirun, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  DIR* proc = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = proc ? ::readdir(proc) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string stat = relgrad::testing::read_bytes("/proc/" + std::to_string(pid) + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos || std::atoi(stat.c_str() + close + 4) != mpirun) continue;  // field 4: ppid
    std::string env = relgrad::testing::read_bytes("/proc/" + std::to_string(pid) + "/environ");
    size_t at = 0;
    for (size_t end; (end = env.find('\0', at)) != std::string::npos; at = end + 1)
      if (env.compare(at, end - at, want) == 0) found = pid;
  }
  if (proc) ::closedir(proc);
  return found;
}

// Waits until `log` holds a train record (the ranks are past start-up and in the training loop).
bool wait_for_training(const std::string& log, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    for (const Record& r : read_log(log))
      if (r.event == "train") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

TEST_CASE("distributed mpi: 2 ranks give the losses and weights of one process on the whole batch") {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  // float32 encoder–decoder, dropout, grad_accum 2, 7 rows split 3 + 4.
  Finished one = run(relgrad_args(tiny(dir.file("one"))), dir, "one");
  Finished two = run(mpirun_args(2, tiny(dir.file("two"))), dir, "two");
  REQUIRE_MESSAGE(one.status == 0, one.err);
  REQUIRE_MESSAGE(two.status == 0, two.err);
  CHECK_HAS(two.out, "data parallel: 2 ranks (mpi), rank 0 trains rows [0, 3) of 7");
  // Only rank 0 prints and writes.
  size_t done = 0;
  for (size_t at = two.out.find("done: "); at != std::string::npos; at = two.out.find("done: ", at + 1)) ++done;
  CHECK(done == 1);
  check_same_losses(dir.file("one/log.jsonl"), dir.file("two/log.jsonl"), 1e-6);
  // AdamW at lr 1e-3 for 8 steps: a key bias can drift by at most ~8e-3 on noise; the others agree to 1e-6.
  check_same_checkpoints(dir.file("one/checkpoint.safetensors"), dir.file("two/checkpoint.safetensors"), 1e-6, false,
                         8e-3);
}

namespace {
// A tiny decoder-only model in float64 with SGD + momentum (no division by the gradient's own size,
// so every weight agrees, key biases too) and dropout, with `rows` rows a step: one process against
// `ranks` ranks given `ranks_more` as well; every loss and weight within 1e-12.
void check_ranks_agree_with_one_process(int ranks, int rows, const std::vector<std::string>& ranks_more) {
  TempDir dir;
  const std::vector<std::string> more = {"--model.type=decoder-only", "--train.dtype=float64", "--model.dropout=0.2",
                                         "--data.batch_size=" + std::to_string(rows), "--train.grad_accum=1",
                                         "--optim.name=sgd", "--optim.momentum=0.9", "--optim.lr=0.1"};
  std::vector<std::string> many = more;
  many.insert(many.end(), ranks_more.begin(), ranks_more.end());
  Finished one = run(relgrad_args(tiny(dir.file("one"), more)), dir, "one");
  Finished all = run(mpirun_args(ranks, tiny(dir.file("ranks"), many)), dir, "ranks");
  REQUIRE_MESSAGE(one.status == 0, one.err);
  REQUIRE_MESSAGE(all.status == 0, all.err);
  check_same_losses(dir.file("one/log.jsonl"), dir.file("ranks/log.jsonl"), 1e-12);
  check_same_checkpoints(dir.file("one/checkpoint.safetensors"), dir.file("ranks/checkpoint.safetensors"), 1e-12, false);
}
}  // namespace

TEST_CASE("distributed mpi: 3 ranks, decoder-only, float64, SGD, uneven rows: every weight agrees with one process to 1e-12") {
  SKIP_WITHOUT_MPI();
  check_ranks_agree_with_one_process(3, 5, {});
}

TEST_CASE("distributed mpi: 2 ranks of 2 batch shards each, float64, dropout: every weight agrees with one process to 1e-12") {
  SKIP_WITHOUT_MPI();
  // Each rank's 3 rows cut again into shards of 1 and 2 rows: every row must still draw its dropout
  // mask as in the whole batch of 6 (rank 1's shards begin at rows 3 and 4), or the weights part at once.
  check_ranks_agree_with_one_process(2, 6, {"--train.batch_shards=2", "--train.shard_by_length=false", "--train.threads=2"});
}

TEST_CASE("distributed mpi: a 2-rank run resumed at step 10 equals one that ran 20 steps, bit for bit") {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  // A constant schedule after warmup, so a 10-step run is the first half of a 20-step one.
  const std::vector<std::string> more = {"--optim.decay=constant", "--train.eval_every=0"};
  auto steps = [&](const std::string& out, int n) {
    std::vector<std::string> m = more;
    m.push_back("--train.steps=" + std::to_string(n));
    return tiny(dir.file(out), m);
  };
  Finished whole = run(mpirun_args(2, steps("whole", 20)), dir, "whole");
  Finished first = run(mpirun_args(2, steps("half", 10)), dir, "first");
  REQUIRE_MESSAGE(whole.status == 0, whole.err);
  REQUIRE_MESSAGE(first.status == 0, first.err);
  std::vector<std::string> resume = {"--resume", dir.file("half/checkpoint.safetensors"), "--train.steps=20"};
  Finished second = run(mpirun_args(2, resume), dir, "second");
  REQUIRE_MESSAGE(second.status == 0, second.err);
  CHECK_HAS(second.out, "resumed from ");
  // The logs' train records (the 10-step run's final eval record aside) and the final state.
  std::vector<Record> a = read_log(dir.file("whole/log.jsonl")), b;
  for (const Record& r : read_log(dir.file("half/log.jsonl")))
    if (r.event == "train") b.push_back(r);
  std::vector<Record> train_a;
  for (const Record& r : a)
    if (r.event == "train") train_a.push_back(r);
  REQUIRE(train_a.size() == 20);
  REQUIRE(b.size() == 20);
  for (size_t i = 0; i < 20; ++i) CHECK_MESSAGE(train_a[i].loss == b[i].loss, "step ", train_a[i].step);
  check_same_checkpoints(dir.file("whole/checkpoint.safetensors"), dir.file("half/checkpoint.safetensors"), -1, true);
}

TEST_CASE("distributed mpi: a rank that fails, hangs or dies ends the job promptly with a clear message") {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  SUBCASE("rank 0 fails (its out_dir is a file): MPI_Abort ends rank 1, which waits in a collective") {
    relgrad::testing::write_bytes(dir.file("a_file"), "x");
    Finished f = run(mpirun_args(2, tiny(dir.file("a_file"), {"--train.collective_timeout_s=100"})), dir, "fail", 60);
    CHECK(f.status != 0);
    CHECK(f.status != -1);
    CHECK(f.seconds < 30);  // ended by the abort, not by the 100 s timeout
    CHECK_HAS(f.err, "relgrad train (rank 0 of 2): error: [train] train.out_dir '");
    CHECK_HAS(f.err, "is not a directory");
  }
  SUBCASE("rank 1 hangs (SIGSTOP): rank 0's collective times out and the job ends") {
    Job job = spawn(mpirun_args(2, tiny(dir.file("hang"), {"--train.steps=100000", "--train.collective_timeout_s=4",
                                                           "--train.eval_every=0"})),
                    dir, "hang");
    REQUIRE(wait_for_training(dir.file("hang/log.jsonl"), 60));
    const pid_t rank1 = rank_pid(job.pid, 1);
    REQUIRE(rank1 > 0);
    ::kill(rank1, SIGSTOP);
    Finished f = finish(job, 60);
    CHECK(f.status != 0);
    CHECK(f.status != -1);
    CHECK(f.seconds < 30);
    CHECK_HAS(f.err, "relgrad train (rank 0 of 2): error: [distributed] rank 0 of 2: all_reduce_sum of ");
    CHECK_HAS(f.err, "did not complete within 4 s: another rank has failed or stopped");
    // The heartbeats of a waiting collective name the rank that went silent (train/trainer/distributed_mpi.cpp).
    CHECK_HAS(f.err, "; no word from rank 1 while waiting: lost (a host or network link down), hung or stopped");
  }
  SUBCASE("rank 1 is killed (SIGKILL): mpirun ends the job and names the rank") {
    Job job = spawn(mpirun_args(2, tiny(dir.file("kill"), {"--train.steps=100000", "--train.eval_every=0"})), dir,
                    "kill");
    REQUIRE(wait_for_training(dir.file("kill/log.jsonl"), 60));
    const pid_t rank1 = rank_pid(job.pid, 1);
    REQUIRE(rank1 > 0);
    ::kill(rank1, SIGKILL);
    Finished f = finish(job, 60);
    CHECK(f.status != 0);
    CHECK(f.status != -1);
    CHECK(f.seconds < 30);
    CHECK_HAS(f.out + f.err, "rank 1");
    CHECK_HAS(f.out + f.err, "signal 9");
  }
}

TEST_CASE("distributed mpi: SIGTERM to one rank stops every rank after the same step, with a checkpoint to resume") {
  SKIP_WITHOUT_MPI();
  TempDir dir;
  Job job = spawn(mpirun_args(2, tiny(dir.file("stop"), {"--train.steps=100000", "--train.eval_every=0",
                                                         "--optim.decay=constant"})),
                  dir, "stop");
  REQUIRE(wait_for_training(dir.file("stop/log.jsonl"), 60));
  const pid_t rank1 = rank_pid(job.pid, 1);
  REQUIRE(rank1 > 0);
  ::kill(rank1, SIGTERM);
  Finished f = finish(job, 60);
  CHECK_MESSAGE(f.status == 128 + SIGTERM, f.err);
  CHECK_HAS(f.out, "stopped by signal 15 at step ");
  Checkpoint ck = load_checkpoint(dir.file("stop/checkpoint.safetensors"));
  CHECK(ck.meta.step > 0);
  CHECK_HAS(f.out, "stopped by signal 15 at step " + std::to_string(ck.meta.step) + ";");
}
