// The backend seam for products with a window (attention's causal scores and weights): a matrix X
// that is zero outside a window, row i keeping columns [lo[i], hi[i]). On the CPU, float32 on relgrad's
// kernel, only the window's micro-tiles and terms are computed (core/cpu/sgemm.h: sgemm_window);
// elsewhere (float64, another GEMM library, the GPU) the composite: the dense product with X's
// outside set to zero. Both give the same values (the skipped terms are zeros). autograd/ops.h has the
// differentiable ops (window_scores, window_apply, window_apply_t).
#pragma once
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "core/window.h"

namespace relgrad::backend {

// The product with X windowed, on the operands' device (shapes, dtypes and devices checked by the
// caller, as matmul's; `batch` the broadcast batch dims):
//   Output          out = (init + alpha · a @ b) ∘ W        X = out (n, m), init optional
//   Left            out = alpha · (a ∘ W) @ b               X = a (n, k)
//   LeftTransposed  out = alpha · (x ∘ W)ᵀ @ b, given a = xᵀ (a view)   X = x (k, n)
Tensor window_matmul(const Tensor& a, const Tensor& b, const Shape& batch, const MatrixWindow& window,
                     WindowOn on, const char* op, const Tensor& init = Tensor(), double alpha = 1.0);

// x (.., R, S) with its (R, S) matrices zero outside the window: a fresh contiguous tensor (the window
// products' gradient for an added init).
Tensor window_inside(const Tensor& x, const MatrixWindow& window, const char* op);

// True where window_matmul skips work for operands like x (the CPU, float32, relgrad's kernel chosen);
// elsewhere it computes the dense composite, which costs more than a plain product.
bool window_matmul_skips(const Tensor& x);

}  // namespace relgrad::backend
