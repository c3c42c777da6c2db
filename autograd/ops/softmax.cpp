// The softmax family: softmax, log_softmax and cross_entropy (fused with log_softmax). Forward and
// backward are one pass each over a contiguous (outer, C, inner) block (core/backend/softmax.h).
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/softmax.h"

namespace relgrad {

namespace {

// A contiguous tensor of `shape` seen as (outer, C, inner) around dim d (a scalar is (1, 1, 1)).
SoftmaxLayout layout_around(const Shape& shape, int64_t d, bool log) {
  SoftmaxLayout L;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) (k < d ? L.outer : k == d ? L.C : L.inner) *= shape[k];
  L.log = log;
  return L;
}

// softmax or (log_) log_softmax along dim. Saves only the output y: both backwards need y alone.
Tensor softmax_op(const Tensor& x, int64_t dim, bool log_, const char* op) {
  RG_PROFILE_OP(op);
  const SoftmaxLayout L = layout_around(x.shape(), normalize_dim(dim, x.dim(), op), log_);
  // detach: the contiguous copy is internal, not a step on the tape
  Tensor y = backend::softmax_forward(x.detach().contiguous(), L);
  if (!needs_grad({x})) return y;
  return record(y, op, {x}, [L, y = SavedTensor(y)](const Tensor& g) -> TensorList {
    return {backend::softmax_backward(y.get(), g.contiguous(), L)};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, true, "log_softmax"); }

Tensor masked_softmax(const Tensor& x, const Tensor& mask, double scale, const Tensor& bias) {
  const char* op = "masked_softmax";
  RG_PROFILE_OP(op);
  RG_CHECK_T(DTypeError, is_floating(x.dtype()), op, "x must be float32 or float64, got ", dtype_name(x.dtype()));
  RG_CHECK_T(ShapeError, x.dim() >= 1, op, "x needs at least one dim, got shape ()");
  const Shape& shape = x.shape();
  auto check_broadcasts = [&](const Tensor& t, const char* what) {
    check_same_device(x, t, op);
    RG_CHECK_T(ShapeError, broadcasts_to(t.shape(), shape), op, what, " ",
               shape_str(t.shape()), " does not broadcast to x ", shape_str(shape));
  };
  if (mask.defined()) {
    check_broadcasts(mask, "mask");
    RG_CHECK_T(DTypeError, mask.dtype() == kBool, op, "mask must be bool, got ", dtype_name(mask.dtype()));
  }
  if (bias.defined()) {
    check_broadcasts(bias, "bias");
    check_same_dtype(x, bias, op);
  }
  // bias and mask are read in place through their broadcast strides
  Tensor y = backend::masked_softmax_forward(x.detach().contiguous(), scale, bias, mask);
  TensorList inputs{x};
  if (bias.defined()) inputs.push_back(bias);
  if (!needs_grad(inputs)) return y;
  const bool want_bias = bias.defined() && bias.requires_grad();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape();
  return record(y, op, inputs, [=, y = SavedTensor(y)](const Tensor& g) -> TensorList {
    backend::MaskedSoftmaxGrads d = backend::masked_softmax_backward(y.get(), g.contiguous(), scale, want_bias);
    TensorList grads{d.gx};
    if (inputs.size() > 1) grads.push_back(want_bias ? sum_to(d.gz, bias_shape) : Tensor());
    return grads;
  });
}

// logits (N, C, d1, ...) with target (N, d1, ...), or unbatched logits (C) with a 0-d target, seen
// as logits (N, C, D) and target (N, D) with D = d1 * ... (1 when there are no extra dims).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  const char* op = "cross_entropy";
  RG_PROFILE_OP(op);
  check_same_device(logits, target, op);
  RG_CHECK_T(DTypeError, is_floating(logits.dtype()), op, "logits must be float32 or float64, got ",
             dtype_name(logits.dtype()), " ", shape_str(logits.shape()));
  RG_CHECK_T(DTypeError, target.dtype() == kInt64, op, "target must hold int64 class indices, got ",
             dtype_name(target.dtype()), " ", shape_str(target.shape()));
  RG_CHECK_T(ShapeError, logits.dim() >= 1, op, "logits need a class dim, got shape ()");
  const int64_t class_dim = logits.dim() == 1 ? 0 : 1;
  Shape target_shape = logits.shape();
  target_shape.erase(target_shape.begin() + class_dim);
  RG_CHECK_T(ShapeError, target.shape() == target_shape, op, "logits ", shape_str(logits.shape()),
             " need a target of shape ", shape_str(target_shape), ", got ", shape_str(target.shape()));
  const double eps = options.label_smoothing;
  RG_CHECK(eps >= 0 && eps <= 1, op, "label_smoothing must be in [0, 1], got ", eps);
  const int64_t ignore = options.ignore_index;
  const int64_t N = class_dim == 0 ? 1 : logits.size(0), C = logits.size(class_dim);
  const int64_t D = logits.dim() > 2 ? shape_numel(Shape(logits.shape().begin() + 2, logits.shape().end())) : 1;

  // Check every target here, before the (parallel) kernel, which must not throw. CUDA targets are
  // checked on a host copy: the mean's denominator is needed on the host anyway.
  Tensor t = target.detach().contiguous();
  Tensor t_host = t.to(Device::cpu());  // t itself on the CPU
  const int64_t* tp = t_host.data_ptr<int64_t>();
  int64_t count = 0;  // non-ignored positions: the denominator of the mean
  for (int64_t k = 0; k < N * D; ++k) {
    if (tp[k] == ignore) continue;
    RG_CHECK_T(IndexError, tp[k] >= 0 && tp[k] < C, op, "target ", tp[k], " is out of range for ", C,
               " classes (logits ", shape_str(logits.shape()), ", ignore_index ", ignore, ")");
    ++count;
  }

  Tensor x = logits.detach().contiguous();
  const CrossEntropyLayout L{N, C, D, ignore, eps};
  backend::CrossEntropyForward f = backend::cross_entropy_forward(x, t, t_host, target_shape, L);
  // Mean over zero targets is 0/0 = NaN, as PyTorch.
  Tensor out = options.reduction == Reduction::None
                   ? f.loss
                   : backend::sum_positions(f.loss, options.reduction == Reduction::Mean, count);
  if (!needs_grad({logits})) return out;
  // Saved: the logits (an alias when they were contiguous, so no copy), the targets and lse (one
  // value per position). Saving log-probabilities instead would cost a second (N, C, D) buffer.
  const Reduction reduction = options.reduction;
  double scale = reduction == Reduction::Mean ? 1.0 / static_cast<double>(count) : 1.0;
  return record(out, op, {logits}, [=, x = SavedTensor(x), t = SavedTensor(t), lse = SavedTensor(f.lse)](const Tensor& g) -> TensorList {
    return {backend::cross_entropy_backward(x.get(), t.get(), lse.get(), g.contiguous(), reduction != Reduction::None,
                                            scale, L)};
  });
}

}  // namespace relgrad
