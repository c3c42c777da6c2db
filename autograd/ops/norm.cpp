// layer_norm and rms_norm over the trailing dims named by `normalized_shape`. The input is viewed as
// rows (R, N), N = numel(normalized_shape); the fused kernels (core/backend/norm.h) normalise each
// row. Forward saves x, weight, and the per-row statistics (mean and
// rstd, or rstd alone for rms_norm) for one fused backward kernel that gives dx, dweight and dbias
// together.
#include <limits>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "autograd/profiler.h"
#include "core/backend/norm.h"

namespace relgrad {

namespace {

// t as a contiguous tensor on its device, without autograd history (copied only when t is not contiguous).
Tensor dense(const Tensor& t) {
  if (!t.defined() || t.is_contiguous()) return t.defined() ? t.detach() : t;
  Tensor c = empty(t.shape(), TensorOptions(t.dtype()).device(t.device()));
  copy_into(c, t, "norm");
  return c;
}

// Checks shared by both ops; returns N, the number of elements in one normalised row.
int64_t check_norm_args(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias, const char* op) {
  RG_CHECK(x.defined(), op, "called with an undefined input tensor");
  dispatch_float(x.dtype(), op, [](auto) {});
  RG_CHECK_T(ShapeError, !ns.empty(), op, "normalized_shape must have at least one dim, got () for input ",
             shape_str(x.shape()));
  const int64_t nd = static_cast<int64_t>(ns.size());
  RG_CHECK_T(ShapeError, x.dim() >= nd && Shape(x.shape().end() - nd, x.shape().end()) == ns, op, "normalized_shape ",
             shape_str(ns), " does not match the last dims of input ", shape_str(x.shape()),
             " (expected an input of shape (*,", shape_str(ns).substr(1), ")");
  auto check_param = [&](const Tensor& p, const char* what) {
    if (!p.defined()) return;
    RG_CHECK_T(ShapeError, p.shape() == ns, op, what, " of shape ", shape_str(p.shape()),
               " does not match normalized_shape ", shape_str(ns), " (input ", shape_str(x.shape()), ")");
    RG_CHECK_T(DTypeError, p.dtype() == x.dtype(), op, what, " is ", dtype_name(p.dtype()), " but input is ",
               dtype_name(x.dtype()));
    RG_CHECK_T(DeviceError, p.device() == x.device(), op, what, " is on ", p.device().str(), " but input is on ",
               x.device().str());
  };
  check_param(weight, "weight");
  check_param(bias, "bias");
  return shape_numel(ns);
}

// The shared forward and backward; rms = true gives rms_norm (no mean, no bias).
Tensor norm_op(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias, double eps, bool rms,
               const char* op) {
  RG_PROFILE_OP(op);
  const int64_t N = check_norm_args(x, ns, weight, bias, op);
  const int64_t R = N == 0 ? 0 : x.numel() / N;
  // eps < 0 (the default -1 of rms_norm) stands for PyTorch's None: the dtype's machine epsilon.
  if (eps < 0) eps = x.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  Tensor xc = dense(x), wc = dense(weight), bc = dense(bias);
  backend::NormForward f = backend::norm_forward(xc, wc, bc, rms, R, N, eps);
  Tensor y = f.y;
  TensorList inputs = rms ? TensorList{x, weight} : TensorList{x, weight, bias};
  if (!needs_grad(inputs)) return y;
  const bool need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
             need_b = bias.defined() && bias.requires_grad();
  // xc and wc are saved (not x and weight): they are what the kernel reads, already contiguous.
  return record(y, op, inputs,
                [need_x, need_w, need_b, rms, R, N, x_shape = x.shape(), ns, x = SavedTensor(xc),
                 w = SavedTensor(wc), mean = SavedTensor(f.mean), rstd = SavedTensor(f.rstd)](const Tensor& g) -> TensorList {
                  backend::NormGrads d = backend::norm_backward(dense(g), x.get(), mean.get(), rstd.get(), w.get(),
                                                                x_shape, ns, need_x, need_w, need_b, R, N);  // g (R, N)
                  if (rms) return {d.dx, d.dw};
                  return {d.dx, d.dw, d.db};
                });
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return norm_op(x, normalized_shape, weight, bias, eps, /*rms=*/false, "layer_norm");
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
  return norm_op(x, normalized_shape, weight, Tensor(), eps, /*rms=*/true, "rms_norm");
}

}  // namespace relgrad
