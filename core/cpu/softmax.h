// Softmax-family CPU kernels on a contiguous (outer, C, inner) block: C is the softmax (class) dim
// and each of the outer * inner columns x[o, :, i] is normalised on its own (inner = 1 when the
// class dim is the last one). Sums are taken in double, always in the same order by one thread.
#pragma once
#include <cmath>

#include "core/cpu/reduce.h"

namespace relgrad::cpu {

// max_c col[c * inner] (NaN skipped; it reaches the sums that follow and propagates from there).
template <class T>
double column_max(const T* col, int64_t C, int64_t inner) {
  double m = -INFINITY;
  for (int64_t c = 0; c < C; ++c) m = std::max<double>(m, col[c * inner]);
  return m;
}

// x, y (outer, C, inner): y = softmax(x) or, with log_, log_softmax(x) = x - m - log sum exp(x - m),
// where m is the column max: subtracting it keeps exp from overflowing at large logits.
template <class T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t C, int64_t inner, bool log_) {
  for_each_column(outer, C, inner, [=](int64_t o, int64_t i) {
    const int64_t base = o * C * inner + i;
    const double m = column_max(x + base, C, inner);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[base + c * inner] - m);
    const double log_s = std::log(s);
    for (int64_t c = 0; c < C; ++c) {
      const double z = x[base + c * inner] - m;
      y[base + c * inner] = static_cast<T>(log_ ? z - log_s : std::exp(z) / s);
    }
  });
}

// y, g, gx (outer, C, inner), y the forward output. One pass per column:
//   softmax:     gx = y * (g - sum_c g * y)
//   log_softmax: gx = g - exp(y) * sum_c g
template <class T>
void softmax_backward(const T* y, const T* g, T* gx, int64_t outer, int64_t C, int64_t inner, bool log_) {
  for_each_column(outer, C, inner, [=](int64_t o, int64_t i) {
    const int64_t base = o * C * inner + i;
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += log_ ? g[base + c * inner] : double(g[base + c * inner]) * y[base + c * inner];
    for (int64_t c = 0; c < C; ++c) {
      const int64_t k = base + c * inner;
      gx[k] = static_cast<T>(log_ ? g[k] - std::exp(double(y[k])) * s : y[k] * (g[k] - s));
    }
  });
}

// Cross-entropy fused with log_softmax. logits x (N, C, D), target (N, D) → loss (N, D) and
// lse (N, D) = log sum_c exp(x), which is all the backward needs besides x and target:
//   log p_c = x_c - lse;  loss = (1 - eps) (-log p_t) + eps mean_c(-log p_c)   (eps = label smoothing)
// Positions whose target is ignore_index get loss 0. Targets must already be checked to lie in [0, C).
template <class T>
void cross_entropy_forward(const T* x, const int64_t* target, T* loss, T* lse, int64_t N, int64_t C, int64_t D,
                           int64_t ignore_index, double eps) {
  for_each_column(N, C, D, [=](int64_t n, int64_t d) {
    const int64_t pos = n * D + d, base = n * C * D + d, t = target[pos];
    if (t == ignore_index) {
      loss[pos] = lse[pos] = T(0);
      return;
    }
    const double m = column_max(x + base, C, D);
    double s = 0, sum_x = 0;
    for (int64_t c = 0; c < C; ++c) {
      s += std::exp(x[base + c * D] - m);
      sum_x += x[base + c * D];
    }
    const double l = m + std::log(s);
    const double nll = l - x[base + t * D], smooth = l - sum_x / static_cast<double>(C);
    loss[pos] = static_cast<T>((1 - eps) * nll + eps * smooth);
    lse[pos] = static_cast<T>(l);
  });
}

// gx (N, C, D) = w * (p_c - (1 - eps) [c == t] - eps / C) with p = exp(x - lse), w = g[pos] * scale
// (g has one element per position, or one in all when g_is_scalar); zero at ignored positions.
template <class T>
void cross_entropy_backward(const T* x, const int64_t* target, const T* lse, const T* g, bool g_is_scalar,
                            double scale, T* gx, int64_t N, int64_t C, int64_t D, int64_t ignore_index, double eps) {
  for_each_column(N, C, D, [=](int64_t n, int64_t d) {
    const int64_t pos = n * D + d, base = n * C * D + d, t = target[pos];
    if (t == ignore_index) {
      for (int64_t c = 0; c < C; ++c) gx[base + c * D] = T(0);
      return;
    }
    const double w = double(g_is_scalar ? g[0] : g[pos]) * scale;
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(double(x[base + c * D]) - lse[pos]);
      gx[base + c * D] = static_cast<T>(w * (p - (c == t ? 1 - eps : 0.0) - eps / static_cast<double>(C)));
    }
  });
}

}  // namespace relgrad::cpu
