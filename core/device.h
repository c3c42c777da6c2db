// Where a tensor's storage lives: the CPU or CUDA device `index`.
#pragma once
#include <cstddef>
#include <string>

namespace relgrad {

struct Device {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int index = 0) { return {Kind::CUDA, index}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && (kind == Kind::CPU || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  // Parses "cpu", "cuda", "cuda:1"; throws DeviceError otherwise.
  static Device parse(const std::string& name);
};

// True when relgrad was built with CUDA and a CUDA device is present at run time.
bool cuda_available();
// True when relgrad was built with CUDA support (whether or not a GPU is present).
bool cuda_built();
int cuda_device_count();
// The memory a device offers in bytes: the machine's (RAM + swap, cpu_allocator::machine_memory_bytes)
// or the GPU's (cuda::total_memory_bytes); 0 for a GPU relgrad cannot see.
size_t device_memory_bytes(const Device& device);

}  // namespace relgrad
