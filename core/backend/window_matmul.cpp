#include "core/backend/window_matmul.h"

#include <algorithm>

#include "core/backend/dense.h"
#include "core/backend/elementwise.h"
#include "core/backend/matmul.h"
#include "core/cpu/matmul.h"
#include "core/parallel_for.h"

namespace relgrad::backend {

namespace {

cpu::GemmWindow gemm_window(const MatrixWindow& w, WindowOn on) {
  return {on, w.lo.data(), w.hi.data(), w.col_lo.data(), w.col_hi.data()};
}

}  // namespace

Tensor window_inside(const Tensor& x, const MatrixWindow& window, const char* op) {
  RG_CHECK_T(ShapeError, x.dim() >= 2 && x.size(-2) == window.rows && x.size(-1) == window.cols, op, "the window is (",
             window.rows, ", ", window.cols, ") but the matrices are ", shape_str(x.shape()));
  if (!x.device().is_cpu())
    return where_select(window.outside(x.device()), zeros({}, TensorOptions(x.dtype()).device(x.device())), x,
                        x.shape(), op);
  const Tensor in = x.is_contiguous() ? x : copy_as(x, TensorOptions(x.dtype()));
  Tensor out = empty(x.shape(), TensorOptions(x.dtype()));
  const int64_t R = window.rows, S = window.cols, count = R == 0 || S == 0 ? 0 : x.numel() / (R * S);
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const T* src = in.template data_ptr<T>();
    T* dst = out.template data_ptr<T>();
    parallel_for(count, count * R * S >= (int64_t(1) << 18), [&](int64_t e) {
      for (int64_t i = 0; i < R; ++i) {
        const T* s = src + (e * R + i) * S;
        T* d = dst + (e * R + i) * S;
        const int64_t lo = window.lo[i], hi = window.hi[i];
        std::fill(d, d + lo, T(0));
        std::copy(s + lo, s + hi, d + lo);
        std::fill(d + hi, d + S, T(0));
      }
    });
  });
  return out;
}

bool window_matmul_skips(const Tensor& x) { return x.device().is_cpu() && cpu::window_kernel_available(x.dtype()); }

Tensor window_matmul(const Tensor& a, const Tensor& b, const Shape& batch, const MatrixWindow& window,
                     WindowOn on, const char* op, const Tensor& init, double alpha) {
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const int64_t want_rows = on == WindowOn::LeftTransposed ? k : n;  // X is out (n, m), a (n, k) or aᵀ (k, n)
  const int64_t want_cols = on == WindowOn::Output ? m : on == WindowOn::Left ? k : n;
  RG_CHECK_T(ShapeError, window.rows == want_rows && window.cols == want_cols, op, "the window is (", window.rows,
             ", ", window.cols, ") but the windowed matrix is (", want_rows, ", ", want_cols, ")");
  if (window_matmul_skips(a))
    return cpu::window_matmul(a, b, batch, gemm_window(window, on), op, init, alpha);
  // The composite: X's outside set to zero, then the dense product (or the product, then its outside).
  const Tensor outside = window.outside(a.device());
  const Tensor zero = zeros({}, TensorOptions(a.dtype()).device(a.device()));
  if (on == WindowOn::Output) {
    const Tensor full = matmul(a, b, batch, op, init, alpha);
    return where_select(outside, zero, full, full.shape(), op);
  }
  // Left: a is X; LeftTransposed: a is Xᵀ, so the mask is transposed with it (a view).
  const Tensor mask = on == WindowOn::Left ? outside : make_view(outside, {window.cols, window.rows}, {1, window.cols}, outside.offset());
  const Tensor masked = where_select(mask, zero, a, a.shape(), op);
  return matmul(masked, b, batch, op, Tensor(), alpha);
}

}  // namespace relgrad::backend
