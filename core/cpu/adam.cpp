#include "core/cpu/adam.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/parallel_for.h"
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

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  adam_steps({AdamJob{param, grad, m, v, s}});
}

void adam_steps(const std::vector<AdamJob>& jobs) {
  // The parameters end to end as one range of elements, cut into one equal part per thread: the whole
  // step is one parallel region (a region per parameter woke the other threads each time) and every
  // thread updates the same number of elements (tasks of a parameter or a chunk of one, shared out
  // by count, gave a thread more elements than another wherever the sizes differ).
  std::vector<int64_t> first(jobs.size() + 1, 0);  // where job j starts in that range
  for (size_t j = 0; j < jobs.size(); ++j) first[j + 1] = first[j] + jobs[j].param.numel();
  const int64_t total = first.back();
#ifdef _OPENMP
  const int parts = total > kParallelGrain ? std::max(1, omp_get_max_threads()) : 1;
#else
  const int parts = 1;
#endif
  parallel_for(parts, parts > 1, [&](int64_t part) {
    const int64_t lo = total * part / parts, hi = total * (part + 1) / parts;
    size_t j = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), lo) - first.begin()) - 1;
    for (; j < jobs.size() && first[j] < hi; ++j) {
      const int64_t begin = std::max(lo, first[j]) - first[j], end = std::min(hi, first[j + 1]) - first[j];
      if (begin < end) adam_chunk(jobs[j], begin, end);
    }
  });
}

}  // namespace relgrad::cpu
