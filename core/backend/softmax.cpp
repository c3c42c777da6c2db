// Softmax-family entries: one pass each over contiguous rows, on the CPU (core/cpu/softmax.h) or the
// GPU (cuda/softmax.h, with cuda/reduce.h for the cross-entropy sum).
#include "core/backend/softmax.h"

#include "core/backend/dense.h"
#include "core/cpu/softmax.h"
#include "cuda/reduce.h"
#include "cuda/softmax.h"

namespace relgrad::backend {

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

Tensor softmax_forward(const Tensor& x, const SoftmaxLayout& L) {
  const char* op = L.log ? "log_softmax" : "softmax";
  Tensor y = empty_on(x, x.shape(), x.dtype());
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::softmax_forward(x.dtype(), x.raw_data(), y.raw_data(), L, x.device().index);
    else
      cpu::softmax_forward<T>(x.data_ptr<T>(), y.data_ptr<T>(), L);
  });
  return y;
}

Tensor softmax_backward(const Tensor& y, const Tensor& g, const SoftmaxLayout& L) {
  const char* op = L.log ? "log_softmax" : "softmax";
  Tensor gx = empty_on(g, g.shape(), g.dtype());
  dispatch_float(g.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (g.device().is_cuda())
      cuda::softmax_backward(g.dtype(), y.raw_data(), g.raw_data(), gx.raw_data(), L, g.device().index);
    else
      cpu::softmax_backward<T>(y.data_ptr<T>(), g.data_ptr<T>(), gx.data_ptr<T>(), L);
  });
  return gx;
}

Tensor masked_softmax_forward(const Tensor& x, double scale, const Tensor& bias, const Tensor& mask) {
  const char* op = "masked_softmax";
  const Shape& shape = x.shape();
  const int64_t C = shape.back(), rows = C == 0 ? 0 : x.numel() / C;
  Tensor y = empty_on(x, shape, x.dtype());
  const bool* mp = mask.defined() ? static_cast<const bool*>(mask.raw_data()) : nullptr;
  if (x.device().is_cuda()) {  // bias and mask are read in place through their broadcast strides
    dispatch_float(x.dtype(), op, [&](auto) {
      cuda::masked_softmax_forward(x.dtype(), x.raw_data(), scale, raw_or_null(bias),
                                   bias.defined() ? cpu::broadcast_strides(bias, shape) : Shape(), mp,
                                   mask.defined() ? cpu::broadcast_strides(mask, shape) : Shape(), y.raw_data(), shape,
                                   x.device().index);
    });
    return y;
  }
  RowOffsets bo, mo;
  if (bias.defined()) bo = row_offsets(bias, shape);
  if (mask.defined()) mo = row_offsets(mask, shape);
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::masked_softmax_forward<T>(x.data_ptr<T>(), scale, ptr_or_null<const T>(bias), bo.row.data(), bo.step, mp,
                                   mo.row.data(), mo.step, y.data_ptr<T>(), rows, C);
  });
  return y;
}

MaskedSoftmaxGrads masked_softmax_backward(const Tensor& y, const Tensor& g, double scale, bool want_bias) {
  const Shape& shape = y.shape();
  const int64_t C = shape.back(), rows = C == 0 ? 0 : y.numel() / C;
  Tensor gx = empty_on(g, shape, g.dtype());
  Tensor gz = want_bias ? empty_on(g, shape, g.dtype()) : Tensor();
  dispatch_float(g.dtype(), "masked_softmax", [&](auto zero) {
    using T = decltype(zero);
    if (g.device().is_cuda()) {
      cuda::masked_softmax_backward(g.dtype(), y.raw_data(), g.raw_data(), scale, gx.raw_data(), raw_or_null(gz), rows,
                                    C, g.device().index);
      return;
    }
    cpu::masked_softmax_backward<T>(y.data_ptr<T>(), g.data_ptr<T>(), scale, gx.data_ptr<T>(), ptr_or_null<T>(gz),
                                    rows, C);
  });
  return {gx, gz};
}

CrossEntropyForward cross_entropy_forward(const Tensor& x, const Tensor& t, const Tensor& t_host,
                                          const Shape& target_shape, const CrossEntropyLayout& L) {
  CrossEntropyForward f{empty_on(x, target_shape, x.dtype()), empty_on(x, target_shape, x.dtype())};
  dispatch_float(x.dtype(), "cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::cross_entropy_forward(x.dtype(), x.raw_data(), static_cast<const int64_t*>(t.raw_data()),
                                  f.loss.raw_data(), f.lse.raw_data(), L, x.device().index);
    else
      cpu::cross_entropy_forward<T>(x.data_ptr<T>(), t_host.data_ptr<int64_t>(), f.loss.data_ptr<T>(),
                                    f.lse.data_ptr<T>(), L);
  });
  return f;
}

Tensor sum_positions(const Tensor& loss, bool mean, int64_t count) {
  if (loss.device().is_cuda()) {  // the fixed order of the reduction kernel
    Tensor out = empty_on(loss, {}, loss.dtype());
    const double s = mean ? 1.0 / static_cast<double>(count) : 1.0;
    cuda::reduce_sum(loss.dtype(), loss.raw_data(), out.raw_data(), 1, loss.numel(), 1, s, loss.device().index);
    return out;
  }
  double total = 0;  // serial, in position order: reproducible
  dispatch_float(loss.dtype(), "cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    const T* lp = loss.data_ptr<T>();
    for (int64_t k = 0; k < loss.numel(); ++k) total += lp[k];
  });
  if (mean) total /= static_cast<double>(count);
  return scalar_tensor(total, TensorOptions(loss.dtype()));
}

Tensor cross_entropy_backward(const Tensor& x, const Tensor& t, const Tensor& lse, const Tensor& g, bool reduced,
                              double scale, const CrossEntropyLayout& L) {
  Tensor gx = empty_on(x, x.shape(), x.dtype());
  dispatch_float(x.dtype(), "cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::cross_entropy_backward(x.dtype(), x.raw_data(), static_cast<const int64_t*>(t.raw_data()), lse.raw_data(),
                                   g.raw_data(), reduced, scale, gx.raw_data(), L, x.device().index);
    else
      cpu::cross_entropy_backward<T>(x.data_ptr<T>(), t.data_ptr<int64_t>(), lse.data_ptr<T>(), g.data_ptr<T>(),
                                     reduced, scale, gx.data_ptr<T>(), L);
  });
  return gx;
}

}  // namespace relgrad::backend
