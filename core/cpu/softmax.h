// Softmax-family CPU kernels on a contiguous (outer, C, inner) block: C is the softmax (class) dim
// and each of the outer * inner columns x[o, :, i] is normalised on its own (inner = 1 when the
// class dim is the last one). Columns go in blocks of w neighbours (see for_each_column_block in
// core/cpu/reduce.h); sums are taken in double, in a fixed order, by one thread per column.
#pragma once
#include <cmath>

#include "core/cpu/reduce.h"

namespace relgrad::cpu {

// x, y (outer, C, inner): y = softmax(x) or, with log_, log_softmax(x) = x - m - log sum exp(x - m),
// where m is the column max: subtracting it keeps exp from overflowing at large logits.
template <class T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t C, int64_t inner, bool log_) {
  for_each_column_block(outer, C, inner, [=](int64_t o, int64_t i0, int64_t w) {
    const T* x0 = x + o * C * inner + i0;  // x0[c * inner + j] = x[o, c, i0 + j]
    T* y0 = y + o * C * inner + i0;
    double m[kColumnBlock], s[kColumnBlock] = {};
    block_max(x0, C, inner, w, m);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        const double e = std::exp(x0[c * inner + j] - m[j]);
        s[j] += e;
        if (!log_) y0[c * inner + j] = static_cast<T>(e);  // kept, so exp runs once per element
      }
    for (int64_t j = 0; j < w; ++j) s[j] = log_ ? m[j] + std::log(s[j]) : 1.0 / s[j];
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        const int64_t k = c * inner + j;
        y0[k] = static_cast<T>(log_ ? x0[k] - s[j] : y0[k] * s[j]);
      }
  });
}

// y, g, gx (outer, C, inner), y the forward output. One pass per column block:
//   softmax:     gx = y * (g - sum_c g * y)
//   log_softmax: gx = g - exp(y) * sum_c g
template <class T>
void softmax_backward(const T* y, const T* g, T* gx, int64_t outer, int64_t C, int64_t inner, bool log_) {
  for_each_column_block(outer, C, inner, [=](int64_t o, int64_t i0, int64_t w) {
    const int64_t base = o * C * inner + i0;
    double s[kColumnBlock] = {};
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        const int64_t k = base + c * inner + j;
        s[j] += log_ ? double(g[k]) : double(g[k]) * y[k];
      }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        const int64_t k = base + c * inner + j;
        gx[k] = static_cast<T>(log_ ? g[k] - std::exp(double(y[k])) * s[j] : y[k] * (g[k] - s[j]));
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
  for_each_column_block(N, C, D, [=](int64_t n, int64_t d0, int64_t w) {
    const T* x0 = x + n * C * D + d0;  // x0[c * D + j] = x[n, c, d0 + j]
    double m[kColumnBlock], s[kColumnBlock] = {}, sum_x[kColumnBlock] = {};
    block_max(x0, C, D, w, m);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        s[j] += std::exp(x0[c * D + j] - m[j]);
        sum_x[j] += x0[c * D + j];
      }
    for (int64_t j = 0; j < w; ++j) {
      const int64_t pos = n * D + d0 + j, t = target[pos];
      if (t == ignore_index) {
        loss[pos] = lse[pos] = T(0);
        continue;
      }
      const double l = m[j] + std::log(s[j]);
      const double nll = l - x0[t * D + j], smooth = l - sum_x[j] / static_cast<double>(C);
      loss[pos] = static_cast<T>((1 - eps) * nll + eps * smooth);
      lse[pos] = static_cast<T>(l);
    }
  });
}

// gx (N, C, D) = w * (p_c - (1 - eps) [c == t] - eps / C) with p = exp(x - lse), w = g[pos] * scale
// (g has one element per position, or one in all when g_is_scalar); zero at ignored positions.
template <class T>
void cross_entropy_backward(const T* x, const int64_t* target, const T* lse, const T* g, bool g_is_scalar,
                            double scale, T* gx, int64_t N, int64_t C, int64_t D, int64_t ignore_index, double eps) {
  for_each_column_block(N, C, D, [=](int64_t n, int64_t d0, int64_t w) {
    const int64_t base = n * C * D + d0, pos0 = n * D + d0;
    double weight[kColumnBlock];
    for (int64_t j = 0; j < w; ++j) weight[j] = double(g_is_scalar ? g[0] : g[pos0 + j]) * scale;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < w; ++j) {
        const int64_t k = base + c * D + j, t = target[pos0 + j];
        // Ignored positions are written as 0 outright: a zero weight would not do, as their lse is a
        // placeholder (p may overflow) and scale is inf when every target is ignored.
        if (t == ignore_index) {
          gx[k] = T(0);
          continue;
        }
        const double p = std::exp(double(x[k]) - lse[pos0 + j]);
        gx[k] = static_cast<T>(weight[j] * (p - (c == t ? 1 - eps : 0.0) - eps / static_cast<double>(C)));
      }
  });
}

}  // namespace relgrad::cpu
