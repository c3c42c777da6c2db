// CUDA kernels of layer_norm and rms_norm (core/backend/norm.cpp) on plain device pointers, with the
// contract of the CPU kernels in core/cpu/norm.h: x (R, N) contiguous, each row normalised on its
// own; `mean == nullptr` selects rms_norm (no centring, no bias).
//   layer_norm: y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps)     (var: population)
//   rms_norm:   y =  x         * rstd * w,      rstd = 1 / sqrt(mean(x^2) + eps)
// float32 and float64, statistics in double. Deterministic (fixed-order reductions, no atomics).
// `device` is the CUDA device of every pointer. Without CUDA (cuda/no_cuda.cpp) they throw DeviceError.
#pragma once
#include <cstdint>

#include "core/base/dtype.h"

namespace relgrad::cuda {

// x, y (R, N); w, b (N) or null; writes mean (R) (layer_norm; null for rms_norm) and rstd (R).
void norm_forward(DType dtype, const void* x, const void* w, const void* b, void* y, void* mean, void* rstd, int64_t R,
                  int64_t N, double eps, int device);

// dy, x (R, N), the saved mean (R) (null for rms_norm) and rstd (R), w (N) or null ->
//   dx (R, N) = rstd * (g - mean_row(g) - xhat * mean_row(g * xhat)),  g = dy * w (rms: no mean_row(g))
//   dw (N) = sum_rows dy * xhat,  db (N) = sum_rows dy.   Any of dx, dw, db may be null.
void norm_backward(DType dtype, const void* dy, const void* x, const void* mean, const void* rstd, const void* w,
                   void* dx, void* dw, void* db, int64_t R, int64_t N, int device);

}  // namespace relgrad::cuda
