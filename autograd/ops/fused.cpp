// The fused elementwise chains of a transformer block: bias_activation (a feed-forward layer's bias
// and activation) and residual_layer_norm / residual_rms_norm (a residual add and the norm after it).
// Each runs one kernel per direction (core/backend/fused.h) where its composite twin runs a chain of
// small ones, which on a GPU is a chain of launches; tests/test_fused_ops.cpp holds each against
// its twin.
//
// The residual norm has two outputs, and a tape node has one (autograd/node.h), so it records two:
// `sum` as an add (its backward hands the gradient to both inputs as it is, no kernel), and `out` as
// a norm of `sum` with layer_norm's fused backward. The engine adds the gradient `sum` gets as the
// next residual to the one coming back through the norm, as it does for the composite twin.
#include <limits>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "autograd/ops/norm_checks.h"
#include "autograd/profiler.h"
#include "core/backend/fused.h"
#include "core/backend/norm.h"

namespace relgrad {

namespace {

// t as a contiguous tensor on its device, without autograd history (copied only when t is not contiguous).
Tensor dense(const Tensor& t) {
  if (!t.defined()) return t;
  if (t.is_contiguous()) return t.detach();
  Tensor c = empty(t.shape(), TensorOptions(t.dtype()).device(t.device()));
  copy_into(c, t, "fused");
  return c;
}

// a and b must have one shape, dtype and device (no broadcasting: the kernels read flat rows).
void check_pair(const Tensor& a, const Tensor& b, const char* a_name, const char* b_name, const char* op) {
  RG_CHECK(a.defined() && b.defined(), op, a_name, " and ", b_name, " must be defined tensors");
  RG_CHECK_T(ShapeError, a.shape() == b.shape(), op, a_name, " ", shape_str(a.shape()), " and ", b_name, " ",
             shape_str(b.shape()), " must have the same shape");
  check_same_dtype(a, b, op);
  check_same_device(a, b, op);
}

ResidualNorm residual_norm_op(const Tensor& residual, const Tensor& branch, const Shape& ns, const Tensor& weight,
                              const Tensor& bias, double eps, bool rms, const char* op) {
  RG_PROFILE_OP(op);
  check_pair(residual, branch, "residual", "branch", op);
  const int64_t N = check_norm_args(residual, ns, weight, bias, op);
  const int64_t R = N == 0 ? 0 : residual.numel() / N;
  // eps < 0 (the default -1 of rms_norm) stands for PyTorch's None: the dtype's machine epsilon.
  if (eps < 0)
    eps = residual.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  Tensor wc = dense(weight), bc = dense(bias);
  backend::ResidualNormForward f =
      backend::residual_norm_forward(dense(residual), dense(branch), wc, bc, rms, R, N, eps);
  Tensor sum = f.sum;
  if (needs_grad({residual, branch}))
    sum = record(sum, "residual_add", {residual, branch},
                 [](const Tensor& g) -> TensorList { return {g, g}; });  // same shapes: nothing to sum_to
  TensorList inputs = rms ? TensorList{sum, weight} : TensorList{sum, weight, bias};
  if (!needs_grad(inputs)) return {sum, f.y};
  const bool need_x = sum.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
             need_b = bias.defined() && bias.requires_grad();
  // What layer_norm saves for its backward (autograd/ops/norm.cpp), with `sum` as its input.
  Tensor out = record(f.y, op, inputs,
                      [need_x, need_w, need_b, rms, R, N, shape = residual.shape(), ns, s = SavedTensor(f.sum),
                       w = SavedTensor(wc), mean = SavedTensor(f.mean),
                       rstd = SavedTensor(f.rstd)](const Tensor& g) -> TensorList {
                        backend::NormGrads d = backend::norm_backward(dense(g), s.get(), mean.get(), rstd.get(),
                                                                      w.get(), shape, ns, need_x, need_w, need_b, R, N);
                        if (rms) return {d.dx, d.dw};
                        return {d.dx, d.dw, d.db};
                      });
  return {sum, out};
}

}  // namespace

Tensor bias_activation(const Tensor& x, const Tensor& bias, Activation activation) {
  const char* op = "bias_activation";
  RG_PROFILE_OP(op);
  RG_CHECK(x.defined() && bias.defined(), op, "x and bias must be defined tensors");
  dispatch_float(x.dtype(), op, [](auto) {});
  RG_CHECK_T(ShapeError, bias.dim() == 1 && x.dim() >= 1 && x.size(-1) == bias.size(0), op, "bias ",
             shape_str(bias.shape()), " must be (N) for x (..., N), got x ", shape_str(x.shape()));
  check_same_dtype(x, bias, op);
  check_same_device(x, bias, op);
  const int64_t N = bias.size(0), R = N == 0 ? 0 : x.numel() / N;
  Tensor xc = dense(x), bc = dense(bias), kept;
  const bool backward = needs_grad({x, bias});
  Tensor y = backend::bias_activation_forward(xc, bc, activation, R, N, backward ? &kept : nullptr);
  if (!backward) return y;
  // The backward recomputes x + b (one add) rather than saving it: x is saved anyway. gelu on the CPU
  // keeps its erf as well (kept), a third of its backward's arithmetic (core/cpu/fused.h).
  return record(y, op, {x, bias},
                [activation, R, N, need_b = bias.requires_grad(), x = SavedTensor(xc), b = SavedTensor(bc),
                 kept = SavedTensor(kept)](const Tensor& g) -> TensorList {
                  backend::BiasActivationGrads d = backend::bias_activation_backward(
                      dense(g), x.get(), b.get(), activation, need_b, R, N, kept.get());
                  return {d.dx, d.db};
                });
}

ResidualNorm residual_layer_norm(const Tensor& residual, const Tensor& branch, const Shape& normalized_shape,
                                 const Tensor& weight, const Tensor& bias, double eps) {
  return residual_norm_op(residual, branch, normalized_shape, weight, bias, eps, /*rms=*/false,
                          "residual_layer_norm");
}

ResidualNorm residual_rms_norm(const Tensor& residual, const Tensor& branch, const Shape& normalized_shape,
                               const Tensor& weight, double eps) {
  return residual_norm_op(residual, branch, normalized_shape, weight, Tensor(), eps, /*rms=*/true, "residual_rms_norm");
}

}  // namespace relgrad
