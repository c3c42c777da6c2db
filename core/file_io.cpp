#include "core/file_io.h"

#include <fcntl.h>
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

}  // namespace

std::string directory_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  IO_CHECK(!path_.empty(), who_, path_, "empty file name");
  static std::atomic<uint64_t> counter{0};
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
    ssize_t put = ::write(fd_, p, std::min<size_t>(size, 1u << 30));
    if (put < 0 && errno == EINTR) continue;
    IO_CHECK(put > 0, who_, path_, "write to '", temp_path_, "' failed: ", put < 0 ? std::strerror(errno) : "no progress");
    p += put;
    size -= static_cast<size_t>(put);
  }
}

void AtomicFile::commit() {
  IO_CHECK(fd_ >= 0 && !committed_, who_, path_, "commit twice");
  // fsync before rename: otherwise a crash can leave the new name pointing at unwritten blocks.
  IO_CHECK(::fsync(fd_) == 0, who_, path_, "fsync of '", temp_path_, "' failed: ", std::strerror(errno));
  int fd = fd_;
  fd_ = -1;  // close() releases the descriptor even when it fails, so never close it twice
  IO_CHECK(::close(fd) == 0, who_, path_, "close of '", temp_path_, "' failed: ", std::strerror(errno));
  IO_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, who_, path_, "rename of '", temp_path_,
           "' failed: ", std::strerror(errno));
  committed_ = true;
  // fsync the directory so that the rename itself survives a crash.
  std::string dir = directory_of(path_);
  FdGuard dir_fd{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  IO_CHECK(dir_fd.fd >= 0, who_, path_, "cannot open directory '", dir, "' to fsync it: ", std::strerror(errno));
  // Some filesystems cannot fsync a directory (EINVAL); the file itself is complete, so that is fine.
  int rc = ::fsync(dir_fd.fd);
  IO_CHECK(rc == 0 || errno == EINVAL || errno == ENOTSUP, who_, path_, "fsync of directory '", dir,
           "' failed: ", std::strerror(errno));
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
