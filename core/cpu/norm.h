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

#include "core/strided.h"

namespace relgrad::cpu {

// One row: xr, yr (N); w, b (N) or null; writes *mean (layer_norm only, else mean is null) and *rstd.
// Shared by norm_forward and the fused residual norm (core/cpu/fused.h), so both give the same bits.
template <class T>
void norm_forward_row(const T* xr, const T* w, const T* b, T* yr, T* mean, T* rstd, int64_t N, double eps) {
  double mu = 0;
  if (mean) {
    for (int64_t i = 0; i < N; ++i) mu += xr[i];
    mu /= static_cast<double>(N);
  }
  // Second pass over the (cached) row: the textbook E[x^2] - E[x]^2 loses digits to cancellation.
  double ss = 0;
  for (int64_t i = 0; i < N; ++i) ss += (xr[i] - mu) * (xr[i] - mu);
  const double rs = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
  if (mean) *mean = static_cast<T>(mu);
  *rstd = static_cast<T>(rs);
  for (int64_t i = 0; i < N; ++i) {
    double h = (xr[i] - mu) * rs;
    if (w) h *= w[i];
    if (b) h += b[i];
    yr[i] = static_cast<T>(h);
  }
}

// x, y (R, N); w, b (N) or null; writes mean (R) (layer_norm only, else null) and rstd (R), which
// are exactly what the backward needs besides x and w.
template <class T>
void norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t R, int64_t N, double eps) {
#pragma omp parallel for schedule(static) if (R * N >= kParallelGrain && R > 1)
  for (int64_t r = 0; r < R; ++r)
    norm_forward_row(x + r * N, w, b, y + r * N, mean ? mean + r : nullptr, rstd + r, N, eps);
}

// Rows per chunk of the dw/db reduction. It depends on R only, never on the thread count, so the
// partial sums and the order they are added in (hence the result, bit for bit) are always the same.
inline int64_t norm_chunk_rows(int64_t R) { return std::max<int64_t>(16, (R + 255) / 256); }

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
#pragma omp parallel for schedule(static) if (R * N >= kParallelGrain && chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    double* pw = dw ? part_w.data() + c * N : nullptr;
    double* pb = db ? part_b.data() + c * N : nullptr;
    for (int64_t r = c * chunk; r < std::min(R, (c + 1) * chunk); ++r) {
      const T* xr = x + r * N;
      const T* dyr = dy + r * N;
      const double mu = mean ? static_cast<double>(mean[r]) : 0.0, rs = rstd[r];
      double sum_g = 0, sum_gx = 0;
      for (int64_t i = 0; i < N; ++i) {
        const double xh = (xr[i] - mu) * rs, g = w ? dyr[i] * static_cast<double>(w[i]) : dyr[i];
        sum_g += g;
        sum_gx += g * xh;
        if (pw) pw[i] += dyr[i] * xh;
        if (pb) pb[i] += dyr[i];
      }
      if (!dx) continue;
      const double mean_g = mean ? sum_g / static_cast<double>(N) : 0.0, mean_gx = sum_gx / static_cast<double>(N);
      T* dxr = dx + r * N;
      for (int64_t i = 0; i < N; ++i) {
        const double xh = (xr[i] - mu) * rs, g = w ? dyr[i] * static_cast<double>(w[i]) : dyr[i];
        dxr[i] = static_cast<T>(rs * (g - mean_g - xh * mean_gx));
      }
    }
  }
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
