// The softmax family: softmax, log_softmax and cross_entropy (fused with log_softmax). Forward and
// backward are one pass each over a contiguous (outer, C, inner) block (kernels in core/cpu/softmax.h
// and, for CUDA tensors, cuda/softmax.h).
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/cpu/elementwise.h"
#include "core/cpu/softmax.h"
#include "cuda/reduce.h"
#include "cuda/softmax.h"

namespace relgrad {

namespace {

// A contiguous tensor of `shape` seen as (outer, C, inner) around dim d (a scalar is (1, 1, 1)).
struct DimLayout {
  int64_t outer = 1, C = 1, inner = 1;
};
DimLayout layout_around(const Shape& shape, int64_t d) {
  DimLayout L;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) (k < d ? L.outer : k == d ? L.C : L.inner) *= shape[k];
  return L;
}

// A new tensor of `dtype` on t's device.
TensorOptions on_device_of(const Tensor& t, DType dtype) { return TensorOptions(dtype).device(t.device()); }

// softmax or (log_) log_softmax along dim. Saves only the output y: both backwards need y alone.
Tensor softmax_op(const Tensor& x, int64_t dim, bool log_, const char* op) {
  DimLayout L = layout_around(x.shape(), normalize_dim(dim, x.dim(), op));
  Tensor xc = x.detach().contiguous();  // detach: the copy is internal, not a step on the tape
  Tensor y = empty(x.shape(), on_device_of(x, x.dtype()));
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::softmax_forward(x.dtype(), xc.raw_data(), y.raw_data(), L.outer, L.C, L.inner, log_, x.device().index);
    else
      cpu::softmax_forward<T>(xc.data_ptr<T>(), y.data_ptr<T>(), L.outer, L.C, L.inner, log_);
  });
  if (!needs_grad({x})) return y;
  return record(y, op, {x}, [L, log_, op, y = SavedTensor(y)](const Tensor& g) -> TensorList {
    Tensor gc = g.contiguous(), gx = empty(g.shape(), on_device_of(g, g.dtype()));
    dispatch_float(g.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      if (g.device().is_cuda()) {
        cuda::softmax_backward(g.dtype(), y.get().raw_data(), gc.raw_data(), gx.raw_data(), L.outer, L.C, L.inner, log_,
                               g.device().index);
        return;
      }
      cpu::softmax_backward<T>(y.get().data_ptr<T>(), gc.data_ptr<T>(), gx.data_ptr<T>(), L.outer, L.C, L.inner, log_);
    });
    return {gx};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op(x, dim, true, "log_softmax"); }

namespace {

// Per-row element offsets of t broadcast to `shape` (rows = every dim but the last), and its step
// along the last dim.
struct RowOffsets {
  std::vector<int64_t> row;
  int64_t step = 0;
};
RowOffsets row_offsets(const Tensor& t, const Shape& shape) {
  Shape s = cpu::broadcast_strides(t, shape);
  RowOffsets r;
  r.step = s.back();
  r.row = strided_offsets(Shape(shape.begin(), shape.end() - 1), Shape(s.begin(), s.end() - 1));
  return r;
}

}  // namespace

Tensor masked_softmax(const Tensor& x, const Tensor& mask, double scale, const Tensor& bias) {
  const char* op = "masked_softmax";
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
  const int64_t C = shape.back(), rows = C == 0 ? 0 : x.numel() / C;
  Tensor xc = x.detach().contiguous();
  Tensor y = empty(shape, on_device_of(x, x.dtype()));
  if (x.device().is_cuda()) {  // bias and mask are read in place through their broadcast strides
    dispatch_float(x.dtype(), op, [&](auto) {
      cuda::masked_softmax_forward(x.dtype(), xc.raw_data(), scale, bias.defined() ? bias.raw_data() : nullptr,
                                   bias.defined() ? cpu::broadcast_strides(bias, shape) : Shape(),
                                   mask.defined() ? static_cast<const bool*>(mask.raw_data()) : nullptr,
                                   mask.defined() ? cpu::broadcast_strides(mask, shape) : Shape(), y.raw_data(), shape,
                                   x.device().index);
    });
  } else {
    RowOffsets bo, mo;
    if (bias.defined()) bo = row_offsets(bias, shape);
    if (mask.defined()) mo = row_offsets(mask, shape);
    dispatch_float(x.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      cpu::masked_softmax_forward<T>(xc.data_ptr<T>(), scale,
                                     bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr, bo.row.data(),
                                     bo.step, mask.defined() ? static_cast<const bool*>(mask.raw_data()) : nullptr,
                                     mo.row.data(), mo.step, y.data_ptr<T>(), rows, C);
    });
  }
  TensorList inputs{x};
  if (bias.defined()) inputs.push_back(bias);
  if (!needs_grad(inputs)) return y;
  const bool want_bias = bias.defined() && bias.requires_grad();
  const Shape bias_shape = bias.defined() ? bias.shape() : Shape();
  return record(y, op, inputs, [=, y = SavedTensor(y)](const Tensor& g) -> TensorList {
    Tensor gc = g.contiguous(), gx = empty(shape, on_device_of(g, g.dtype()));
    Tensor gz = want_bias ? empty(shape, on_device_of(g, g.dtype())) : Tensor();
    dispatch_float(g.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      if (g.device().is_cuda()) {
        cuda::masked_softmax_backward(g.dtype(), y.get().raw_data(), gc.raw_data(), scale, gx.raw_data(),
                                      want_bias ? gz.raw_data() : nullptr, rows, C, g.device().index);
        return;
      }
      cpu::masked_softmax_backward<T>(y.get().data_ptr<T>(), gc.data_ptr<T>(), scale, gx.data_ptr<T>(),
                                      want_bias ? gz.data_ptr<T>() : nullptr, rows, C);
    });
    TensorList grads{gx};
    if (inputs.size() > 1) grads.push_back(want_bias ? sum_to(gz, bias_shape) : Tensor());
    return grads;
  });
}

