// layer_norm and rms_norm over the trailing dims named by `normalized_shape`. The input is viewed as
// rows (R, N), N = numel(normalized_shape); the fused kernels (core/backend/norm.h) normalise each
// row. Forward saves x, weight, and the per-row statistics (mean and
// rstd, or rstd alone for rms_norm) for one fused backward kernel that gives dx, dweight and dbias
// together.
#include <limits>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "autograd/ops/norm_checks.h"
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
