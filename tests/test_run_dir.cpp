// The run directory and the output files of `relgrad` (docs/cli.md "Run directories"): one run at a
// time in a train.out_dir (an advisory lock that dies with its process), a resume never overwrites
// another run's checkpoint or a later one, a fresh run that fails leaves the earlier run's files as
// they were, and every writer refuses a FIFO, a device or a symbolic link as its target. Also the knobs
// that were valid but unbounded: probe --reach, eval --batches, a batch beyond the machine's memory,
// train.threads above the cores.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_testing.h"
#include "core/file_io.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/run_options.h"
#include "train/music/midi.h"
#include "train/music/music.h"
#include "train/trainer/run.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// relgrad train with a tiny encoder–decoder on the reverse task (about 0.1 s), plus `extra`.
CliResult train_tiny(const std::string& out_dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {
      "train", "--train.out_dir=" + out_dir, "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
      "--model.n_encoder_layers=1", "--model.n_decoder_layers=1", "--model.cross.max_length=8",
      "--data.num_symbols=6", "--data.min_len=3", "--data.max_len=6", "--data.batch_size=4",
      "--optim.warmup_steps=2", "--train.steps=6", "--train.log_every=2", "--train.eval_every=3",
      "--train.eval_batches=2", "--train.save_every=0", "--train.samples=0", "--train.target_accuracy=0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_relgrad(args);
}

// Every regular file of a directory (but the lock file), name → bytes.
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != ".lock")
      files[e.path().filename().string()] = read_bytes(e.path().string());
  return files;
}

std::vector<std::string> names(const std::map<std::string, std::string>& files) {
  std::vector<std::string> n;
  for (const auto& [name, bytes] : files) n.push_back(name);
  return n;
}

// Two runs into one directory: seed 2's files in place, seed 1's as *.prev.
struct TwoRuns {
  TempDir dir;
  std::string run = dir.file("run");
  TwoRuns() {
    CliResult first = train_tiny(run, {"--train.seed=1"});
    REQUIRE_MESSAGE(first.code == 0, first.err);
    CliResult second = train_tiny(run, {"--train.seed=2"});
    REQUIRE_MESSAGE(second.code == 0, second.err);
    REQUIRE(contains(second.out, "held an earlier run"));
    REQUIRE(fs::exists(run + "/checkpoint.prev.safetensors"));
    REQUIRE(fs::exists(run + "/log.prev.jsonl"));
  }
};

}  // namespace

// ---- one run at a time -------------------------------------------------------------------------------

TEST_CASE("run dir: DirectoryLock is exclusive, names its holder, and keeps its file when released") {
  TempDir dir;
  const std::string d = dir.path.string();
  {
    DirectoryLock held(d, "test", "train.out_dir");
    CHECK(held.locked());
    CHECK(held.warning().empty());
    CHECK(read_bytes(d + "/.lock").rfind("pid " + std::to_string(::getpid()) + " host ", 0) == 0);
    // flock belongs to the open file, so a second open in this very process is refused too.
    try {
      DirectoryLock second(d, "test", "train.out_dir");
      FAIL("a second lock on a locked directory was granted");
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK_MESSAGE(
          contains(m, "train.out_dir '" + d + "' is in use by process " + std::to_string(::getpid())), m);
      CHECK_MESSAGE(contains(m, d + "/.lock"), m);
    }
  }
  // Released: the file stays (deleting it would race with a process that just opened it), empty.
  CHECK(fs::exists(d + "/.lock"));
  CHECK(read_bytes(d + "/.lock").empty());
  DirectoryLock again(d, "test");
  CHECK(again.locked());
}

