// CPU kernels of layer_norm and rms_norm. The input is seen as R rows of N elements, x (R, N)
// contiguous, where N is the product of the normalised (trailing) dims; each row is normalised on
// its own. One kernel pair serves both ops: `mean == nullptr` selects rms_norm (no centring, no bias).
//
//   layer_norm: y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps)     (var: population)
//   rms_norm:   y =  x         * rstd * w,      rstd = 1 / sqrt(mean(x^2) + eps)
//
// Sums accumulate in double whatever T is, so float32 statistics stay accurate.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel_for.h"
#include "core/strided.h"

namespace relgrad::cpu {

// Rows whose statistics are summed side by side: each row's sums are one chain of double adds in
// element order (so the bits are a single row's), and G chains at once hide the add's latency, which
// bounds one chain to an element every 4 cycles (bench: layer_norm of 2,048 × 256 at 1 thread,
// about 8 cycles an element in all before).
inline constexpr int kNormRowGroup = 8;

// Rows xr + j·N, j < G: *mean (layer_norm only, else mean is null) and rstd for each.
template <int G, class T>
void norm_stats(const T* xr, int64_t N, double eps, T* mean, T* rstd, double* mu, double* rs) {
  double m[G] = {}, ss[G] = {};
  if (mean) {
    for (int64_t i = 0; i < N; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < G; ++j) m[j] += xr[j * N + i];
    for (int j = 0; j < G; ++j) m[j] /= static_cast<double>(N);
  }
  // Second pass over the (cached) rows: the textbook E[x^2] - E[x]^2 loses digits to cancellation.
  for (int64_t i = 0; i < N; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) ss[j] += (xr[j * N + i] - m[j]) * (xr[j * N + i] - m[j]);
  for (int j = 0; j < G; ++j) {
    mu[j] = m[j];
    rs[j] = 1.0 / std::sqrt(ss[j] / static_cast<double>(N) + eps);
    if (mean) mean[j] = static_cast<T>(m[j]);
    rstd[j] = static_cast<T>(rs[j]);
  }
}

// Rows [r0, r0 + rows) of x into y: their statistics G rows at a time, then each row normalised.
// Shared by norm_forward and the fused residual norm (core/cpu/fused.h), so both give the same bits.
template <class T>
void norm_forward_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t r0, int64_t rows,
                       int64_t N, double eps) {
  for (int64_t r = r0; r < r0 + rows;) {
    const int g = r + kNormRowGroup <= r0 + rows ? kNormRowGroup : 1;
    double mu[kNormRowGroup], rs[kNormRowGroup];
    T* mean_r = mean ? mean + r : nullptr;
    if (g == kNormRowGroup) norm_stats<kNormRowGroup>(x + r * N, N, eps, mean_r, rstd + r, mu, rs);
    else norm_stats<1>(x + r * N, N, eps, mean_r, rstd + r, mu, rs);
    for (int j = 0; j < g; ++j, ++r) {
      const T* xr = x + r * N;
      T* yr = y + r * N;
      for (int64_t i = 0; i < N; ++i) {
        double h = (xr[i] - mu[j]) * rs[j];
        if (w) h *= w[i];
        if (b) h += b[i];
        yr[i] = static_cast<T>(h);
      }
    }
  }
}

// x, y (R, N); w, b (N) or null; writes mean (R) (layer_norm only, else null) and rstd (R), which
// are exactly what the backward needs besides x and w.
template <class T>
void norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t R, int64_t N, double eps) {
  const int64_t groups = (R + kNormRowGroup - 1) / kNormRowGroup;
  parallel_for(groups, R * N >= kParallelGrain && groups > 1, [&](int64_t q) {
    const int64_t r0 = q * kNormRowGroup;
    norm_forward_rows(x, w, b, y, mean, rstd, r0, std::min<int64_t>(kNormRowGroup, R - r0), N, eps);
  });
}

// Rows per chunk of the dw/db reduction. It depends on R only, never on the thread count, so the
// partial sums and the order they are added in (hence the result, bit for bit) are always the same.
inline int64_t norm_chunk_rows(int64_t R) { return std::max<int64_t>(16, (R + 255) / 256); }

