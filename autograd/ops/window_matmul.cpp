// Products with a window (core/window.h): X (.., R, S) counts only inside the window W, row i at columns
// [lo[i], hi[i]), and the backend skips what lies outside (core/backend/window_matmul.h: on the CPU's
// float32 kernel, only the window's tiles and terms; elsewhere the dense composite, the same values).
// Causal attention's scores and weights are such matrices: about half of each product is skipped.
//   window_scores   C = (init + A @ B) ∘ W       dA = (dC ∘ W) @ Bᵀ,  dB = ((dC ∘ W)ᵀ @ A)ᵀ,  dinit = dC ∘ W
//   window_apply    C = (X ∘ W) @ B              dX = (dC @ Bᵀ) ∘ W,  dB = (X ∘ W)ᵀ @ dC
//   window_apply_t  C = (X ∘ W)ᵀ @ B             dX = (B @ dCᵀ) ∘ W,  dB = (X ∘ W) @ dC
// so each backward is two more of the three (and differentiable again). The composite twin, the test
// oracle (tests/test_window_matmul.cpp): masked_fill of X's outside, then matmul.
#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/window_matmul.h"

namespace relgrad {

namespace {

void check_operands(const Tensor& a, const Tensor& b, const WindowPtr& w, const char* op) {
  RG_CHECK(a.defined() && b.defined(), op, "called with an undefined tensor");
  RG_CHECK(w != nullptr, op, "called without a window");
  check_same_device(a, b, op);
  check_same_dtype(a, b, op);
  dispatch_float(a.dtype(), op, [](auto) {});  // throws for int64 and bool
  RG_CHECK_T(ShapeError, a.dim() >= 2 && b.dim() >= 2, op, "both operands need at least 2 dimensions, got ",
             shape_str(a.shape()), " and ", shape_str(b.shape()));
  RG_CHECK(autocast_dtype_for(a) == kFloat32, op, "has no 16-bit (autocast) form; call it outside autocast");
}

// x (.., r, c) viewed as (.., c, r), untracked: the backend's operand for LeftTransposed.
Tensor swapped(const Tensor& x) {
  Shape shape = x.shape(), strides = x.strides();
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return make_view(x, shape, strides, x.offset());
}

// g with its (R, S) matrices zero outside the window (in the backward, which records nothing).
Tensor inside(const Tensor& g, const WindowPtr& w) { return backend::window_inside(g, *w, "window_scores"); }

// The recorded product: out from the backend, and its backward.
Tensor windowed(const Tensor& a, const Tensor& b, const WindowPtr& w, WindowOn on, const Tensor& init,
                const char* op) {
  RG_PROFILE_OP(op);
  const Shape batch = batch_shape(a, b, op);
  const Tensor backend_a = on == WindowOn::LeftTransposed ? swapped(a) : a;
  Tensor out = backend::window_matmul(backend_a, b, batch, *w, on, op, init);
  add_profiled_flops(2.0 * double(out.numel()) * double(backend_a.size(-1)) * w->density());
  TensorList inputs{a, b};
  if (init.defined()) inputs.push_back(init);
  if (!needs_grad(inputs)) return out;
  const bool need_a = a.requires_grad(), need_b = b.requires_grad(), need_c = init.defined() && init.requires_grad();
  return record(out, op, inputs,
                [=, sa = a.shape(), sb = b.shape(), sc = init.defined() ? init.shape() : Shape(),
                 a = need_b ? SavedTensor(a) : SavedTensor(),
                 b = need_a ? SavedTensor(b) : SavedTensor()](const Tensor& g) -> TensorList {
                  Tensor ga, gb, gc;
                  switch (on) {
                    case WindowOn::Output:  // a (.., R, k), b (.., k, S), g (.., R, S)
                      if (need_a) ga = window_apply(g, b.get().transpose(-1, -2), w);
                      if (need_b) gb = window_apply_t(g, a.get(), w).transpose(-1, -2);
                      if (need_c) gc = sum_to(inside(g, w), sc);
                      break;
                    case WindowOn::Left:  // a = X (.., R, S), b (.., S, d), g (.., R, d)
                      if (need_a) ga = window_scores(g, b.get().transpose(-1, -2), w);
                      if (need_b) gb = window_apply_t(a.get(), g, w);
                      break;
                    case WindowOn::LeftTransposed:  // a = X (.., R, S), b (.., R, d), g (.., S, d)
                      if (need_a) ga = window_scores(b.get(), g.transpose(-1, -2), w);
                      if (need_b) gb = window_apply(a.get(), g, w);
                      break;
                  }
                  if (need_a) ga = sum_to(ga, sa);
                  if (need_b) gb = sum_to(gb, sb);
                  if (!init.defined()) return {ga, gb};
                  return {ga, gb, gc};
                });
}

}  // namespace

bool window_products_skip(const Tensor& x, const MatrixWindow& w) {
  // 64 columns: two of the kernel's 32-column panels, so a causal window's first rows skip one
  // (bench/bench_window.cpp; the main job's 17 keys ran 1.03× slower with windows).
  return x.defined() && w.cols >= 64 && w.density() <= 0.75 && autocast_dtype_for(x) == kFloat32 &&
         backend::window_matmul_skips(x);
}

Tensor window_scores(const Tensor& a, const Tensor& b, const WindowPtr& w, const Tensor& init) {
  const char* op = "window_scores";
  check_operands(a, b, w, op);
  RG_CHECK_T(ShapeError, a.size(-1) == b.size(-2), op, "inner dimensions differ: ", shape_str(a.shape()), " @ ",
             shape_str(b.shape()));
  if (init.defined()) {
    check_same_device(a, init, op);
    check_same_dtype(a, init, op);
    Shape out_shape = batch_shape(a, b, op);
    out_shape.push_back(a.size(-2));
    out_shape.push_back(b.size(-1));
    RG_CHECK_T(ShapeError, broadcasts_to(init.shape(), out_shape), op, "init ", shape_str(init.shape()),
               " does not broadcast to the product's shape ", shape_str(out_shape));
  }
  return windowed(a, b, w, WindowOn::Output, init, op);
}

Tensor window_apply(const Tensor& x, const Tensor& b, const WindowPtr& w) {
  const char* op = "window_apply";
  check_operands(x, b, w, op);
  RG_CHECK_T(ShapeError, x.size(-1) == b.size(-2), op, "inner dimensions differ: ", shape_str(x.shape()), " @ ",
             shape_str(b.shape()));
  return windowed(x, b, w, WindowOn::Left, Tensor(), op);
}

Tensor window_apply_t(const Tensor& x, const Tensor& b, const WindowPtr& w) {
  const char* op = "window_apply_t";
  check_operands(x, b, w, op);
  RG_CHECK_T(ShapeError, x.size(-2) == b.size(-2), op, "xᵀ @ b needs x's rows to match b's: ", shape_str(x.shape()),
             " and ", shape_str(b.shape()));
  return windowed(x, b, w, WindowOn::LeftTransposed, Tensor(), op);
}

}  // namespace relgrad