// logits (N, C, d1, ...) with target (N, d1, ...), or unbatched logits (C) with a 0-d target, seen
// as logits (N, C, D) and target (N, D) with D = d1 * ... (1 when there are no extra dims).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options) {
  const char* op = "cross_entropy";
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
  Tensor t_host = t.device().is_cpu() ? t : t.to(Device::cpu());
  const int64_t* tp = t_host.data_ptr<int64_t>();
  int64_t count = 0;  // non-ignored positions: the denominator of the mean
  for (int64_t k = 0; k < N * D; ++k) {
    if (tp[k] == ignore) continue;
    RG_CHECK_T(IndexError, tp[k] >= 0 && tp[k] < C, op, "target ", tp[k], " is out of range for ", C,
               " classes (logits ", shape_str(logits.shape()), ", ignore_index ", ignore, ")");
    ++count;
  }

  Tensor x = logits.detach().contiguous();
  const TensorOptions opts = on_device_of(logits, logits.dtype());
  Tensor loss = empty(target_shape, opts), lse = empty(target_shape, opts);
  Tensor out;
  dispatch_float(logits.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      const int dev = x.device().index;
      cuda::cross_entropy_forward(x.dtype(), x.raw_data(), static_cast<const int64_t*>(t.raw_data()), loss.raw_data(),
                                  lse.raw_data(), N, C, D, ignore, eps, dev);
      if (options.reduction == Reduction::None) {
        out = loss;
        return;
      }
      // The sum over positions in the fixed order of the reduction kernel; mean over zero targets is NaN.
      out = empty({}, opts);
      const double s = options.reduction == Reduction::Mean ? 1.0 / static_cast<double>(count) : 1.0;
      cuda::reduce_sum(x.dtype(), loss.raw_data(), out.raw_data(), 1, N * D, 1, s, dev);
      return;
    }
    cpu::cross_entropy_forward<T>(x.data_ptr<T>(), tp, loss.data_ptr<T>(), lse.data_ptr<T>(), N, C, D, ignore, eps);
    if (options.reduction == Reduction::None) {
      out = loss;
      return;
    }
    const T* lp = loss.data_ptr<T>();
    double total = 0;  // serial, in position order: reproducible
    for (int64_t k = 0; k < N * D; ++k) total += lp[k];
    // Mean over zero targets is 0/0 = NaN, as PyTorch.
    if (options.reduction == Reduction::Mean) total /= static_cast<double>(count);
    out = scalar_tensor(total, TensorOptions(logits.dtype()));
  });
  if (!needs_grad({logits})) return out;
  // Saved: the logits (an alias when they were contiguous, so no copy), the targets and lse (one
  // value per position). Saving log-probabilities instead would cost a second (N, C, D) buffer.
  const Reduction reduction = options.reduction;
  double scale = reduction == Reduction::Mean ? 1.0 / static_cast<double>(count) : 1.0;
  return record(out, op, {logits}, [=, x = SavedTensor(x), t = SavedTensor(t), lse = SavedTensor(lse)](const Tensor& g) -> TensorList {
    const Tensor& xv = x.get();
    Tensor gc = g.contiguous(), gx = empty(xv.shape(), on_device_of(xv, xv.dtype()));
    dispatch_float(xv.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      if (xv.device().is_cuda()) {
        cuda::cross_entropy_backward(xv.dtype(), xv.raw_data(), static_cast<const int64_t*>(t.get().raw_data()),
                                     lse.get().raw_data(), gc.raw_data(), reduction != Reduction::None, scale,
                                     gx.raw_data(), N, C, D, ignore, eps, xv.device().index);
        return;
      }
      cpu::cross_entropy_backward<T>(xv.data_ptr<T>(), t.get().data_ptr<int64_t>(), lse.get().data_ptr<T>(),
                                     gc.data_ptr<T>(), reduction != Reduction::None, scale, gx.data_ptr<T>(), N, C, D,
                                     ignore, eps);
    });
    return {gx};
  });
}

}  // namespace relgrad
