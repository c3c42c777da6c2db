#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/base/error.h"
#include "cuda/runtime.h"

namespace relgrad {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
    data_ = cuda::device_malloc(nbytes, device.index);  // throws DeviceError when there is no GPU
    return;
  }
  // 64-byte alignment suits AVX-512 loads and Eigen; aligned_alloc wants a multiple of the alignment.
  size_t rounded = ((nbytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  data_ = std::aligned_alloc(64, rounded);
  RG_CHECK(data_ != nullptr, "alloc", "out of memory: could not allocate ", nbytes,
           " bytes on the CPU (reduce the batch size or sequence length)");
}

Storage::~Storage() {
  if (device_.is_cuda()) {
    cuda::device_free(data_, device_.index);
  } else {
    std::free(data_);
  }
}

}  // namespace relgrad
