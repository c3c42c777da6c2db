// CUDA kernels of the fused elementwise chains of a transformer block (core/backend/fused.cpp), with
// the contract of the CPU kernels in core/cpu/fused.h, on plain device pointers, all contiguous:
//   bias_activation:  y = act(x + b), x (R, N), b (N); backward dx = act'(x + b) · gy and
//                     db = Σ_rows dx, deterministic (fixed-order sums in double, no atomics);
//   residual norm:    sum = residual + branch, y = layer_norm / rms_norm (sum) over rows of N.
// float32 and float64. `device` is the CUDA device of every pointer. Without CUDA (cuda/no_cuda.cpp)
// they throw DeviceError.
#pragma once
#include <cstdint>

#include "core/base/activation.h"
#include "core/base/dtype.h"

namespace relgrad::cuda {

// x, y (R, N); b (N).
void bias_activation_forward(Activation act, DType dtype, const void* x, const void* b, void* y, int64_t R, int64_t N,
                             int device);
// gy, x, dx (R, N); b (N); db (N) or null (not wanted).
void bias_activation_backward(Activation act, DType dtype, const void* gy, const void* x, const void* b, void* dx,
                              void* db, int64_t R, int64_t N, int device);

// residual, branch, sum, y (R, N); w, b (N) or null; mean (R) (layer_norm; null for rms_norm) and
// rstd (R) of `sum`, as cuda::norm_forward (cuda/norm.h) writes them.
void residual_norm_forward(DType dtype, const void* residual, const void* branch, const void* w, const void* b,
                           void* sum, void* y, void* mean, void* rstd, int64_t R, int64_t N, double eps, int device);

}  // namespace relgrad::cuda
