// Crash consistency of checkpoint saves (docs/reliability.md), with a real
// child process (tests/kill_save/kill_save_child.cpp) that saves checkpoints in a loop:
//   - "kill save": the parent SIGKILLs it at random moments (seeded), 100 times, mostly in the middle
//     of a save, and after each kill checks that the checkpoint loads and passes its checksum, that
//     its step never goes back and is the last step the child reported as saved (or the one after it,
//     when the kill fell between the rename and the report), that its data belongs to that step, and
//     that temp files are never read and are cleaned by the next save;
//   - "disk full": the child saves under RLIMIT_FSIZE limits from 0 bytes to the file's size → a
//     relgrad::Error naming the file, the previous checkpoint byte-identical, no temp file left;
//   - the temp files a killed writer leaves: the next save removes those of dead processes only.
// (Injected failures of each system call, and /dev/full as a target: tests/test_checkpoint.cpp.)
// Both spawn a fresh process (posix_spawn), so nothing of this test binary's threads is inherited.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "file_testing.h"
#include "testing.h"
#include "layers/linear.h"
#include "train/trainer/checkpoint.h"

extern char** environ;

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of the child's stdout
};

Child spawn_child(const std::vector<std::string>& args) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  std::vector<std::string> all = {RELGRAD_KILL_SAVE_CHILD};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);  // dup2 clears O_CLOEXEC on the child's fd 1
  // One OpenMP thread: the child only copies and hashes, and idle OpenMP workers spinning on a
  // shared machine would slow every save.
  std::vector<std::string> env_strings = {"OMP_NUM_THREADS=1"};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("OMP_NUM_THREADS=", 0) != 0) env_strings.push_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  Child c;
  int rc = posix_spawn(&c.pid, all[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  REQUIRE_MESSAGE(rc == 0, "cannot run ", all[0], ": ", std::strerror(rc));
  c.out = fds[0];
  return c;
}

// Reads exactly n bytes, waiting at most timeout_ms in all; false on EOF or timeout.
bool read_exact(int fd, void* dst, size_t n, int timeout_ms) {
  auto* p = static_cast<char*>(dst);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n > 0) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) continue;
    ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) != 0) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// AtomicFile's temp files of `path` in its directory, and how many of them belong to `pid`.
std::vector<std::string> temps_of(const std::string& path) {
  std::vector<std::string> out;
  const std::string prefix = fs::path(path).filename().string() + ".tmp.";
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) out.push_back(entry.path().filename().string());
  return out;
}

uint64_t inode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_ino);
}

float bias0(const Checkpoint& c) { return static_cast<const float*>(c.model.at("bias").raw_data())[0]; }

constexpr int64_t kWidth = 400;  // Linear(400, 400) + AdamW: a 1.9 MB checkpoint

}  // namespace

TEST_CASE("kill save: SIGKILL at random moments never leaves an unreadable or older checkpoint") {
  TempDir dir;
  const std::string path = dir.file("checkpoint.safetensors");
  const auto start = std::chrono::steady_clock::now();

  // How long one save takes here (files, fsync): the kills are spread over a few saves' time.
  double save_ms = 0;
  int64_t step = 1;
  {
    Child c = spawn_child({"loop", path, std::to_string(kWidth), "1"});
    int64_t reported = 0;
    REQUIRE(read_exact(c.out, &reported, 8, 20000));
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 4; ++k) REQUIRE(read_exact(c.out, &reported, 8, 20000));
    save_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 4;
    ::kill(c.pid, SIGKILL);
    wait_for(c.pid);
    read_all(c.out);
    ::close(c.out);
    step = load_checkpoint(path).meta.step + 1;
  }

  std::mt19937_64 rng(20240607);
  std::uniform_real_distribution<double> delay_ms(0.0, 2.5 * save_ms);
  const int kKills = 100;
  int mid_save = 0;
  int64_t last_step = step - 1;
  for (int k = 0; k < kKills; ++k) {
    CAPTURE(k);
    Child c = spawn_child({"loop", path, std::to_string(kWidth), std::to_string(step)});
    // Kill only once the child has saved once: its first save also cleaned its predecessors' temps.
    int64_t reported = -1;
    REQUIRE_MESSAGE(read_exact(c.out, &reported, 8, 20000), "the child saved nothing in 20 s");
    REQUIRE(reported == step);
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(1000 * delay_ms(rng))));
    REQUIRE(::kill(c.pid, SIGKILL) == 0);
    const int status = wait_for(c.pid);
    CHECK_MESSAGE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL), "child status ", status);
    const std::string rest = read_all(c.out);
    ::close(c.out);
    for (size_t off = 0; off + 8 <= rest.size(); off += 8) std::memcpy(&reported, rest.data() + off, 8);

    // A temp file of this child present now: the kill fell inside a save (after the temp was created,
    // before the rename). Temps of earlier children are gone: this child's first save removed them.
    const std::string mine = fs::path(path).filename().string() + ".tmp." + std::to_string(c.pid) + ".";
    int own = 0, others = 0;
    for (const std::string& t : temps_of(path)) (t.rfind(mine, 0) == 0 ? own : others) += 1;
    CHECK(others == 0);
    CHECK(own <= 1);
    mid_save += own > 0;

    // The checkpoint under its real name: complete, checksum-clean, and the newest committed step.
    Checkpoint ck;
    REQUIRE_NOTHROW(ck = load_checkpoint(path));
    const int64_t got = ck.meta.step;
    CHECK_MESSAGE((got == reported || got == reported + 1), "loaded step ", got, ", last reported ", reported);
    CHECK(got >= last_step);
    CHECK(bias0(ck) == static_cast<float>(got));  // the data is that step's, not a mix of two saves
    last_step = got;
    step = got + 1;
  }
  // The last child's temp (if it died mid-save) is stale now; remove_stale_temps cleans exactly that.
  const size_t left = temps_of(path).size();
  CHECK(left <= 1);
  CHECK(remove_stale_temps(path) == static_cast<int>(left));
  CHECK(temps_of(path).empty());
  CHECK(load_checkpoint(path).meta.step == last_step);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("kill save: ", kKills, " SIGKILLs, ", mid_save, " of them inside a save (temp file present), one save ",
          save_ms, " ms, file ", fs::file_size(path), " bytes, last step ", last_step, ", ", seconds, " s");
  // The kills really do land inside saves: a dozen at least. (How many depends on the save's share of
  // the child's step-and-save cycle: 36-41 of 100 in a release build, 24 once under ASan+UBSan beside
  // another test, where a bound of 25 failed; so the bound is one that holds by a wide margin on both.)
  CHECK(mid_save >= kKills / 8);
}

