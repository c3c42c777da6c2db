// The backend seam for indexing (kernels: core/cpu/index.h, core/cpu/relative.h, cuda/index.h).
// Index tensors are int64 and contiguous, on the operands' device, and range-checked before any
// kernel reads through them (check_index_values). Nothing here copies an index to the GPU: the CUDA
// scatter-adds sort their lists on the device.
#pragma once
#include <functional>
#include <string>

#include "core/base/relative_layout.h"
#include "core/cpu/index.h"
#include "core/tensor.h"

namespace relgrad::backend {

// Throws IndexError naming `what` unless every entry of the (host, contiguous) index is in [0, size).
using cpu::check_indices;

// Runs check(host copy of idx) — which throws the op's error for a bad entry — unless every value of
// idx is already known to lie in [lo, hi): a CUDA index seen before (the same storage, unchanged
// since — in-place ops bump its version — and the same view), whose values were then read. So an
// index map the library keeps on the GPU is copied down once, not at every call; a CPU index is
// checked every time (no copy needed). The values' range is remembered for the 64 most recent.
void check_index_values(const Tensor& idx, int64_t lo, int64_t hi, const std::function<void(const Tensor&)>& check);

// out (out_shape, contiguous)[pos] = x[Σ pos·x_strides + idx[Σ pos·i_strides] · dim_stride]: the
// gather behind embedding, index_select and gather. idx on x's device. any_dtype: every dtype (a
// gather only moves elements), else float32 / float64 only.
Tensor gather(const Tensor& x, const Shape& out_shape, const Shape& x_strides, int64_t dim_stride, const Tensor& idx,
              const Shape& i_strides, bool any_dtype, const char* op);
// gx (out_shape = (O, n, I)) = Σ over k of g (O, K, I) row k into row idx[k]; rows equal to `skip`
// (embedding's padding_idx, or -1) get nothing; idx (K) on g's device. Deterministic on both devices.
Tensor scatter_add_rows(const Tensor& g, const Tensor& idx, int64_t skip, const Shape& out_shape, int64_t O,
                        int64_t n, int64_t I, const char* op);
// gx (out_shape = (O, n, I)) [o, idx[o, k, i], i] += g (O, K, I) [o, k, i]: gather's adjoint, idx
// (O, K, I) on g's device.
Tensor scatter_add_columns(const Tensor& g, const Tensor& idx, const Shape& out_shape, int64_t O, int64_t K, int64_t n,
                           int64_t I, const char* op);

// S (out_shape = (N, t2, t1)) [b, i, j] = P[b, i, C[i, j]] (0 where C < 0), P read as l.N blocks
// (l.batch_stride) of t2 rows (l.row_stride) of unit-stride entries; index: C (t2, t1), contiguous, on
// P's device (core/base/relative_layout.h).
Tensor relative_gather(const Tensor& P, const Tensor& index, const Shape& out_shape, const RelativeLayout& l);
// P (out_shape = (N, t2, R)) [b, i, r] = Σ_{j: C[i, j] = r} S[b, i, j], S contiguous, C (t2, t1)
// contiguous on S's device; row-owned, no atomics.
Tensor relative_scatter(const Tensor& S, const Tensor& index, const Shape& out_shape, const RelativeLayout& l);

}  // namespace relgrad::backend
