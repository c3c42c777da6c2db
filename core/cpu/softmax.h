// Softmax-family CPU kernels on a contiguous (outer, C, inner) block: C is the softmax (class) dim
// and each of the outer * inner columns x[o, :, i] is normalised on its own (inner = 1 when the
// class dim is the last one). Columns go in blocks of w neighbours (see for_each_column_block in
// core/cpu/reduce.h); sums are taken in double, in a fixed order, by one thread per column.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/base/fast_math.h"
#include "core/base/softmax_layout.h"
#include "core/cpu/reduce.h"
#include "core/parallel_for.h"

namespace relgrad::cpu {

// ---- rows (inner = 1: the class dim is the last one, the case of attention) ----------------------
// One row per task; sums and the max go through fixed lanes, combined in a fixed order, so the result
// does not depend on the row's address or on the thread count, and the loops vectorise (float32
// exp is fn::fast_expf, core/base/fast_math.h).
inline constexpr int64_t kLanes = 8;

// Σ_{c < n} a[c] (· b[c] when b is given) in double: kLanes partial sums, then a fixed tree.
template <class T>
RG_FORCE_INLINE double lane_sum(const T* a, const T* b, int64_t n) {
  double acc[kLanes] = {};
  int64_t c = 0;
  if (b) {
    for (; c + kLanes <= n; c += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(a[c + l] * b[c + l]);
  } else {
    for (; c + kLanes <= n; c += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(a[c + l]);
  }
  double tail = 0;
  for (; c < n; ++c) tail += static_cast<double>(b ? a[c] * b[c] : a[c]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// max_{c < n} v[c], ignoring NaN (a plain compare, which vectorises): a NaN still reaches the
// softmax's output through exp(NaN − m) in the sum, as in PyTorch. −inf for n = 0.
template <class T>
RG_FORCE_INLINE T lane_max(const T* v, int64_t n) {
  T acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = -INFINITY;
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = v[c + l] > acc[l] ? v[c + l] : acc[l];
  T m = -INFINITY;
  for (; c < n; ++c) m = v[c] > m ? v[c] : m;
  for (int64_t l = 0; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  return m;
}

// Calls f(r) for r in [0, rows), in parallel when the work pays. f must not throw.
template <class F>
void for_each_row(int64_t rows, int64_t C, F f) {
  parallel_for(rows, rows * C > kParallelGrain && rows > 1, f);
}

// One row of C values: y = softmax(x) or log_softmax(x) (log_).
template <class T>
void softmax_row(const T* x, T* y, int64_t C, bool log_) {
  const T m = lane_max(x, C);
  if (log_) {
    for (int64_t c = 0; c < C; ++c) y[c] = fn::rg_exp(T(x[c] - m));  // y as scratch
    const double s = lane_sum<T>(y, nullptr, C);
    const T l = static_cast<T>(m + std::log(s));
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] - l;
    return;
  }
  // exp, then the sum, as two loops: each vectorises, a loop doing both does not.
  for (int64_t c = 0; c < C; ++c) y[c] = fn::rg_exp(T(x[c] - m));
  const double s = lane_sum<T>(y, nullptr, C);
  const T inv = static_cast<T>(1.0 / s);
  for (int64_t c = 0; c < C; ++c) y[c] *= inv;
}

// One row: gx = y * (g - Σ g y) (softmax) or g - exp(y) Σ g (log_softmax), y the forward output.
template <class T>
void softmax_backward_row(const T* y, const T* g, T* gx, int64_t C, bool log_) {
  if (log_) {
    const T s = static_cast<T>(lane_sum<T>(g, nullptr, C));
    for (int64_t c = 0; c < C; ++c) gx[c] = g[c] - fn::rg_exp(y[c]) * s;
    return;
  }
  const T s = static_cast<T>(lane_sum(g, y, C));
  for (int64_t c = 0; c < C; ++c) gx[c] = y[c] * (g[c] - s);
}

// ---- any layout (outer, C, inner) ----------------------------------------------------------------
// x, y (outer, C, inner): y = softmax(x) or, with log_, log_softmax(x) = x - m - log sum exp(x - m),
// where m is the column max: subtracting it keeps exp from overflowing at large logits.
template <class T>
void softmax_forward(const T* x, T* y, const SoftmaxLayout& L) {
  const int64_t outer = L.outer, C = L.C, inner = L.inner;
  const bool log_ = L.log;
  if (inner == 1) {
    for_each_row(outer, C, [=](int64_t r) { softmax_row(x + r * C, y + r * C, C, log_); });
    return;
  }
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
void softmax_backward(const T* y, const T* g, T* gx, const SoftmaxLayout& L) {
  const int64_t outer = L.outer, C = L.C, inner = L.inner;
  const bool log_ = L.log;
  if (inner == 1) {
    for_each_row(outer, C, [=](int64_t r) { softmax_backward_row(y + r * C, g + r * C, gx + r * C, C, log_); });
    return;
  }
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

// ---- attention's softmax: scale, additive bias and mask fused into one pass each way ------------
// Rows of C values, row r of x at x + r * C (contiguous). bias and mask are optional (null) and
// broadcast: row r's values are bias[bias_row[r] + c * bias_step] and mask[mask_row[r] + c * mask_step].
//   y = softmax(scale * x + bias) over the unmasked c; masked c get 0; a fully masked row is all 0.
// Equal to the composite masked_fill(softmax(masked_fill(scale * x + bias, mask, lowest)), mask, 0).
//
// Rows go in blocks (kSoftmaxBlock elements at most, whole rows): per row, z = scale * x + bias with
// the mask's -inf, its max subtracted; then exp over the whole block as one flat loop; then per row the
// sum and the scaling. An attention row is short (the main job's: 4-17 keys), and a loop over one row
// is mostly its scalar remainder, which for exp costs some 25 scalar operations an element: the flat
// loop takes every element in vector lanes (docs/benchmarks.md, "The roofline of the main job's step").
// Each element's operations are the same wherever it lands (core/base/fast_math.h), so the bits do
// not depend on the blocking or the thread count.
inline constexpr int64_t kSoftmaxBlock = 4096;

template <class T>
void masked_softmax_forward(const T* x, double scale, const T* bias, const int64_t* bias_row, int64_t bias_step,
                            const bool* mask, const int64_t* mask_row, int64_t mask_step, T* y, int64_t rows,
                            int64_t C) {
  if (rows == 0 || C == 0) return;
  const int64_t per_block = std::max<int64_t>(1, kSoftmaxBlock / C), blocks = (rows + per_block - 1) / per_block;
  const T sc = static_cast<T>(scale);
  // Row r's z, its max subtracted: kLive. A row with every entry masked (its max is -inf) gives 0s, or
  // NaNs where some z is NaN (as the composite): kZeros or kNaNs, written after the block's exps.
  enum RowKind : uint8_t { kLive, kZeros, kNaNs };
  const bool block_masks = mask && mask_step == 1 && C <= kSoftmaxBlock;  // (a row longer than a block: its own)
  // Row r after the block's flat z = scale * x (+ bias, where its rows are runs of unit stride, below):
  // a bias of another stride added, and the mask's -inf (exp gives exactly 0) put in.
  auto masked = [=](int64_t r, int64_t block_first, uint8_t* block_mask) {
    T* yr = y + r * C;
    const T* br = bias ? bias + bias_row[r] : nullptr;
    const bool* mr = mask ? mask + mask_row[r] : nullptr;
    if (br && bias_step != 1)
      for (int64_t c = 0; c < C; ++c) yr[c] += br[c * bias_step];
    // The mask read as bytes: a select on a bool load does not vectorise, one on a byte does. A row's
    // mask of unit stride is applied by the block (below), as one flat loop: over one short row the
    // vector loop never starts (it takes 32 bytes at a time) and the scalar one branches on each byte.
    const uint8_t* m8 = reinterpret_cast<const uint8_t*>(mr);
    if (block_masks)
      std::memcpy(block_mask + (r - block_first) * C, m8, static_cast<size_t>(C));
    else if (m8 && mask_step == 1)
      for (int64_t c = 0; c < C; ++c) yr[c] = m8[c] != 0 ? T(-INFINITY) : yr[c];
    else if (m8)
      for (int64_t c = 0; c < C; ++c) yr[c] = m8[c * mask_step] != 0 ? T(-INFINITY) : yr[c];
  };
  // Row r given its max m: its kind, and z − m in place for a live row.
  auto finish = [=](int64_t r, T m) {
    T* yr = y + r * C;
    if (m == T(-INFINITY)) {
      bool nan = false;
      for (int64_t c = 0; c < C; ++c) nan = nan || yr[c] != yr[c];
      return nan ? kNaNs : kZeros;
    }
    for (int64_t c = 0; c < C; ++c) yr[c] = T(yr[c] - m);
    return kLive;
  };
  parallel_for(blocks, rows * C > kParallelGrain && blocks > 1, [&](int64_t q) {
    const int64_t r0 = q * per_block, r1 = std::min(rows, r0 + per_block), n = (r1 - r0) * C;
    RowKind kind[kSoftmaxBlock];
    uint8_t block_mask[kSoftmaxBlock];  // the rows' masks of unit stride, as y's block lays them out
    T* yb = y + r0 * C;
    // The block's rows are one run of x and of y: z = scale * x as one flat loop, and a bias of unit
    // stride added one run of rows at a time, where the rows' bias rows follow each other (T5's bias,
    // (1, H, L, L): a run is a batch entry's H·L rows), instead of row by row (a short row's loop is
    // mostly its scalar remainder).
    const T* xb = x + r0 * C;
    for (int64_t i = 0; i < n; ++i) yb[i] = sc * xb[i];
    if (bias && bias_step == 1) {
      for (int64_t r = r0; r < r1;) {
        int64_t e = r + 1;
        while (e < r1 && bias_row[e] == bias_row[e - 1] + C) ++e;
        const T* br = bias + bias_row[r];
        T* yr = y + r * C;
        for (int64_t i = 0; i < (e - r) * C; ++i) yr[i] += br[i];
        r = e;
      }
    }
    for (int64_t r = r0; r < r1; ++r) masked(r, r0, block_mask);
    if (block_masks)
      for (int64_t i = 0; i < n; ++i) yb[i] = block_mask[i] != 0 ? T(-INFINITY) : yb[i];
    // The rows' maxima, then their sums' inverses, each in a loop of its own: the rows' chains (a
    // max, a sum in double, a division) are independent and overlap there, where one row's whole
    // chain at a time waited on itself (the main job's 896 rows of 14: 0.90x the time, timed interleaved with that).
    T m[kSoftmaxBlock];
    for (int64_t r = r0; r < r1; ++r) m[r - r0] = lane_max(y + r * C, C);
    for (int64_t r = r0; r < r1; ++r) kind[r - r0] = finish(r, m[r - r0]);
    for (int64_t i = 0; i < n; ++i) yb[i] = fn::rg_exp(yb[i]);  // the block's exps in one loop
    T inv[kSoftmaxBlock];
    for (int64_t r = r0; r < r1; ++r) inv[r - r0] = static_cast<T>(1.0 / lane_sum<T>(y + r * C, nullptr, C));
    for (int64_t r = r0; r < r1; ++r) {
      T* yr = y + r * C;
      if (kind[r - r0] != kLive) {
        const T fill = kind[r - r0] == kNaNs ? T(NAN) : T(0);
        for (int64_t c = 0; c < C; ++c) yr[c] = fill;
        continue;
      }
      const T v = inv[r - r0];
      for (int64_t c = 0; c < C; ++c) yr[c] *= v;
    }
  });
}

// Backward of masked_softmax_forward for rows of C: gz = y * (g - Σ g y) (0 where y is 0: masked
// entries and fully masked rows), the gradient of z = scale * x + bias. Writes gz (the bias
// gradient before any broadcast reduction) and gx = scale * gz; either may be null.
template <class T>
void masked_softmax_backward(const T* y, const T* g, double scale, T* gx, T* gz, int64_t rows, int64_t C) {
  for_each_row(rows, C, [=](int64_t r) {
    const T* yr = y + r * C;
    const T* gr = g + r * C;
    const T s = static_cast<T>(lane_sum(gr, yr, C));
    const T sc = static_cast<T>(scale);
    if (gz) {
      T* gzr = gz + r * C;
      for (int64_t c = 0; c < C; ++c) gzr[c] = yr[c] * (gr[c] - s);
    }
    if (gx) {
      T* gxr = gx + r * C;
      for (int64_t c = 0; c < C; ++c) gxr[c] = sc * (yr[c] * (gr[c] - s));
    }
  });
}

// Cross-entropy fused with log_softmax. logits x (N, C, D), target (N, D) → loss (N, D) and
// lse (N, D) = log sum_c exp(x), which is all the backward needs besides x and target:
//   log p_c = x_c - lse;  loss = (1 - eps) (-log p_t) + eps mean_c(-log p_c)   (eps = label smoothing)
// Positions whose target is ignore_index get loss 0. Targets must already be checked to lie in [0, C).
template <class T>
void cross_entropy_forward(const T* x, const int64_t* target, T* loss, T* lse, const CrossEntropyLayout& L) {
  const int64_t N = L.N, C = L.C, D = L.D, ignore_index = L.ignore_index;
  const double eps = L.label_smoothing;
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
                            double scale, T* gx, const CrossEntropyLayout& L) {
  const int64_t N = L.N, C = L.C, D = L.D, ignore_index = L.ignore_index;
  const double eps = L.label_smoothing;
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
