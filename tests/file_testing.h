// Shared by the file-format tests (safetensors, checkpoints, state_dict): a temporary directory and
// raw byte I/O for truncation and byte-flip sweeps.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "testing.h"

namespace relgrad::testing {

// A fresh directory under /tmp, removed with everything in it at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "relgrad_test_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  // Remove first: truncating a file with data makes ext4 flush it on close (auto_da_alloc), which
  // turns the sweeps from milliseconds into seconds.
  std::remove(path.c_str());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Offset of a safetensors file's data section: 8 bytes of header length, then the header.
inline size_t safetensors_data_start(const std::string& bytes) {
  uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[k])) << (8 * k);
  return 8 + static_cast<size_t>(n);
}

}  // namespace relgrad::testing
