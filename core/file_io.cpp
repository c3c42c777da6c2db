#include "core/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/base/error.h"

// "[<who>] <path>: <what>"
#define IO_CHECK(cond, who, path, ...) RG_CHECK(cond, who_or(who), path, ": ", __VA_ARGS__)

namespace relgrad {
namespace {

const std::string& who_or(const std::string& who) {
  static const std::string fallback = "file";
  return who.empty() ? fallback : who;
}

struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

std::atomic<FileFaultHook> g_fault_hook{nullptr};

// The errno a test's fault hook injects for this call, or 0 (then the real call is made).
int injected(FileOp op, uint64_t bytes_written) {
  FileFaultHook hook = g_fault_hook.load();
  return hook ? hook(op, bytes_written) : 0;
}

// Makes the call, or, when the fault hook injects an error for it, sets errno and returns -1.
template <class Call>
auto call_or_fail(FileOp op, uint64_t bytes_written, Call call) -> decltype(call()) {
  if (int error = injected(op, bytes_written)) {
    errno = error;
    return -1;
  }
  return call();
}

}  // namespace

void set_file_fault_hook(FileFaultHook hook) { g_fault_hook.store(hook); }

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

uint64_t fnv1a64(const void* bytes, size_t size, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t k = 0; k < size; ++k) {
    hash ^= p[k];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  IO_CHECK(!path_.empty(), who_, path_, "empty file name");
  // rename() would replace a device node, FIFO, empty directory or symbolic link by a regular file (as
  // root, saving to /dev/full would delete the device), so only a regular file (or nothing) may be
  // replaced; a link is judged as itself (lstat): relgrad never writes through one, so a link planted in
  // a shared directory cannot aim the write elsewhere (refuse_unless_replaceable, after commit()).
  refuse_unless_replaceable(path_, who_);
  static std::atomic<uint64_t> counter{0};
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = call_or_fail(FileOp::Create, 0, [&] {
    return ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  });
  IO_CHECK(fd_ >= 0, who_, path_, "cannot create temporary file '", temp_path_, "': ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* bytes, size_t size) {
  IO_CHECK(fd_ >= 0 && !committed_, who_, path_, "write after commit");
  const auto* p = static_cast<const char*>(bytes);
  while (size > 0) {
    ssize_t put = call_or_fail(FileOp::Write, written_, [&] { return ::write(fd_, p, std::min<size_t>(size, 1u << 30)); });
    if (put < 0 && errno == EINTR) continue;
    IO_CHECK(put > 0, who_, path_, "write to '", temp_path_, "' failed after ", written_, " bytes: ",
             put < 0 ? std::strerror(errno) : "no progress");
    p += put;
    size -= static_cast<size_t>(put);
    written_ += static_cast<uint64_t>(put);
  }
}

void AtomicFile::commit() {
  IO_CHECK(fd_ >= 0 && !committed_, who_, path_, "commit twice");
  // fsync before rename: otherwise a crash can leave the new name pointing at unwritten blocks.
  IO_CHECK(call_or_fail(FileOp::Fsync, written_, [&] { return ::fsync(fd_); }) == 0, who_, path_, "fsync of '",
           temp_path_, "' failed: ", std::strerror(errno));
  int fd = fd_;
  fd_ = -1;  // close() releases the descriptor even when it fails, so never close it twice
  // NFS and some FUSE filesystems report a failed write-back only here.
  int closed = ::close(fd);
  if (int error = injected(FileOp::Close, written_)) closed = -1, errno = error;
  IO_CHECK(closed == 0, who_, path_, "close of '", temp_path_, "' failed: ", std::strerror(errno));
  IO_CHECK(call_or_fail(FileOp::Rename, written_, [&] { return ::rename(temp_path_.c_str(), path_.c_str()); }) == 0,
           who_, path_, "rename of '", temp_path_, "' failed: ", std::strerror(errno));
  committed_ = true;
  // fsync the directory so that the rename itself survives a crash.
  std::string dir = directory_of(path_);
  FdGuard dir_fd{call_or_fail(FileOp::OpenDir, written_, [&] { return ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); })};
  IO_CHECK(dir_fd.fd >= 0, who_, path_, "cannot open directory '", dir, "' to fsync it: ", std::strerror(errno));
  // Some filesystems cannot fsync a directory (EINVAL); the file itself is complete, so that is fine.
  int rc = call_or_fail(FileOp::FsyncDir, written_, [&] { return ::fsync(dir_fd.fd); });
  IO_CHECK(rc == 0 || errno == EINVAL || errno == ENOTSUP, who_, path_, "fsync of directory '", dir,
           "' failed: ", std::strerror(errno));
}

void AtomicFile::refuse_unless_replaceable(const std::string& path, const std::string& who) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there (or nothing to see): the create will tell
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    const std::string to = n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string("?");
    IO_CHECK(false, who, path, "is a symbolic link (to '", to, "'): refusing to replace it; ",
             "give the path of the file itself, or remove the link");
  }
  IO_CHECK(S_ISREG(st.st_mode), who, path, "exists and is ", file_kind(st.st_mode),
           ", not a regular file: ", "refusing to replace it");
}

