// Philox draws and dropout on the GPU (see cuda/random.h). One thread per element, grid-stride: each
// element's numbers depend only on its index, so the launch geometry cannot change the result.
#include "core/base/philox.h"
#include "cuda/common.cuh"
#include "cuda/random.h"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

// x, out, mask (n), contiguous. The CPU loop of core/backend/random.cpp, element for element.
template <class T>
__global__ void dropout_kernel(const T* x, T* out, T* mask, int64_t n, uint64_t seed, uint64_t offset, uint64_t base,
                               double p, T scale, bool drop_all) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    bool keep = false;
    if (!drop_all) {
      const philox::Block b = philox::draw(seed, offset, base + static_cast<uint64_t>(i));
      keep = philox::uniform(b.x[0], b.x[1]) >= p;
    }
    mask[i] = keep ? scale : T(0);
    out[i] = keep ? x[i] * scale : T(0);
  }
}

// out (n), contiguous.
template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const philox::Block b = philox::draw(seed, offset, static_cast<uint64_t>(i));
    out[i] = static_cast<T>(philox::uniform(b.x[0], b.x[1]));
  }
}

// out (n), contiguous; range = high - low > 0.
template <class T>
__global__ void randint_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, int64_t low, uint64_t range) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const philox::Block b = philox::draw(seed, offset, static_cast<uint64_t>(i));
    const uint64_t bits = (static_cast<uint64_t>(b.x[0]) << 32) | b.x[1];
    out[i] = static_cast<T>(static_cast<double>(low + static_cast<int64_t>(bits % range)));
  }
}

}  // namespace

void dropout_forward(DType dtype, const void* x, void* out, void* mask, int64_t n, uint64_t seed, uint64_t offset,
                     uint64_t base, double p, double scale, bool drop_all, int device) {
  const char* op = "cuda_dropout";
  check_device(device, op);
  if (n <= 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    dropout_kernel<T><<<grid_size(n), kBlockSize>>>(static_cast<const T*>(x), static_cast<T*>(out),
                                                    static_cast<T*>(mask), n, seed, offset, base, p,
                                                    static_cast<T>(scale), drop_all);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void rand_uniform(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t offset, int device) {
  const char* op = "cuda_rand";
  check_device(device, op);
  if (n <= 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    uniform_kernel<T><<<grid_size(n), kBlockSize>>>(static_cast<T*>(out), n, seed, offset);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void rand_int(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
              int device) {
  const char* op = "cuda_randint";
  check_device(device, op);
  RG_CHECK(high > low, op, "empty range [", low, ", ", high, ")");
  if (n <= 0) return;
  DeviceGuard guard(device, op);
  const uint64_t range = static_cast<uint64_t>(high - low);
  dispatch_all(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    randint_kernel<T><<<grid_size(n), kBlockSize>>>(static_cast<T*>(out), n, seed, offset, low, range);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace relgrad::cuda
