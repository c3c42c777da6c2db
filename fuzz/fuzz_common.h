// Shared by the libFuzzer targets in fuzz/ (docs/reliability.md). A target hands the raw input to one
// parser; a relgrad::Error is the expected answer to a bad input and is swallowed. Anything else is a
// finding: a crash, a sanitizer report, another exception (it escapes and libFuzzer reports the
// abort), a hang (-timeout) or an invariant broken on an input the parser accepted (finding()).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/base/error.h"

namespace relgrad::fuzz {

// An accepted input broke a property that must hold (e.g. write-then-read gives the same value).
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

// For the parsers that only read from a path (core/safetensors.h, train/config/config.h): one anonymous
// in-memory file (memfd), rewritten for each input and opened by the parser as /proc/self/fd/N. It
// is a regular file to stat(), so the loaders' size and file-type checks run as on disk, and no
// input ever touches the disk.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("relgrad-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) { std::perror("memfd_create"); std::abort(); }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  // Replaces the contents with `bytes`; returns the path to open.
  const std::string& set(const void* bytes, size_t size) {
    if (ftruncate(fd_, 0) != 0) { std::perror("ftruncate"); std::abort(); }
    const auto* p = static_cast<const char*>(bytes);
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd_, p + done, size - done, static_cast<off_t>(done));
      if (n <= 0) { std::perror("pwrite"); std::abort(); }
      done += static_cast<size_t>(n);
    }
    return path_;
  }
  const std::string& set(const std::string& bytes) { return set(bytes.data(), bytes.size()); }

 private:
  int fd_;
  std::string path_;
};

}  // namespace relgrad::fuzz