// The backward's row sums for rows r0 .. r0 + G - 1: sum_g = Σ g, sum_gx = Σ g · xhat (g = dy · w), each
// one chain of double adds in element order.
template <int G, class T>
void norm_backward_sums(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, int64_t r0, int64_t N,
                        double* sum_g, double* sum_gx) {
  double mu[G], rs[G], sg[G] = {}, sgx[G] = {};
  for (int j = 0; j < G; ++j) mu[j] = mean ? static_cast<double>(mean[r0 + j]) : 0.0, rs[j] = rstd[r0 + j];
  const T* xr = x + r0 * N;
  const T* dyr = dy + r0 * N;
  for (int64_t i = 0; i < N; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) {
      const double xh = (xr[j * N + i] - mu[j]) * rs[j];
      const double g = w ? dyr[j * N + i] * static_cast<double>(w[i]) : dyr[j * N + i];
      sg[j] += g;
      sgx[j] += g * xh;
    }
  for (int j = 0; j < G; ++j) sum_g[j] = sg[j], sum_gx[j] = sgx[j];
}

// Given dy (R, N), x (R, N), the saved mean (R) (null for rms_norm) and rstd (R), and w (N) or null:
//   dx (R, N) = rstd * (g - mean_row(g) - xhat * mean_row(g * xhat)),  g = dy * w, xhat = (x - mean) * rstd
//              (rms_norm: without the mean_row(g) term)
//   dw (N) = sum_rows dy * xhat,   db (N) = sum_rows dy
// Any of dx, dw, db may be null (not wanted). Rows are split into fixed chunks; each chunk writes its
// rows of dx and its own partial dw/db, then the partials are added in chunk order.
template <class T>
void norm_backward(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx, T* dw, T* db, int64_t R,
                   int64_t N) {
  const int64_t chunk = norm_chunk_rows(R), chunks = (R + chunk - 1) / chunk;
  std::vector<double> part_w(dw ? chunks * N : 0, 0.0), part_b(db ? chunks * N : 0, 0.0);
  parallel_for(chunks, R * N >= kParallelGrain && chunks > 1, [&](int64_t c) {
    double* pw = dw ? part_w.data() + c * N : nullptr;
    double* pb = db ? part_b.data() + c * N : nullptr;
    const int64_t end = std::min(R, (c + 1) * chunk);
    for (int64_t r0 = c * chunk; r0 < end;) {
      // the row sums G rows side by side (each one chain in element order), then row by row the
      // partials of dw and db (in row order) and dx
      const int g = r0 + kNormRowGroup <= end ? kNormRowGroup : 1;
      double sum_g[kNormRowGroup], sum_gx[kNormRowGroup];
      if (g == kNormRowGroup) norm_backward_sums<kNormRowGroup>(dy, x, mean, rstd, w, r0, N, sum_g, sum_gx);
      else norm_backward_sums<1>(dy, x, mean, rstd, w, r0, N, sum_g, sum_gx);
      for (int j = 0; j < g; ++j) {
        const int64_t r = r0 + j;
        const T* xr = x + r * N;
        const T* dyr = dy + r * N;
        const double mu = mean ? static_cast<double>(mean[r]) : 0.0, rs = rstd[r];
        if (pw)
          for (int64_t i = 0; i < N; ++i) pw[i] += dyr[i] * ((xr[i] - mu) * rs);
        if (pb)
          for (int64_t i = 0; i < N; ++i) pb[i] += dyr[i];
        if (!dx) continue;
        const double mean_g = mean ? sum_g[j] / static_cast<double>(N) : 0.0;
        const double mean_gx = sum_gx[j] / static_cast<double>(N);
        T* dxr = dx + r * N;
        for (int64_t i = 0; i < N; ++i) {
          const double xh = (xr[i] - mu) * rs, gi = w ? dyr[i] * static_cast<double>(w[i]) : dyr[i];
          dxr[i] = static_cast<T>(rs * (gi - mean_g - xh * mean_gx));
        }
      }
      r0 += g;
    }
  });
  // (chunks, N) partials → (N), always in chunk order.
  auto reduce = [&](const std::vector<double>& part, T* out) {
    std::vector<double> acc(N, 0.0);
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t i = 0; i < N; ++i) acc[i] += part[c * N + i];
    for (int64_t i = 0; i < N; ++i) out[i] = static_cast<T>(acc[i]);
  };
  if (dw) reduce(part_w, dw);
  if (db) reduce(part_b, db);
}

}  // namespace relgrad::cpu
