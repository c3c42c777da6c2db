// CUDA kernels of the reductions (core/backend/reduce.cpp) and of the three-way select behind where
// and masked_fill (autograd/ops/where.cpp), on plain device pointers; the same contract as the CPU
// kernels of core/cpu/reduce.h and core/cpu/index.h. Every reduction takes a contiguous
// (outer, R, inner) block: output (o, i) reduces x[(o * R + r) * inner + i] over r.
//
// Results are deterministic (a fixed reduction tree, no atomics; cuda/reduce_common.cuh). Sums are
// accumulated in double, as on the CPU. `device` is the CUDA device of every pointer; the kernels run
// there, on the default stream. Without CUDA (cuda/no_cuda.cpp) every function throws DeviceError.
#pragma once
#include <cstdint>
#include <vector>

#include "core/base/dtype.h"

namespace relgrad::cuda {

// out (outer, inner) = scale * sum_r x. float32 / float64.
void reduce_sum(DType dtype, const void* x, void* out, int64_t outer, int64_t R, int64_t inner, double scale,
                int device);

// var (outer, inner) = sum_r (x - mean)^2 / max(R - correction, 0) and mean (outer, inner) (saved for
// the backward); two passes in double, as cpu::var_kernel. float32 / float64.
void reduce_var(DType dtype, const void* x, void* var, void* mean, int64_t outer, int64_t R, int64_t inner,
                int64_t correction, int device);

// out (outer, inner) = log sum_r exp(x), shifted by the column max (±inf and NaN as cpu::logsumexp_kernel).
void reduce_logsumexp(DType dtype, const void* x, void* out, int64_t outer, int64_t R, int64_t inner, int device);

// values (outer, inner) = max (is_max) or min over r, indices (outer, inner) = the first r where it
// occurs; NaN wins over numbers (the first NaN). Either output may be null. R must be > 0.
// float32 / float64 / int64.
void reduce_extremum(bool is_max, DType dtype, const void* x, void* values, int64_t* indices, int64_t outer,
                     int64_t R, int64_t inner, int device);

// Backward of max/min along one dim: gx (outer, R, inner) is zero except gx[o, indices[o, i], i] =
// g[o, i]; g and indices are (outer, inner). float32 / float64.
void scatter_to_index(DType dtype, const void* g, const int64_t* indices, void* gx, int64_t outer, int64_t R,
                      int64_t inner, int device);

// where: out (shape, contiguous) = cond ? a : b, each operand read through its own strides over
// `shape` (0 along broadcast dims). Every dtype (a, b and out share it; cond is bool).
void where_select(DType dtype, const std::vector<int64_t>& shape, void* out, const bool* cond,
                  const std::vector<int64_t>& cond_strides, const void* a, const std::vector<int64_t>& a_strides,
                  const void* b, const std::vector<int64_t>& b_strides, int device);

}  // namespace relgrad::cuda
