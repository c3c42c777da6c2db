// CPU kernels of the fused elementwise chains of a transformer block (autograd/ops/fused.cpp):
//   bias_activation:  y = f(x + b) over rows x (R, N), b (N), and its backward (dx and db in one pass);
//   residual norm:    sum = residual + branch, y = norm(sum), one pass over each row.
// Each does the IEEE operations of its composite twin in the same order, so the results are the same
// bits: x + b rounded to T before f (the functors of core/base/functors.h, as the unary kernels),
// db summed in double over the rows in row order (as cpu::sum_kernel does for the composite's
// sum_to), the norm rows by norm_forward_rows (core/cpu/norm.h). f's backward rule grad(x, y, gy) must
// use x only (true of relu, gelu and gelu_tanh): y is not kept. gelu alone keeps its erf from the
// forward, which the backward reads in y's place (GeluFromErf).
#pragma once
#include <algorithm>
#include <vector>

#include "core/base/fast_math.h"
#include "core/base/functors.h"
#include "core/cpu/norm.h"
#include "core/parallel_for.h"
#include "core/strided.h"

namespace relgrad::cpu {

// x, y (R, N); b (N).
template <class T, class F>
void bias_activation_forward(const T* x, const T* b, T* y, int64_t R, int64_t N, F f) {
  parallel_for(R, R * N >= kParallelGrain && R > 1, [&](int64_t r) {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    for (int64_t i = 0; i < N; ++i) yr[i] = f(static_cast<T>(xr[i] + b[i]));  // a loop the compiler vectorises
  });
}

// gelu's forward that also keeps e = erf(z / √2), z = x + b, for its backward (bias_activation saves
// it: autograd/ops/fused.cpp): y is fn::Gelu's, the same bits. e, like y, (R, N). Kept only up to
// kKeepErfBytes, a memory-for-time trade made where the memory is small: the main job's layers keep
// 0.2 MiB each, where W1's would keep 16 MiB each, 11 % more peak memory for its whole run (637
// against 572 MiB; its backward's gelu then 0.73-0.87x).
inline constexpr int64_t kKeepErfBytes = int64_t(1) << 20;
template <class T>
void bias_gelu_forward_keeping_erf(const T* x, const T* b, T* y, T* e, int64_t R, int64_t N) {
  parallel_for(R, R * N >= kParallelGrain && R > 1, [&](int64_t r) {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    T* er = e + r * N;
    for (int64_t i = 0; i < N; ++i) {
      const T z = static_cast<T>(xr[i] + b[i]);
      er[i] = fn::Gelu::erf_of(z);
      yr[i] = fn::Gelu::from_erf(z, er[i]);
    }
  });
}

// fn::Gelu's backward rule with erf(x / √2) given in y's place (the forward's kept e), without the
// erf, which was a third of the backward's arithmetic (224 × 256, 1 thread: 0.67x the time). For
// bias_activation_backward's `kept`.
struct GeluFromErf {
  template <class T>
  RG_FORCE_INLINE T grad(T x, T erf, T gy) const { return fn::Gelu::grad_from_erf(x, erf, gy); }
};

// Columns per task of the backward: a block of columns is walked row by row, so each column's
// db sum runs over r in order (the composite's order) while blocks run on different threads. Fixed
// by the shape, never the thread count. Wide, so that a feed-forward row (d_ff up to 1024) is one
// contiguous run: narrower blocks step down the rows at a power-of-two stride, which thrashed the
// cache (256 columns of a (4096, 1024) float32 gradient took 1.5x the composite's time, 1024 none).
inline constexpr int64_t kBiasGradColumns = 1024;

// gy, x, dx (R, N); b (N); db (N) or null (not wanted); kept (R, N) or null: what f.grad takes in y's
// place (GeluFromErf: the forward's erf), else x + b again.
//   dx = f.grad(x + b, kept or x + b, gy),  db = Σ_r dx[r, :]  (in double, r = 0 .. R-1)
// Several column blocks: one pass, blocks shared out between the threads. One block (N up to 1024,
// every feed-forward at the default sizes) on several threads: that pass would run on one thread, so
// dx is computed with the rows shared out first, and db then sums dx's columns, each thread a
// contiguous part of them. Either way each element and each column's row-order sum are the same
// operations, so the bits do not depend on the path or the thread count.
template <class T, class F>
void bias_activation_backward(const T* gy, const T* x, const T* b, T* dx, T* db, int64_t R, int64_t N, F f,
                              const T* kept = nullptr) {
  auto dx_rows = [&](int64_t r, int64_t i0, int64_t w) {
    const T* gr = gy + r * N + i0;
    const T* xr = x + r * N + i0;
    const T* bc = b + i0;
    T* dr = dx + r * N + i0;
    if (kept) {
      const T* kr = kept + r * N + i0;
      for (int64_t j = 0; j < w; ++j) dr[j] = f.grad(static_cast<T>(xr[j] + bc[j]), kr[j], gr[j]);
      return;
    }
    for (int64_t j = 0; j < w; ++j) {
      const T z = static_cast<T>(xr[j] + bc[j]);
      dr[j] = f.grad(z, z, gr[j]);  // the y argument is unused by these activations
    }
  };
  // db[i0 .. i0 + w) = Σ_r dx[r, i0 .. i0 + w), rows in order.
  auto db_columns = [&](int64_t i0, int64_t w) {
    std::vector<double> acc(w, 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const T* dr = dx + r * N + i0;
      for (int64_t j = 0; j < w; ++j) acc[j] += dr[j];
    }
    for (int64_t j = 0; j < w; ++j) db[i0 + j] = static_cast<T>(acc[j]);
  };
  const int64_t blocks = (N + kBiasGradColumns - 1) / kBiasGradColumns;
  const bool parallel = R * N >= kParallelGrain;
#ifdef _OPENMP
  if (team_would_share(blocks == 1 && parallel && R > 1)) {
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < R; ++r) dx_rows(r, 0, N);
      // (the loop's barrier: every row of dx is written)
      if (db) {
        const int64_t parts = omp_get_num_threads(), part = omp_get_thread_num();
        const int64_t per = ((N + parts - 1) / parts + 15) / 16 * 16;  // whole cache lines of floats
        const int64_t i0 = std::min(N, part * per), i1 = std::min(N, i0 + per);
        if (i0 < i1) db_columns(i0, i1 - i0);
      }
    }
    return;
  }