int remove_stale_temps(const std::string& path) {
  const std::string dir = directory_of(path);
  const size_t slash = path.find_last_of('/');
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;  // nothing to clean where nothing can be listed; the save itself will report problems
  int removed = 0;
  const pid_t self = ::getpid();
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // Exactly "<pid>.<n>", both decimal: anything else is not ours to delete.
    const std::string rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    auto digits = [](const std::string& s) {  // at most 10: a pid fits, and stoll cannot overflow
      return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (dot == std::string::npos || !digits(rest.substr(0, dot)) || !digits(rest.substr(dot + 1))) continue;
    const long long pid = std::stoll(rest.substr(0, dot));
    if (pid <= 0 || pid > INT32_MAX || pid == self) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

void fsync_directory(const std::string& dir, const std::string& who) {
  FdGuard dir_fd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  IO_CHECK(dir_fd.fd >= 0, who, dir, "cannot open the directory to fsync it: ", std::strerror(errno));
  IO_CHECK(::fsync(dir_fd.fd) == 0 || errno == EINVAL || errno == ENOTSUP, who, dir,
           "fsync of the directory failed: ", std::strerror(errno));
}

// ---- DirectoryLock -------------------------------------------------------------------------------
namespace {
// "pid 123 host h" as the refused process shows it; the file's bytes are whatever is there, so only
// printable characters are kept.
std::string holder_text(const std::string& raw) {
  std::string line;
  for (char c : raw.substr(0, 200)) {
    if (c == '\n') break;
    if (c >= 32 && c < 127) line += c;
  }
  // "pid <digits>", then " host <name>" when the holder knew its name.
  if (line.rfind("pid ", 0) == 0) {
    const size_t end = std::min(line.find_first_not_of("0123456789", 4), line.size());
    const std::string pid = line.substr(4, end - 4);
    const std::string host = line.compare(end, 6, " host ") == 0 ? line.substr(end + 6) : "";
    if (!pid.empty() && pid.size() <= 10) return "process " + pid + (host.empty() ? "" : " on host " + host);
  }
  return line.empty() ? "another process (the lock file does not name it, or not yet)"
                      : "another process ('" + line + "')";
}
}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& who, const std::string& what)
    : path_(dir + "/.lock") {
  // O_NOFOLLOW: the holder line is written into this file, so a planted symlink must not redirect it;
  // O_NONBLOCK: a FIFO under that name is not waited on (it is refused below).
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  IO_CHECK(fd_ >= 0, who, path_, "cannot open the lock file of ", what, " '", dir,
           "': ", errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = file_kind(st.st_mode);
    ::close(fd_);
    fd_ = -1;
    IO_CHECK(false, who, path_, "the lock file of ", what, " '", dir, "' is ", kind, ", not a regular file");
  }
  int rc;
  while ((rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc != 0 && errno == EWOULDBLOCK) {
    char raw[256];
    const ssize_t n = ::pread(fd_, raw, sizeof raw, 0);
    const std::string holder = holder_text(n > 0 ? std::string(raw, static_cast<size_t>(n)) : std::string());
    ::close(fd_);
    fd_ = -1;
    throw Error("[" + who_or(who) + "] " + what + " '" + dir + "' is in use by " + holder + ", which holds " +
                path_ + ": wait for that run to end, or choose another " + what);
  }
  if (rc != 0) {  // ENOLCK, EOPNOTSUPP, EINVAL, ...: the file system keeps no locks
    warning_ = "[" + who_or(who) + "] " + what + " '" + dir + "': cannot lock " + path_ + " (" +
               std::strerror(errno) + "): this file system keeps no locks, so nothing stops a second run " +
               "from writing into it";
    return;
  }
  locked_ = true;
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  const std::string line = "pid " + std::to_string(::getpid()) + " host " + (host[0] ? host : "?") + "\n";
  // The holder line only names this process to a refused one: a failure to write it changes nothing.
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) < 0) {
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  if (locked_ && ::ftruncate(fd_, 0) != 0) {  // no holder line is left once the lock is free
  }
  ::close(fd_);  // releases the lock
}

void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& who) {
  AtomicFile out(path, who);
  out.write(bytes);
  out.commit();
}

std::string read_file(const std::string& path, const std::string& who, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (it is refused below).
  FdGuard file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  IO_CHECK(file.fd >= 0, who, path, "cannot open: ", std::strerror(errno));
  struct stat st {};
  IO_CHECK(::fstat(file.fd, &st) == 0, who, path, "cannot stat: ", std::strerror(errno));
  IO_CHECK(S_ISREG(st.st_mode), who, path, "not a regular file");
  auto size = static_cast<uint64_t>(st.st_size);
  IO_CHECK(size <= max_bytes, who, path, "file has ", size, " bytes, more than the limit of ", max_bytes);
  std::string bytes(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t got = ::pread(file.fd, bytes.data() + done, std::min<uint64_t>(size - done, 1u << 30),
                          static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    IO_CHECK(got >= 0, who, path, "read failed: ", std::strerror(errno));
    if (got == 0) break;  // the file shrank while being read: return what is there
    done += static_cast<uint64_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace relgrad
