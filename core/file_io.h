// Whole-file I/O with relgrad's two guarantees: a write never leaves a half-written file under its
// name (temp file in the same directory, fsync, rename, fsync of the directory; docs/reliability.md),
// and a read never trusts the file to be small or regular. Errors are relgrad::Error
// "[<who>] <path>: <what>", where `who` names the caller ("safetensors", "plot", "relgrad train", ...).
//
//   AtomicFile out(path, "plot");          // creates "<path>.tmp.<pid>.<n>"
//   out.write(bytes.data(), bytes.size()); // as many times as needed
//   out.commit();                          // fsync + rename over `path`; without it the temp file
//                                          // is removed and `path` keeps its previous contents
//
// Every system call's result is checked: open, each write (a short write is retried, an error such as
// ENOSPC or EFBIG is reported), fsync, close, rename, and the directory's open and fsync. Any failure
// before the rename removes the temp file and leaves `path` as it was. A failed directory fsync is
// reported too, although the new file is then already in place (it is complete; only its survival of
// a power cut is in doubt). An existing `path` that is not a regular file (a device such as /dev/full,
// a FIFO, a directory) is refused before anything is created: renaming over it would replace it.
// So is a symbolic link, whatever it points to: rename() would replace the link itself by a regular
// file (and writing through it would let a link planted in a shared directory redirect the write), so
// relgrad never writes through a link; give the link's target as the path instead.
//
// A process killed mid-write (SIGKILL, power cut) leaves its temp file behind, never a torn `path`.
// Readers open `path` only, so a temp file is never taken for the real one; remove_stale_temps(path)
// deletes the leftovers of writers that are no longer running (save_checkpoint calls it).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace relgrad {

class AtomicFile {
 public:
  AtomicFile(std::string path, std::string who);
  ~AtomicFile();  // removes the temporary file unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* bytes, size_t size);
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
  void commit();
  const std::string& temp_path() const { return temp_path_; }

 private:
  // Throws unless `path` is absent or a regular file (a symlink, FIFO, device or directory is refused).
  static void refuse_unless_replaceable(const std::string& path, const std::string& who);

  std::string path_, who_, temp_path_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Removes "<path>.tmp.<pid>.<n>" files (AtomicFile's temp names for `path`) whose writer process no
// longer exists; returns how many were removed. Temps of live processes (this one included) are kept.
int remove_stale_temps(const std::string& path);

// Fault injection, for tests only: when a hook is set, AtomicFile calls it before each system call
// with the call and the bytes written so far; a nonzero return makes that call fail with that errno
// (the call is not made). Process-wide; pass nullptr to remove it.
enum class FileOp { Create, Write, Fsync, Close, Rename, OpenDir, FsyncDir };
using FileFaultHook = int (*)(FileOp op, uint64_t bytes_written);
void set_file_fault_hook(FileFaultHook hook);

// fsync of a directory, so that renames in it survive a crash (EINVAL/ENOTSUP, a filesystem that
// cannot fsync directories, is accepted). Throws "[<who>] <dir>: ..." when it cannot be opened or synced.
void fsync_directory(const std::string& dir, const std::string& who);

// An advisory lock on a directory that one process at a time may write into (relgrad train's
// train.out_dir): flock(2) on the file "<dir>/.lock", which is created when absent and never deleted
// (deleting a lock file races with a process that has just opened it). The lock belongs to the open
// file, so it ends with the process however that ends (exit, SIGKILL, a crash) and a stale lock cannot
// remain. The holder writes "pid <pid> host <hostname>" into the file, which the refused process
// reads to name it: "[<who>] <what> '<dir>' is in use by process <pid> on <host>, which holds
// <dir>/.lock; ...". A "<dir>/.lock" that is not a regular file (a symlink, a FIFO) is refused.
// Network file systems: on NFS Linux turns flock into a POSIX (fcntl) lock on the server, which
// needs the lock manager (lockd/NLM for NFSv3, built into NFSv4); a file system mounted with
// "nolock", or one that refuses locks (ENOLCK, EOPNOTSUPP, ...), gives no mutual exclusion between
// hosts: then the lock is not taken and warning() says so.
class DirectoryLock {
 public:
  DirectoryLock(const std::string& dir, const std::string& who, const std::string& what = "directory");
  ~DirectoryLock();  // releases the lock (clears the holder line first); the file stays
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  const std::string& path() const { return path_; }
  bool locked() const { return locked_; }
  const std::string& warning() const { return warning_; }  // non-empty when the file system refused locks

 private:
  std::string path_, warning_;
  int fd_ = -1;
  bool locked_ = false;
};

// What a file of stat mode `mode` is, when it is not a regular file ("a directory", "a FIFO", "a
// character device", ...): the words of every "is ..., not a regular file" refusal.
const char* file_kind(mode_t mode);

// write_file_atomic(path, bytes, who): an AtomicFile written in one go.
void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& who);

// The whole of a regular file (FIFOs, directories and devices are refused), at most max_bytes of it
// (a larger file is an error, so a mistaken path cannot exhaust memory).
std::string read_file(const std::string& path, const std::string& who, uint64_t max_bytes = uint64_t(1) << 32);

// FNV-1a 64 of `bytes`, continuing from `hash` (the offset basis for a fresh hash): the checksum of
// checkpoints (train/trainer/checkpoint.h) and token files (train/data/token_file.h).
uint64_t fnv1a64(const void* bytes, size_t size, uint64_t hash = 0xcbf29ce484222325ULL);

// The directory part of a path ("." when there is none).
std::string directory_of(const std::string& path);

}  // namespace relgrad
