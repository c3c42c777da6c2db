// Whole-file I/O with relgrad's two guarantees: a write never leaves a half-written file under its
// name (temp file in the same directory, fsync, rename, fsync of the directory: research/reliability.md
// §2.5), and a read never trusts the file to be small or regular. Errors are relgrad::Error
// "[<who>] <path>: <what>", where `who` names the caller ("safetensors", "plot", "relgrad train", ...).
//
//   AtomicFile out(path, "plot");          // creates "<path>.tmp.<pid>.<n>"
//   out.write(bytes.data(), bytes.size()); // as many times as needed
//   out.commit();                          // fsync + rename over `path`; without it the temp file
//                                          // is removed and `path` keeps its previous contents
#pragma once
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
  std::string path_, who_, temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// write_file_atomic(path, bytes, who): an AtomicFile written in one go.
void write_file_atomic(const std::string& path, const std::string& bytes, const std::string& who);

// The whole of a regular file (FIFOs, directories and devices are refused), at most max_bytes of it
// (a larger file is an error, so a mistaken path cannot exhaust memory).
std::string read_file(const std::string& path, const std::string& who, uint64_t max_bytes = uint64_t(1) << 32);

// The directory part of a path ("." when there is none).
std::string directory_of(const std::string& path);

}  // namespace relgrad
