// CUDA kernels of the softmax family (autograd/ops/softmax.cpp) on plain device pointers, with the
// contract of the CPU kernels in core/cpu/softmax.h: softmax and log_softmax over the C dim of a
// contiguous (outer, C, inner) block, attention's masked_softmax over rows of C, and cross_entropy
// fused with log_softmax over logits (N, C, D). float32 and float64. Deterministic: sums in double
// in a fixed order (one block per row, or one thread per column; no atomics). `device` is the CUDA
// device of every pointer. Without CUDA (cuda/no_cuda.cpp) every function throws DeviceError.
#pragma once
#include <cstdint>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/softmax_layout.h"

namespace relgrad::cuda {

// x, y (outer, C, inner): y = softmax(x) or, with L.log, log_softmax(x), over C.
void softmax_forward(DType dtype, const void* x, void* y, const SoftmaxLayout& L, int device);
// y, g, gx (outer, C, inner), y the forward output:
//   softmax: gx = y * (g - sum_c g y);  log_softmax: gx = g - exp(y) * sum_c g.
void softmax_backward(DType dtype, const void* y, const void* g, void* gx, const SoftmaxLayout& L, int device);

// A broadcast operand of masked_softmax: its strides (in elements) over x's shape, 0 along the dims
// it is broadcast over (cpu::broadcast_strides). Element (.., c) of row r lies at the row-major
// unravelling of r over shape[:-1] dotted with strides[:-1], plus c * strides.back().
// x, y (rows, C) contiguous, shape = x's shape (rows = product of all but the last, C = the last):
//   y = softmax(scale * x + bias) over the unmasked entries of each row; masked entries and fully
//   masked rows get 0 (a fully masked row with a NaN gets NaN, as the composite). bias (dtype) and
//   mask (bool) are optional (null; then their strides are ignored).
void masked_softmax_forward(DType dtype, const void* x, double scale, const void* bias,
                            const std::vector<int64_t>& bias_strides, const bool* mask,
                            const std::vector<int64_t>& mask_strides, void* y, const std::vector<int64_t>& shape,
                            int device);
// y, g (rows, C): gz = y * (g - sum_c g y) and gx = scale * gz; either output may be null.
void masked_softmax_backward(DType dtype, const void* y, const void* g, double scale, void* gx, void* gz, int64_t rows,
                             int64_t C, int device);

// logits x (N, C, D), target (N, D) int64 (already checked to be ignore_index or in [0, C)) ->
// loss (N, D) = (1 - eps) (lse - x_t) + eps (lse - mean_c x) and lse (N, D) = log sum_c exp(x), with
// eps = L.label_smoothing; both 0 where target == L.ignore_index.
void cross_entropy_forward(DType dtype, const void* x, const int64_t* target, void* loss, void* lse,
                           const CrossEntropyLayout& L, int device);
// gx (N, C, D) = w (exp(x - lse) - (1 - eps) [c == t] - eps / C), w = g[pos] * scale (g[0] * scale
// when g_is_scalar); 0 at ignored positions.
void cross_entropy_backward(DType dtype, const void* x, const int64_t* target, const void* lse, const void* g,
                            bool g_is_scalar, double scale, void* gx, const CrossEntropyLayout& L, int device);

}  // namespace relgrad::cuda
