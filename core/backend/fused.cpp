// Fused elementwise entries: one kernel per direction, core/cpu/fused.h or cuda/fused.h.
#include "core/backend/fused.h"

#include "core/backend/dense.h"
#include "core/base/functors.h"
#include "core/cpu/fused.h"
#include "cuda/fused.h"

namespace relgrad::backend {

namespace {

// Calls f with the functor of core/base/functors.h that `act` names.
template <class F>
decltype(auto) with_activation(Activation act, F f) {
  switch (act) {
    case Activation::Relu: return f(fn::Relu{});
    case Activation::Gelu: return f(fn::Gelu{});
    case Activation::GeluTanh: return f(fn::GeluTanh{});
  }
  throw Error("[bias_activation] unknown activation");
}

}  // namespace

Tensor bias_activation_forward(const Tensor& x, const Tensor& b, Activation act, int64_t R, int64_t N,
                               Tensor* kept) {
  Tensor y = empty_on(x, x.shape(), x.dtype());
  if (kept) *kept = Tensor();
  dispatch_float(x.dtype(), "bias_activation", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::bias_activation_forward(act, x.dtype(), x.raw_data(), b.raw_data(), y.raw_data(), R, N, x.device().index);
      return;
    }
    if (kept && act == Activation::Gelu && x.numel() * int64_t(sizeof(T)) <= cpu::kKeepErfBytes) {
      *kept = empty_on(x, x.shape(), x.dtype());
      cpu::bias_gelu_forward_keeping_erf<T>(x.data_ptr<T>(), b.data_ptr<T>(), y.data_ptr<T>(), kept->data_ptr<T>(), R,
                                            N);
      return;
    }
    with_activation(act, [&](auto f) {
      cpu::bias_activation_forward<T>(x.data_ptr<T>(), b.data_ptr<T>(), y.data_ptr<T>(), R, N, f);
    });
  });
  return y;
}

BiasActivationGrads bias_activation_backward(const Tensor& gy, const Tensor& x, const Tensor& b, Activation act,
                                             bool need_b, int64_t R, int64_t N, const Tensor& kept) {
  BiasActivationGrads d{empty_on(x, x.shape(), x.dtype()), need_b ? empty_on(x, b.shape(), x.dtype()) : Tensor()};
  dispatch_float(x.dtype(), "bias_activation", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::bias_activation_backward(act, x.dtype(), gy.raw_data(), x.raw_data(), b.raw_data(), d.dx.raw_data(),
                                     raw_or_null(d.db), R, N, x.device().index);
      return;
    }
    if (kept.defined() && act == Activation::Gelu) {
      cpu::bias_activation_backward<T>(gy.data_ptr<T>(), x.data_ptr<T>(), b.data_ptr<T>(), d.dx.data_ptr<T>(),
                                       ptr_or_null<T>(d.db), R, N, cpu::GeluFromErf{}, kept.data_ptr<T>());
      return;
    }
    with_activation(act, [&](auto f) {
      cpu::bias_activation_backward<T>(gy.data_ptr<T>(), x.data_ptr<T>(), b.data_ptr<T>(), d.dx.data_ptr<T>(),
                                       ptr_or_null<T>(d.db), R, N, f);
    });
  });
  return d;
}

ResidualNormForward residual_norm_forward(const Tensor& residual, const Tensor& branch, const Tensor& weight,
                                          const Tensor& bias, bool rms, int64_t R, int64_t N, double eps) {
  const Tensor& x = residual;
  ResidualNormForward f{empty_on(x, x.shape(), x.dtype()), empty_on(x, x.shape(), x.dtype()),
                        rms ? Tensor() : empty_on(x, {R}, x.dtype()), empty_on(x, {R}, x.dtype())};
  dispatch_float(x.dtype(), rms ? "residual_rms_norm" : "residual_layer_norm", [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::residual_norm_forward(x.dtype(), residual.raw_data(), branch.raw_data(), raw_or_null(weight),
                                  raw_or_null(bias), f.sum.raw_data(), f.y.raw_data(), raw_or_null(f.mean),
                                  f.rstd.raw_data(), R, N, eps, x.device().index);
      return;
    }
    cpu::residual_norm_forward<T>(residual.data_ptr<T>(), branch.data_ptr<T>(), ptr_or_null<T>(weight),
                                  ptr_or_null<T>(bias), f.sum.data_ptr<T>(), f.y.data_ptr<T>(), ptr_or_null<T>(f.mean),
                                  f.rstd.data_ptr<T>(), R, N, eps);
  });
  return f;
}

}  // namespace relgrad::backend
