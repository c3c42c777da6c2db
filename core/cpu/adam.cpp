#include "core/cpu/adam.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/strided.h"

namespace relgrad::cpu {

bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  for (const Tensor* t : {&param, &grad, &m, &v})
    if (!t->device().is_cpu() || !t->is_contiguous() || t->dtype() != param.dtype() || t->shape() != param.shape())
      return false;
  return is_floating(param.dtype());
}

namespace {

// Elements [begin, end) of one parameter's update (the same arithmetic for every element, so any cut
// of the elements gives the same bits).
template <class T>
void adam_range(T* p, const T* g, T* m, T* v, int64_t begin, int64_t end, const AdamStep& s) {
  const T shrink = static_cast<T>(1 - s.lr * s.weight_decay), wd = static_cast<T>(s.weight_decay);
  const T b1 = static_cast<T>(s.beta1), one_minus_b1 = static_cast<T>(1 - s.beta1);
  const T b2 = static_cast<T>(s.beta2), one_minus_b2 = static_cast<T>(1 - s.beta2);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(s.bias_correction2)), eps = static_cast<T>(s.eps);
  const T neg_step = static_cast<T>(-(s.lr / s.bias_correction1));
  const bool decoupled = s.decoupled, l2 = !s.decoupled && s.weight_decay != 0;
  for (int64_t i = begin; i < end; ++i) {
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

void adam_chunk(const AdamJob& job, int64_t begin, int64_t end) {
  dispatch_float(job.param.dtype(), "adam_step", [&](auto zero) {
    using T = decltype(zero);
    adam_range<T>(job.param.data_ptr<T>(), job.grad.data_ptr<T>(), job.m.data_ptr<T>(), job.v.data_ptr<T>(), begin,
                  end, job.step);
  });
}

// Elements per task of adam_steps: large enough that a task outweighs handing it out.
constexpr int64_t kAdamChunk = 16384;

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  adam_steps({AdamJob{param, grad, m, v, s}});
}

void adam_steps(const std::vector<AdamJob>& jobs) {
  // Tasks: each parameter cut into chunks of kAdamChunk elements, all parameters' chunks in one list,
  // so the whole step is one parallel region (a region per parameter woke the other threads each time,
  // and a parameter under the grain ran on one thread).
  std::vector<std::pair<size_t, int64_t>> tasks;  // (job, first element)
  int64_t total = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int64_t n = jobs[j].param.numel();
    total += n;
    for (int64_t begin = 0; begin < n; begin += kAdamChunk) tasks.emplace_back(j, begin);
  }
  const int64_t count = static_cast<int64_t>(tasks.size());
#pragma omp parallel for schedule(static) if (total > kParallelGrain && count > 1)
  for (int64_t t = 0; t < count; ++t) {
    const auto [j, begin] = tasks[t];
    adam_chunk(jobs[j], begin, std::min(begin + kAdamChunk, jobs[j].param.numel()));
  }
}

}  // namespace relgrad::cpu