TEST_CASE("disk full: a save under a file-size limit fails cleanly at every size and keeps the previous checkpoint") {
  TempDir dir;
  const std::string path = dir.file("checkpoint.safetensors");
  const int64_t width = 24;
  // The previous checkpoint, written by an unlimited child.
  {
    Child c = spawn_child({"limited", path, std::to_string(width), std::to_string(int64_t{1} << 40)});
    read_all(c.out);
    ::close(c.out);
    const int status = wait_for(c.pid);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  const std::string previous = read_bytes(path);
  const uint64_t size = previous.size();
  std::vector<uint64_t> limits = {0, 1, 7, 8, 100, 4095, 4096, size / 2, size - 8, size - 1};
  for (uint64_t l = 512; l < size; l += 1021) limits.push_back(l);
  int failures = 0;
  for (uint64_t limit : limits) {
    CAPTURE(limit);
    Child c = spawn_child({"limited", path, std::to_string(width), std::to_string(limit)});
    const std::string message = read_all(c.out);
    ::close(c.out);
    const int status = wait_for(c.pid);
    REQUIRE(WIFEXITED(status));
    CHECK_MESSAGE(WEXITSTATUS(status) == 3, "exit ", WEXITSTATUS(status), ": ", message);
    failures += WEXITSTATUS(status) == 3;
    CHECK_MESSAGE(message.find("[safetensors] " + path + ": write to '" + path + ".tmp.") != std::string::npos, message);
    CHECK_MESSAGE(message.find("File too large") != std::string::npos, message);
    CHECK(read_bytes(path) == previous);
    CHECK(temps_of(path).empty());
  }
  // The control: at exactly the file's size the same save succeeds (the limit is what failed above)
  // and replaces the file (a new inode: the rename happened).
  const uint64_t old_inode = inode_of(path);
  Child c = spawn_child({"limited", path, std::to_string(width), std::to_string(size)});
  read_all(c.out);
  ::close(c.out);
  const int status = wait_for(c.pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(inode_of(path) != old_inode);
  CHECK(read_bytes(path) == previous);  // the same model and step: the same bytes
  CHECK_NOTHROW(load_checkpoint(path));
  CHECK(temps_of(path).empty());
  MESSAGE("disk full: ", failures, " saves under RLIMIT_FSIZE limits from 0 to ", size - 1, " bytes failed cleanly");
}

TEST_CASE("kill save: the next save removes the temp files of writers that died, and nothing else") {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  pid_t dead = ::fork();  // a process that has exited (and been reaped): its pid names no process
  if (dead == 0) ::_exit(0);
  REQUIRE(dead > 0);
  int status = 0;
  REQUIRE(::waitpid(dead, &status, 0) == dead);
  const std::string d = std::to_string(dead), me = std::to_string(::getpid());
  const std::vector<std::string> stale = {"ck.safetensors.tmp." + d + ".0", "ck.safetensors.tmp." + d + ".17"};
  const std::vector<std::string> kept = {
      "ck.safetensors.tmp." + me + ".5",       // this process: possibly a save in progress
      "ck.safetensors.tmp.1.0",                // pid 1 is alive
      "ck.safetensors.tmp." + d + ".x",        // not AtomicFile's name pattern
      "ck.safetensors.tmp." + d,               // idem
      "ck.safetensors.tmp.99999999999999999999.0",  // too many digits for a pid
      "other.safetensors.tmp." + d + ".0",     // another file's temp
      "ck.safetensors.prev"};
  for (const auto& name : stale) write_bytes(dir.file(name), "partial");
  for (const auto& name : kept) write_bytes(dir.file(name), "keep");
  Generator init(3);
  Linear model(2, 2, true, &init);
  save_checkpoint(path, model, nullptr, CheckpointMeta());
  for (const auto& name : stale) CHECK_MESSAGE(!fs::exists(dir.file(name)), name);
  for (const auto& name : kept) CHECK_MESSAGE(fs::exists(dir.file(name)), name);
  CHECK(remove_stale_temps(path) == 0);
  CHECK_NOTHROW(load_checkpoint(path));
}
