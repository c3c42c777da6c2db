// One row of layer_norm / rms_norm on the GPU, shared by norm_forward_kernel (cuda/norm.cu) and the
// residual norm (cuda/fused.cu), so both give the same bits for the same row. Never included from
// outside cuda/.
#pragma once
#include <cmath>
#include <cstdint>

#include "cuda/reduce_common.cuh"

namespace relgrad::cuda {

// Normalises row r, xr (N), into yr (N), with weight w and bias b (N, or null), all threads of the
// block. s is this thread's partial sum of xr[threadIdx.x], xr[threadIdx.x + blockDim.x], … (used
// only when mean is non-null: layer_norm); mean[r] (layer_norm, else null) and rstd[r] are written.
// The statistics are double block sums in the fixed tree of red::block_combine, two passes (mean,
// then squared deviations) as on the CPU. smem holds red::kMaxThreads doubles.
template <class T>
__device__ void normalize_row(const T* xr, double s, const T* w, const T* b, T* yr, T* mean, T* rstd, int64_t r,
                              int64_t N, double eps, double* smem) {
  double mu = 0;
  if (mean) mu = red::block_combine(s, smem, red::SumOp{}) / static_cast<double>(N);  // the same branch for the block
  double ss = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const double d = static_cast<double>(xr[i]) - mu;
    ss += d * d;
  }
  ss = red::block_combine(ss, smem, red::SumOp{});
  const double rs = 1.0 / sqrt(ss / static_cast<double>(N) + eps);
  if (threadIdx.x == 0) {
    if (mean) mean[r] = static_cast<T>(mu);
    rstd[r] = static_cast<T>(rs);
  }
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    double h = (static_cast<double>(xr[i]) - mu) * rs;
    if (w) h *= static_cast<double>(w[i]);
    if (b) h += static_cast<double>(b[i]);
    yr[i] = static_cast<T>(h);
  }
}

}  // namespace relgrad::cuda
