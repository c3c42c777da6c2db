// layer_norm and rms_norm on the GPU. Why it is written this way:
//   - forward and dx: one block per row (rows of a transformer are d_model wide: one block reads a
//     row once per pass, from L1/L2 after the first). The row statistics are block sums in double
//     combined in the fixed tree of red::block_combine, two passes (mean, then squared deviations)
//     as on the CPU, which stay accurate when the mean is large against the spread (the forward's
//     row: normalize_row in cuda/norm_row.cuh, shared with the residual norm of cuda/fused.cu);
//   - dw and db sum over rows: a column reduction of the generic driver in cuda/reduce_common.cuh
//     (one thread per column and chunk of rows, then the chunks added in order). No atomics, so
//     the parameter gradients are the same bits run after run.
#include <cmath>

#include "cuda/common.cuh"
#include "cuda/norm.h"
#include "cuda/norm_row.cuh"
#include "cuda/reduce_common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

using red::block_combine;
using red::kMaxThreads;

// x, y (R, N); w, b (N) or null; mean (R) or null (rms_norm); rstd (R). One block per row.
template <class T>
__global__ void norm_forward_kernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t R, int64_t N,
                                    double eps) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* xr = x + r * N;
    double s = 0;
    if (mean)
      for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += static_cast<double>(xr[i]);
    normalize_row(xr, s, w, b, y + r * N, mean, rstd, r, N, eps, smem);
  }
}

// dy, x, dx (R, N); mean (R) or null; rstd (R); w (N) or null. One block per row.
template <class T>
__global__ void norm_backward_dx_kernel(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx,
                                        int64_t R, int64_t N) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const T* xr = x + r * N;
    const T* dyr = dy + r * N;
    T* dxr = dx + r * N;
    const double mu = mean ? static_cast<double>(mean[r]) : 0.0, rs = static_cast<double>(rstd[r]);
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const double xh = (static_cast<double>(xr[i]) - mu) * rs;
      const double g = w ? static_cast<double>(dyr[i]) * static_cast<double>(w[i]) : static_cast<double>(dyr[i]);
      sum_g += g;
      sum_gx += g * xh;
    }
    sum_g = block_combine(sum_g, smem, red::SumOp{});
    sum_gx = block_combine(sum_gx, smem, red::SumOp{});
    const double mean_g = mean ? sum_g / static_cast<double>(N) : 0.0, mean_gx = sum_gx / static_cast<double>(N);
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const double xh = (static_cast<double>(xr[i]) - mu) * rs;
      const double g = w ? static_cast<double>(dyr[i]) * static_cast<double>(w[i]) : static_cast<double>(dyr[i]);
      dxr[i] = static_cast<T>(rs * (g - mean_g - xh * mean_gx));
    }
  }
}

struct WeightBiasSums {
  double w;  // sum_rows dy * xhat
  double b;  // sum_rows dy
};

// dw, db (N) over dy, x (R, N) seen as (outer 1, R rows, inner N); either output may be null.
template <class T>
struct WeightBiasRed {
  using V = WeightBiasSums;
  const T* dy;
  const T* x;
  const T* mean;  // (R) or null
  const T* rstd;  // (R)
  T* dw;
  T* db;
  int64_t N;
  __device__ V identity() const { return V{0.0, 0.0}; }
  __device__ V load(int64_t, int64_t r, int64_t i) const {
    const double mu = mean ? static_cast<double>(mean[r]) : 0.0;
    const double xh = (static_cast<double>(x[r * N + i]) - mu) * static_cast<double>(rstd[r]);
    const double g = static_cast<double>(dy[r * N + i]);
    return V{g * xh, g};
  }
  __device__ V combine(V a, V b) const { return V{a.w + b.w, a.b + b.b}; }
  __device__ void finish(int64_t, int64_t i, V v) const {
    if (dw) dw[i] = static_cast<T>(v.w);
    if (db) db[i] = static_cast<T>(v.b);
  }
};

}  // namespace

void norm_forward(DType dtype, const void* x, const void* w, const void* b, void* y, void* mean, void* rstd, int64_t R,
                  int64_t N, double eps, int device) {
  const char* op = mean ? "cuda_layer_norm" : "cuda_rms_norm";
  check_device(device, op);
  if (R == 0 || N == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    norm_forward_kernel<<<red::row_grid(R), red::row_threads(N)>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<T*>(y),
        static_cast<T*>(mean), static_cast<T*>(rstd), R, N, eps);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void norm_backward(DType dtype, const void* dy, const void* x, const void* mean, const void* rstd, const void* w,
                   void* dx, void* dw, void* db, int64_t R, int64_t N, int device) {
  const char* op = mean ? "cuda_layer_norm_backward" : "cuda_rms_norm_backward";
  check_device(device, op);
  if (N == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* dyt = static_cast<const T*>(dy);
    const T* xt = static_cast<const T*>(x);
    const T* mt = static_cast<const T*>(mean);
    const T* rt = static_cast<const T*>(rstd);
    const T* wt = static_cast<const T*>(w);
    if (dx && R > 0) {
      norm_backward_dx_kernel<<<red::row_grid(R), red::row_threads(N)>>>(dyt, xt, mt, rt, wt, static_cast<T*>(dx), R,
                                                                         N);
      RG_CUDA_CHECK_LAUNCH(op);
    }
    // With R = 0 this writes dw = db = 0 (the empty sum).
    if (dw || db)
      red::run_reduce(WeightBiasRed<T>{dyt, xt, mt, rt, static_cast<T*>(dw), static_cast<T*>(db), N}, 1, R, N, device,
                      op);
  });
}

}  // namespace relgrad::cuda