#endif
  parallel_for(blocks, parallel && blocks > 1, [&](int64_t c) {
    const int64_t i0 = c * kBiasGradColumns, w = std::min(kBiasGradColumns, N - i0);
    std::vector<double> acc(w, 0.0);
    for (int64_t r = 0; r < R; ++r) {
      dx_rows(r, i0, w);
      const T* dr = dx + r * N + i0;
      for (int64_t j = 0; j < w; ++j) acc[j] += dr[j];
    }
    if (db)
      for (int64_t j = 0; j < w; ++j) db[i0 + j] = static_cast<T>(acc[j]);
  });
}

// residual, branch, sum, y (R, N); w, b (N) or null; mean (R) (null for rms_norm) and rstd (R) as
// norm_forward writes them for `sum`.
template <class T>
void residual_norm_forward(const T* residual, const T* branch, const T* w, const T* b, T* sum, T* y, T* mean, T* rstd,
                           int64_t R, int64_t N, double eps) {
  const int64_t groups = (R + kNormRowGroup - 1) / kNormRowGroup;
  parallel_for(groups, R * N >= kParallelGrain && groups > 1, [&](int64_t q) {
    const int64_t r0 = q * kNormRowGroup, rows = std::min<int64_t>(kNormRowGroup, R - r0);
    for (int64_t i = r0 * N; i < (r0 + rows) * N; ++i) sum[i] = residual[i] + branch[i];
    norm_forward_rows(sum, w, b, y, mean, rstd, r0, rows, N, eps);
  });
}

}  // namespace relgrad::cpu
