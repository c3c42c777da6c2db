// The backend seam for indexing (kernels: core/cpu/index.h, core/cpu/relative.h, cuda/index.h).
// Index tensors are int64 and contiguous; "host" ones are on the CPU (the same tensor when the
// operands are on the CPU), where they were range-checked before any kernel reads through them.
#pragma once
#include "core/cpu/index.h"
#include "core/tensor.h"

namespace relgrad::backend {

// Throws IndexError naming `what` unless every entry of the (host, contiguous) index is in [0, size).
using cpu::check_indices;

// out (out_shape, contiguous)[pos] = x[Σ pos·x_strides + idx[Σ pos·i_strides] · dim_stride]: the
// gather behind embedding, index_select and gather. idx on x's device. any_dtype: every dtype (a
// gather only moves elements), else float32 / float64 only.
Tensor gather(const Tensor& x, const Shape& out_shape, const Shape& x_strides, int64_t dim_stride, const Tensor& idx,
              const Shape& i_strides, bool any_dtype, const char* op);
// gx (out_shape = (O, n, I)) = Σ over k of g (O, K, I) row k into row host_idx[k]; rows equal to
// `skip` (embedding's padding_idx, or -1) get nothing. Deterministic on both devices.
Tensor scatter_add_rows(const Tensor& g, const Tensor& host_idx, int64_t skip, const Shape& out_shape, int64_t O,
                        int64_t n, int64_t I, const char* op);
// gx (out_shape = (O, n, I)) [o, idx[o, k, i], i] += g (O, K, I) [o, k, i]: gather's adjoint, idx
// (O, K, I) on g's device.
Tensor scatter_add_columns(const Tensor& g, const Tensor& idx, const Shape& out_shape, int64_t O, int64_t K, int64_t n,
                           int64_t I, const char* op);

// S (out_shape = (N, t2, t1)) [b, i, j] = P[b, i, C[i, j]] (0 where C < 0), P read as N blocks
// (batch_stride) of t2 rows (row_stride) of unit-stride entries. index: C (t2, t1) as given (on the
// CPU or P's device), host_index its contiguous host copy.
Tensor relative_gather(const Tensor& P, int64_t batch_stride, int64_t row_stride, const Tensor& index,
                       const Tensor& host_index, const Shape& out_shape, int64_t N, int64_t t2, int64_t t1);
// P (out_shape = (N, t2, R)) [b, i, r] = Σ_{j: C[i, j] = r} S[b, i, j], S contiguous; row-owned, no atomics.
Tensor relative_scatter(const Tensor& S, const Tensor& host_index, const Shape& out_shape, int64_t N, int64_t t2,
                        int64_t t1, int64_t R);

}  // namespace relgrad::backend
