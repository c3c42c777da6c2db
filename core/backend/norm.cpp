// Normalisation entries: one fused kernel per direction, core/cpu/norm.h or cuda/norm.h.
#include "core/backend/norm.h"

#include "core/backend/dense.h"
#include "core/cpu/norm.h"
#include "cuda/norm.h"

namespace relgrad::backend {

NormForward norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool rms, int64_t R, int64_t N,
                         double eps) {
  const char* op = rms ? "rms_norm" : "layer_norm";
  NormForward f{empty_on(x, x.shape(), x.dtype()), rms ? Tensor() : empty_on(x, {R}, x.dtype()),
                empty_on(x, {R}, x.dtype())};
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::norm_forward(x.dtype(), x.raw_data(), raw_or_null(weight), raw_or_null(bias), f.y.raw_data(),
                         raw_or_null(f.mean), f.rstd.raw_data(), R, N, eps, x.device().index);
      return;
    }
    cpu::norm_forward<T>(x.data_ptr<T>(), ptr_or_null<T>(weight), ptr_or_null<T>(bias), f.y.data_ptr<T>(),
                         ptr_or_null<T>(f.mean), f.rstd.data_ptr<T>(), R, N, eps);
  });
  return f;
}

NormGrads norm_backward(const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                        const Shape& x_shape, const Shape& ns, bool need_x, bool need_w, bool need_b, int64_t R,
                        int64_t N) {
  const char* op = mean.defined() ? "layer_norm" : "rms_norm";
  NormGrads d{need_x ? empty_on(x, x_shape, x.dtype()) : Tensor(), need_w ? empty_on(x, ns, x.dtype()) : Tensor(),
              need_b ? empty_on(x, ns, x.dtype()) : Tensor()};
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::norm_backward(x.dtype(), g.raw_data(), x.raw_data(), raw_or_null(mean), rstd.raw_data(),
                          raw_or_null(weight), raw_or_null(d.dx), raw_or_null(d.dw), raw_or_null(d.db), R, N,
                          x.device().index);
      return;
    }
    cpu::norm_backward<T>(g.data_ptr<T>(), x.data_ptr<T>(), ptr_or_null<T>(mean), rstd.data_ptr<T>(),
                          ptr_or_null<T>(weight), ptr_or_null<T>(d.dx), ptr_or_null<T>(d.dw), ptr_or_null<T>(d.db),
                          R, N);
  });
  return d;
}

}  // namespace relgrad::backend