TEST_CASE("run dir: a .lock that is a symbolic link or a FIFO is refused, nothing is written through it") {
  TempDir dir;
  const std::string victim = dir.file("victim.txt");
  write_bytes(victim, "keep me");
  fs::create_directories(dir.file("a"));
  fs::create_symlink(victim, dir.file("a/.lock"));
  CHECK_THROWS_WITH_AS(DirectoryLock(dir.file("a"), "test"), doctest::Contains("symbolic link"), Error);
  CHECK(read_bytes(victim) == "keep me");
  fs::create_directories(dir.file("b"));
  REQUIRE(::mkfifo(dir.file("b/.lock").c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(DirectoryLock(dir.file("b"), "test"), doctest::Contains("a FIFO, not a regular file"),
                       Error);
}

TEST_CASE("run dir: train into a directory another process holds is refused with its pid, then not") {
  TempDir dir;
  const std::string run = dir.file("run");
  fs::create_directories(run);
  // The holder: a child process that takes the lock, says so on a pipe and waits to be killed.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      DirectoryLock lock(run, "child");
      if (::write(ready[1], "L", 1) != 1) ::_exit(2);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);

  CliResult refused = train_tiny(run);
  CHECK_CLI(refused, 1);
  CHECK_MESSAGE(contains(refused.err, "relgrad train: error: [train] train.out_dir '" + run +
                                          "' is in use by process " + std::to_string(child)),
                refused.err);
  CHECK(contains(refused.err, "choose another train.out_dir"));
  CHECK_FALSE(fs::exists(run + "/checkpoint.safetensors"));  // refused before anything was written
  CHECK_FALSE(fs::exists(run + "/log.jsonl"));

  // The lock dies with its process, however it ends: SIGKILL, no clean-up ran.
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CliResult after = train_tiny(run);
  CHECK_CLI(after, 0);
  CHECK(fs::exists(run + "/checkpoint.safetensors"));
}

// ---- a resume never destroys a newer run -----------------------------------------------------------------

TEST_CASE("run dir: resuming checkpoint.prev.safetensors in its directory keeps the newer run") {
  TwoRuns t;
  const auto before = files_of(t.run);
  CliResult r = run_relgrad({"train", "--resume", t.run + "/checkpoint.prev.safetensors", "--train.steps=8"});
  CHECK_CLI(r, 1);
  CHECK_MESSAGE(
      contains(r.err, "cannot resume from " + t.run + "/checkpoint.prev.safetensors into train.out_dir " +
                          t.run + ": " + t.run +
                          "/checkpoint.safetensors is another run's (train.seed is 2 there and 1 here)"),
      r.err);
  CHECK(contains(r.err, "--train.out_dir=DIR"));
  CHECK(files_of(t.run) == before);  // every file byte for byte, and no new one

  // Elsewhere it continues, and in place (the usual resume) too.
  CliResult elsewhere = run_relgrad({"train", "--resume", t.run + "/checkpoint.prev.safetensors",
                                     "--train.steps=8", "--train.out_dir=" + t.dir.file("continued")});
  CHECK_CLI(elsewhere, 0);
  CHECK(contains(elsewhere.out, "done: 8 steps"));
  CHECK(files_of(t.run) == before);
  CliResult in_place =
      run_relgrad({"train", "--resume", t.run + "/checkpoint.safetensors", "--train.steps=8"});
  CHECK_CLI(in_place, 0);
  CHECK(contains(in_place.out, "done: 8 steps"));
}

TEST_CASE("run dir: resuming an earlier copy of a run in its directory keeps the later checkpoint") {
  TempDir dir;
  const std::string run = dir.file("run");
  REQUIRE(train_tiny(run, {"--train.steps=4"}).code == 0);
  const std::string early = dir.file("step4.safetensors");
  fs::copy_file(run + "/checkpoint.safetensors", early);
  REQUIRE(run_relgrad({"train", "--resume", run + "/checkpoint.safetensors", "--train.steps=6"}).code == 0);
  const auto before = files_of(run);
  // The copy lies outside the run: --train.out_dir sends the resume into the run's directory.
  CliResult r = run_relgrad({"train", "--resume", early, "--train.steps=8", "--train.out_dir=" + run});
  CHECK_CLI(r, 1);
  CHECK_MESSAGE(contains(r.err, run + "/checkpoint.safetensors is at step 6, later than the resumed step 4"),
                r.err);
  CHECK(files_of(run) == before);
  // The same copy at the step the directory holds is this run at that step: nothing is lost.
  const std::string same = dir.file("step6.safetensors");
  fs::copy_file(run + "/checkpoint.safetensors", same);
  CliResult ok = run_relgrad({"train", "--resume", same, "--train.steps=8", "--train.out_dir=" + run});
  CHECK_CLI(ok, 0);
}

TEST_CASE("run dir: a resume into a directory holding a log but no checkpoint is refused") {
  TwoRuns t;
  fs::rename(t.run + "/checkpoint.safetensors", t.dir.file("moved.safetensors"));
  const auto before = files_of(t.run);
  CliResult r = run_relgrad({"train", "--resume", t.run + "/checkpoint.prev.safetensors", "--train.steps=8"});
  CHECK_CLI(r, 1);
  CHECK_MESSAGE(contains(r.err, t.run + "/log.jsonl is there without a checkpoint"), r.err);
  CHECK(files_of(t.run) == before);
}

// ---- a fresh run that fails rotates nothing ------------------------------------------------------------

TEST_CASE("run dir: a fresh run failing before its first checkpoint leaves both earlier runs intact") {
  TwoRuns t;
  const auto before = files_of(t.run);
  REQUIRE(names(before) == std::vector<std::string>{"checkpoint.prev.safetensors", "checkpoint.safetensors",
                                                    "log.jsonl", "log.prev.jsonl", "loss.svg"});
  CliResult r = train_tiny(t.run, {"--train.seed=3", "--optim.lr=1e308"});
  CHECK_CLI(r, 3);
  CHECK_MESSAGE(
      contains(r.err, "No checkpoint of this run was written before this step; the earlier run's files in " +
                          t.run + " are left as they were"),
      r.err);
  CHECK(files_of(t.run) == before);  // nothing renamed, nothing replaced, no log.new.jsonl left behind

  // A run that succeeds rotates at its first checkpoint: seed 2's files become *.prev, byte for byte.
  CliResult third = train_tiny(t.run, {"--train.seed=3", "--train.save_every=2"});
  CHECK_CLI(third, 0);
  const auto after = files_of(t.run);
  CHECK(after.at("checkpoint.prev.safetensors") == before.at("checkpoint.safetensors"));
  CHECK(after.at("log.prev.jsonl") == before.at("log.jsonl"));
  CHECK(after.at("checkpoint.safetensors") != before.at("checkpoint.safetensors"));
  CHECK(after.count("log.new.jsonl") == 0);
  CHECK(after.count("checkpoint.new.safetensors") == 0);
  // The new log holds this run's records from its first step on (written to log.new.jsonl before
  // the rotation, then renamed): steps 2, 3 (eval), 4, 6.
  CHECK(contains(after.at("log.jsonl"), "{\"event\":\"train\",\"step\":2,"));
  CHECK(contains(after.at("log.jsonl"), "{\"event\":\"train\",\"step\":6,"));
}

TEST_CASE("run dir: a resume that fails at its first step leaves the log as it was, records after the step too") {
  TempDir dir;
  const std::string run = dir.file("run");
  REQUIRE(train_tiny(run).code == 0);  // checkpoint at step 6
  // As if the run had been killed after logging step 8 but before saving it.
  const std::string log = run + "/log.jsonl";
  write_bytes(log, read_bytes(log) + "{\"event\":\"train\",\"step\":8,\"loss\":1.5}\n");
  const auto before = files_of(run);
  CliResult r = run_relgrad({"train", "--resume", run + "/checkpoint.safetensors", "--train.steps=10",
                             "--optim.lr=1e308"});
  CHECK_CLI(r, 3);
  CHECK(files_of(run) == before);
  // A resume that trains drops the records after its step (they describe steps it redoes).
  CliResult ok = run_relgrad({"train", "--resume", run + "/checkpoint.safetensors", "--train.steps=7"});
  CHECK_CLI(ok, 0);
  CHECK_FALSE(contains(read_bytes(log), "\"step\":8,\"loss\":1.5}"));
  CHECK(contains(read_bytes(log), "{\"event\":\"train\",\"step\":7,"));
}

// ---- every writer refuses FIFOs, devices and symbolic links ---------------------------------------

TEST_CASE("run dir: the atomic writer refuses a symbolic link target, leaving link and target alone") {
  TempDir dir;
  const std::string target = dir.file("real.txt"), link = dir.file("link.txt");
  write_bytes(target, "target");
  fs::create_symlink(target, link);
  try {
    write_file_atomic(link, "new", "test");
    FAIL("a symbolic link was replaced");
  } catch (const Error& e) {
    CHECK_MESSAGE(
        contains(e.what(), "link.txt: is a symbolic link (to '" + target + "'): refusing to replace it"),
        e.what());
  }
  CHECK(fs::is_symlink(link));
  CHECK(read_bytes(target) == "target");
  // A dangling link is refused too (rename would replace it; following it would create its target).
  fs::create_symlink(dir.file("nowhere"), dir.file("dangling"));
  CHECK_THROWS_AS(write_file_atomic(dir.file("dangling"), "new", "test"), Error);
  CHECK_FALSE(fs::exists(dir.file("nowhere")));
  // A link in the directory part of the path is an ordinary way to place files: it is followed.
  fs::create_directories(dir.file("d"));
  fs::create_directory_symlink(dir.file("d"), dir.file("dlink"));
  write_file_atomic(dir.file("dlink/x.txt"), "through", "test");
  CHECK(read_bytes(dir.file("d/x.txt")) == "through");
}

TEST_CASE("run dir: render -o goes through the atomic writer (FIFO and symlink refused, no temp left)") {
  TempDir dir;
  const std::vector<Note> notes{{60, 80, 0.0, 0.5, 0}};
  write_midi(dir.file("a.mid"), midi_of(notes));
  // A stand-in for FluidSynth: writes 100 bytes to the file after -F, as a render would.
  const std::string bin = dir.file("bin");
  fs::create_directories(bin);
  write_bytes(bin + "/fluidsynth",
              "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -F ] && out=$2; shift; done\nhead -c 100 "
              "/dev/zero > \"$out\"\n");
  fs::permissions(bin + "/fluidsynth", fs::perms::owner_all);
  write_bytes(dir.file("font.sf2"), std::string("RIFF\4\0\0\0sfbk", 12));  // passes render's SoundFont check
  const std::string fifo = dir.file("out.fifo"), real = dir.file("real.wav"), link = dir.file("link.wav");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  write_bytes(real, "earlier render");
  fs::create_symlink(real, link);

  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
  ::setenv("PATH", (bin + ":" + saved).c_str(), 1);
  auto render = [&](const std::string& out) {
    return run_relgrad({"render", dir.file("a.mid"), "-o", out, "--soundfont", dir.file("font.sf2")});
  };
  CliResult to_fifo = render(fifo);
  CliResult to_link = render(link);
  CliResult to_file = render(dir.file("new.wav"));
  ::setenv("PATH", saved.c_str(), 1);

  CHECK_CLI(to_fifo, 1);
  CHECK_MESSAGE(
      contains(to_fifo.err,
               "[render] " + fifo + ": exists and is a FIFO, not a regular file: refusing to replace it"),
      to_fifo.err);
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK_CLI(to_link, 1);
  CHECK_MESSAGE(contains(to_link.err, "is a symbolic link"), to_link.err);
  CHECK(fs::is_symlink(link));
  CHECK(read_bytes(real) == "earlier render");
  CHECK_CLI(to_file, 0);
  CHECK(read_bytes(dir.file("new.wav")).size() == 100);
  for (const auto& e : fs::directory_iterator(dir.path))  // no temporary file of any render is left
    CHECK_MESSAGE(e.path().filename().string().find(".tmp.") == std::string::npos, e.path());
}

// ---- knobs that were valid but unbounded ----------------------------------------------------------------

TEST_CASE("bounded knobs: probe --reach beyond what the model shows is a usage error, before any picture") {
  TempDir dir;
  const std::string run = dir.file("run");
  REQUIRE(train_tiny(run, {"--train.steps=2"}).code == 0);
  const std::string ck = run + "/checkpoint.safetensors";
  // The tiny model's decoder self-attention is T5 with max_distance 128 (the default): its bias
  // reaches offsets up to 128, further than the batch (at most 7 tokens) or the cross table (7).
  for (const std::string reach : {"129", "100000"}) {
    CliResult r = run_relgrad({"probe", ck, "--reach", reach, "--out", dir.file("p")});
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(
        contains(r.err,
                 "[probe] --reach " + reach +
                     " is beyond any offset this model shows: the model's "
                     "positional tables reach offsets up to 128 (model.decoder_self.max_distance); give "
                     "--reach 128 or less"),
        r.err);
    CHECK_FALSE(fs::exists(dir.file("p")));
  }
  CliResult ok = run_relgrad({"probe", ck, "--reach", "128", "--out", dir.file("p")});
  CHECK_CLI(ok, 0);
  // Without T5 the bound is the batch's longest offset (or the seed table's 7 in cross-attention).
  const std::string plain = dir.file("plain");
  REQUIRE(train_tiny(plain, {"--train.steps=2", "--model.encoder_self.scheme=none",
                             "--model.decoder_self.scheme=none"})
              .code == 0);
  CliResult far =
      run_relgrad({"probe", plain + "/checkpoint.safetensors", "--reach", "8", "--out", dir.file("q")});
  CHECK_CLI(far, 2);
  CHECK_MESSAGE(contains(far.err, "up to 7 (model.cross.max_length); give --reach 7 or less"), far.err);
}

TEST_CASE("bounded knobs: eval --batches above 100000 is a usage error, evaluate reports its progress") {
  TempDir dir;
  const std::string run = dir.file("run");
  REQUIRE(train_tiny(run, {"--train.steps=2"}).code == 0);
  CliResult r = run_relgrad({"eval", run + "/checkpoint.safetensors", "--batches", "1000000000"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "[eval] --batches 1000000000 is more than the limit of 100000"), r.err);
  CHECK_CLI(run_relgrad({"eval", run + "/checkpoint.safetensors", "--batches", "3"}), 0);
  // The hook `relgrad eval` prints its progress line from: once per batch, counting up.
  LoadedRun loaded = load_run(run + "/checkpoint.safetensors");
  RunData data(loaded.config);
  std::vector<int64_t> seen;
  evaluate(*loaded.model, data.dataset(), 4, nullptr, [&](int64_t done) { seen.push_back(done); });
  CHECK(seen == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("bounded knobs: a batch far beyond the memory is exit 4 with the estimate, before it is built") {
  TempDir dir;
  const std::string run = dir.file("run");
  CliResult r = train_tiny(run, {"--data.batch_size=100000000"});
  CHECK_CLI(r, 4);
  CHECK_MESSAGE(
      contains(r.err, "relgrad train: error: [memory] out of memory: a training step needs at least "),
      r.err);
  CHECK_MESSAGE(contains(r.err,
                         "100000000 rows of at least 3 source and 1 target tokens, before any is allocated), "
                         "more than the "),
                r.err);
  CHECK(contains(r.err, "(config keys: data.batch_size"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(run));  // refused before train.out_dir is even created
  // A batch that fits is not refused by the estimate (it is a lower bound, not a guess).
  CHECK_CLI(train_tiny(dir.file("fits"), {"--data.batch_size=64", "--train.steps=2"}), 0);
}

TEST_CASE("bounded knobs: train.threads above the cores runs capped at the cores, with one warning line on stderr") {
  TempDir dir;
  const int before = omp_get_max_threads();
  const int cores = omp_get_num_procs();
  std::string warning;
  CliResult many;
  {
    CerrCapture captured;
    many = train_tiny(dir.file("many"), {"--train.threads=" + std::to_string(cores + 1), "--train.steps=2"});
    warning = captured.text.str();
  }
  omp_set_num_threads(before);  // train.threads is process-wide: the other tests keep their count
  CHECK_CLI(many, 0);
  CHECK_MESSAGE(
      contains(warning, "relgrad train: warning: [config] train.threads = " + std::to_string(cores + 1) +
                            " is more than the " + std::to_string(cores) + " cores this process may use"),
      warning);
  CHECK(std::count(warning.begin(), warning.end(), '\n') == 1);
  // The run goes on with as many threads as cores (train/trainer/thread_policy.h), as its banner says.
  CHECK_MESSAGE(contains(many.out, " parameters, " + std::to_string(cores) + (cores == 1 ? " thread," : " threads,")),
                many.out);
  std::string quiet;
  CliResult fine;
  {
    CerrCapture captured;
    fine = train_tiny(dir.file("fine"), {"--train.threads=1", "--train.steps=2"});
    quiet = captured.text.str();
  }
  omp_set_num_threads(before);
  CHECK_CLI(fine, 0);
  CHECK(quiet.empty());
}
