// The fused elementwise chains of a transformer block on the GPU. Why it is written this way:
//   - bias_activation forward is one grid-stride elementwise kernel (the bias read as b[i % N]);
//   - its backward is a column reduction of the generic driver in cuda/reduce_common.cuh whose
//     `load` also writes dx: the driver reads every element exactly once, so computing dx there costs
//     nothing extra, and db comes out of the same pass (plus the driver's fixed-order chunk sum when R
//     is long). No atomics: the same bits run after run;
//   - the residual norm forward is cuda/norm.cu's one-block-per-row kernel with the sum formed in
//     its first pass: each thread writes the sum elements it later reads back, so no barrier is needed
//     between the passes beyond the block sums'.
#include <cmath>

#include "core/base/functors.h"
#include "cuda/common.cuh"
#include "cuda/fused.h"
#include "cuda/norm_row.cuh"
#include "cuda/reduce_common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

using red::block_combine;
using red::kMaxThreads;

// Calls f with the functor of core/base/functors.h that `act` names.
template <class F>
void with_activation(Activation act, F f) {
  switch (act) {
    case Activation::Relu: return f(fn::Relu{});
    case Activation::Gelu: return f(fn::Gelu{});
    case Activation::GeluTanh: return f(fn::GeluTanh{});
  }
  throw Error("[cuda_bias_activation] unknown activation");
}

// x, y (R, N) flat, n = R·N; b (N).
template <class F, class T>
__global__ void bias_activation_kernel(F f, const T* x, const T* b, T* y, int64_t n, int64_t N) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = f(static_cast<T>(x[i] + b[i % N]));
}

// dx only (db not wanted): gy, x, dx (R, N) flat, n = R·N; b (N).
template <class F, class T>
__global__ void bias_activation_dx_kernel(F f, const T* gy, const T* x, const T* b, T* dx, int64_t n, int64_t N) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T z = static_cast<T>(x[i] + b[i % N]);
    dx[i] = f.grad(z, z, gy[i]);  // the y argument is unused by these activations
  }
}

// The reducer for dx and db over (outer 1, R rows, inner N): load(0, r, i) writes dx[r, i] and
// returns it; finish writes db[i].
template <class F, class T>
struct BiasActivationGrad {
  using V = double;
  F f;
  const T* gy;
  const T* x;
  const T* b;
  T* dx;
  T* db;
  int64_t N;
  __device__ V identity() const { return 0.0; }
  __device__ V load(int64_t, int64_t r, int64_t i) const {
    const int64_t k = r * N + i;
    const T z = static_cast<T>(x[k] + b[i]);
    const T d = f.grad(z, z, gy[k]);
    dx[k] = d;
    return static_cast<double>(d);
  }
  __device__ V combine(V a, V c) const { return a + c; }
  __device__ void finish(int64_t, int64_t i, V v) const { db[i] = static_cast<T>(v); }
};

// residual, branch, sum, y (R, N); w, b (N) or null; mean (R) or null (rms_norm); rstd (R). One block per row.
template <class T>
__global__ void residual_norm_kernel(const T* residual, const T* branch, const T* w, const T* b, T* sum, T* y, T* mean,
                                     T* rstd, int64_t R, int64_t N, double eps) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* ar = residual + r * N;
    const T* br = branch + r * N;
    T* sr = sum + r * N;
    double s = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const T v = ar[i] + br[i];
      sr[i] = v;
      s += static_cast<double>(v);
    }
    // The thread reads back only the sums it wrote itself: no barrier needed before the norm.
    normalize_row<T>(sr, s, w, b, y + r * N, mean, rstd, r, N, eps, smem);
  }
}

}  // namespace

void bias_activation_forward(Activation act, DType dtype, const void* x, const void* b, void* y, int64_t R, int64_t N,
                             int device) {
  const char* op = "cuda_bias_activation";
  check_device(device, op);
  if (R * N == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    with_activation(act, [&](auto f) {
      bias_activation_kernel<<<grid_size(R * N), kBlockSize>>>(f, static_cast<const T*>(x), static_cast<const T*>(b),
                                                               static_cast<T*>(y), R * N, N);
      RG_CUDA_CHECK_LAUNCH(op);
    });
  });
}

void bias_activation_backward(Activation act, DType dtype, const void* gy, const void* x, const void* b, void* dx,
                              void* db, int64_t R, int64_t N, int device) {
  const char* op = "cuda_bias_activation_backward";
  check_device(device, op);
  if (N == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* gyt = static_cast<const T*>(gy);
    const T* xt = static_cast<const T*>(x);
    const T* bt = static_cast<const T*>(b);
    with_activation(act, [&](auto f) {
      if (!db) {
        if (R == 0) return;
        bias_activation_dx_kernel<<<grid_size(R * N), kBlockSize>>>(f, gyt, xt, bt, static_cast<T*>(dx), R * N, N);
        RG_CUDA_CHECK_LAUNCH(op);
        return;
      }
      // With R = 0 this writes db = 0 (the empty sum).
      using Red = BiasActivationGrad<decltype(f), T>;
      red::run_reduce(Red{f, gyt, xt, bt, static_cast<T*>(dx), static_cast<T*>(db), N}, 1, R, N, device, op);
    });
  });
}

void residual_norm_forward(DType dtype, const void* residual, const void* branch, const void* w, const void* b,
                           void* sum, void* y, void* mean, void* rstd, int64_t R, int64_t N, double eps, int device) {
  const char* op = mean ? "cuda_residual_layer_norm" : "cuda_residual_rms_norm";
  check_device(device, op);
  if (R == 0 || N == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    residual_norm_kernel<<<red::row_grid(R), red::row_threads(N)>>>(
        static_cast<const T*>(residual), static_cast<const T*>(branch), static_cast<const T*>(w),
        static_cast<const T*>(b), static_cast<T*>(sum), static_cast<T*>(y), static_cast<T*>(mean),
        static_cast<T*>(rstd), R, N, eps);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace relgrad::cuda
