// Storage: a ref-counted block of bytes on one device. It knows no shape or dtype; tensors are
// strided views over it, and every view of the same storage shares its version counter, which
// in-place ops bump so that autograd can detect a tensor saved for backward being modified.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace relgrad {

class Storage {
 public:
  // Allocates `nbytes` on `device` (64-byte aligned on the CPU; contents uninitialised).
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
};

}  // namespace relgrad
