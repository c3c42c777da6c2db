#include "core/storage.h"

#include "core/allocator.h"
#include "core/base/error.h"
#include "cuda/runtime.h"

namespace relgrad {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
    data_ = cuda::device_malloc(nbytes, device.index);  // throws DeviceError when there is no GPU
    return;
  }
  data_ = cpu_allocator::allocate(nbytes);  // 64-byte aligned: suits AVX-512 loads and Eigen
}

Storage::~Storage() {
  if (device_.is_cuda()) {
    cuda::device_free(data_, device_.index);
  } else {
    cpu_allocator::deallocate(data_, nbytes_);
  }
}

}  // namespace relgrad
