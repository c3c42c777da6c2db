#include "core/cpu/adam.h"

#include <cmath>

#include "core/strided.h"

namespace relgrad::cpu {

bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  for (const Tensor* t : {&param, &grad, &m, &v})
    if (!t->device().is_cpu() || !t->is_contiguous() || t->dtype() != param.dtype() || t->shape() != param.shape())
      return false;
  return is_floating(param.dtype());
}

namespace {

template <class T>
void adam_kernel(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep& s) {
  const T shrink = static_cast<T>(1 - s.lr * s.weight_decay), wd = static_cast<T>(s.weight_decay);
  const T b1 = static_cast<T>(s.beta1), one_minus_b1 = static_cast<T>(1 - s.beta1);
  const T b2 = static_cast<T>(s.beta2), one_minus_b2 = static_cast<T>(1 - s.beta2);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(s.bias_correction2)), eps = static_cast<T>(s.eps);
  const T neg_step = static_cast<T>(-(s.lr / s.bias_correction1));
  const bool decoupled = s.decoupled, l2 = !s.decoupled && s.weight_decay != 0;
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i], gi = g[i];
    if (decoupled) pi = pi * shrink;
    if (l2) gi = gi + pi * wd;
    const T mi = m[i] * b1 + gi * one_minus_b1;
    const T vi = v[i] * b2 + (gi * one_minus_b2) * gi;
    const T denom = std::sqrt(vi) / sqrt_bc2 + eps;
    p[i] = pi + (mi / denom) * neg_step;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  dispatch_float(param.dtype(), "adam_step", [&](auto zero) {
    using T = decltype(zero);
    adam_kernel<T>(param.data_ptr<T>(), grad.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(), param.numel(), s);
  });
}

}  // namespace relgrad::cpu
