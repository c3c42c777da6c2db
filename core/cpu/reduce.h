// Reductions over any set of dims, reduced to one shape: a contiguous (outer, R, inner) block, where
// R is the product of the reduced dims. When the reduced dims are already adjacent in a contiguous
// tensor this is a free view; otherwise the reduced dims are permuted to the middle and copied once.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel_for.h"
#include "core/strided.h"
#include "core/tensor.h"

namespace relgrad::cpu {

struct ReducePlan {
  Tensor x;            // contiguous; element (o, r, i) at x[(o * R + r) * inner + i]
  int64_t outer = 1, R = 1, inner = 1;
  Shape dims;          // normalised, sorted reduced dims
  Shape keepdim_shape; // input shape with reduced dims set to 1
  Shape out_shape;     // without the reduced dims
};

// dims empty = all dims. Throws on a bad or repeated dim (naming `op`).
inline ReducePlan plan_reduce(const Tensor& x, const Shape& dims_in, const char* op) {
  ReducePlan p;
  const int64_t nd = x.dim();
  std::vector<bool> reduced(nd > 0 ? nd : 0, dims_in.empty());
  for (int64_t d : dims_in) {
    int64_t n = normalize_dim(d, nd, op);
    if (nd == 0) continue;  // reducing a scalar over dim 0/-1 is the identity
    RG_CHECK_T(IndexError, !reduced[n], op, "dim ", n, " appears more than once in ", shape_str(dims_in));
    reduced[n] = true;
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      p.dims.push_back(d);
      p.keepdim_shape.push_back(1);
    } else {
      p.keepdim_shape.push_back(x.shape()[d]);
      p.out_shape.push_back(x.shape()[d]);
    }
  }
  // Are the reduced dims one adjacent block of a contiguous tensor?
  bool adjacent = p.dims.empty() || p.dims.back() - p.dims.front() + 1 == static_cast<int64_t>(p.dims.size());
  if (adjacent && x.is_contiguous()) {
    int64_t first = p.dims.empty() ? nd : p.dims.front(), last = p.dims.empty() ? nd - 1 : p.dims.back();
    for (int64_t d = 0; d < nd; ++d) (d < first ? p.outer : d <= last ? p.R : p.inner) *= x.shape()[d];
    p.x = x;
    return p;
  }
  // Permute to (kept..., reduced...) and copy: outer = kept, inner = 1.
  Shape perm_shape, perm_strides;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < nd; ++d)
      if (reduced[d] == (pass == 1)) {
        perm_shape.push_back(x.shape()[d]);
        perm_strides.push_back(x.strides()[d]);
        (pass == 0 ? p.outer : p.R) *= x.shape()[d];
      }
  Tensor permuted = make_view(x, perm_shape, perm_strides, x.offset());
  p.x = empty(perm_shape, TensorOptions(x.dtype()).device(x.device()));  // the CUDA ops plan with it too
  copy_into(p.x, permuted, op);
  return p;
}

// out[o, i] = sum_r x[o, r, i], accumulated in double (float32 sums keep more precision), in a
// fixed order whatever the thread count, so results are reproducible.
template <class T>
void sum_kernel(const T* x, T* out, int64_t outer, int64_t R, int64_t inner, double scale) {
  // No output: nothing to do, and the loop below steps by inner (OpenMP's trip count would divide by 0).
  if (outer * inner == 0) return;
  if (inner == 1) {
    parallel_for(outer, outer * R > 32768 && outer > 1, [&](int64_t o) {
      const T* row = x + o * R;
      double acc = 0;
      for (int64_t r = 0; r < R; ++r) acc += row[r];
      out[o] = static_cast<T>(acc * scale);
    });
    return;
  }
  // Each output row's columns in contiguous parts, one per thread where the rows alone cannot keep the
  // threads busy (a Linear layer's bias gradient: outer = 1), else whole rows. Each column is one chain
  // over r in order however the row is cut, so the cut may follow the thread count. Parts are at least
  // 256 columns: narrower ones step down the rows at the row's stride (1.4x slower at 256 of 1,024
  // columns), and a narrow row costs less than waking a thread (64 columns: 5 µs alone, 50 shared).
  const bool parallel = outer * R * inner > 32768;
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  const int64_t parts = outer >= threads ? 1 : std::clamp<int64_t>(inner / 256, 1, threads);
  const int64_t width = ((inner + parts - 1) / parts + 15) / 16 * 16, per_row = (inner + width - 1) / width;
  parallel_for(outer * per_row, parallel && outer * per_row > 1, [&](int64_t t) {
    const int64_t o = t / per_row, i0 = (t % per_row) * width, w = std::min(width, inner - i0);
    std::vector<double> acc(w, 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const T* src = x + (o * R + r) * inner + i0;
      for (int64_t i = 0; i < w; ++i) acc[i] += src[i];
    }
    for (int64_t i = 0; i < w; ++i) out[o * inner + i0 + i] = static_cast<T>(acc[i] * scale);
  });
}

// Σ x[i]² over n contiguous float32 values, as one chain of double adds in index order: the bits of
// sum(mul(x.to(kFloat64), x.to(kFloat64))) (the composite clip_grad_norm_ computed), in one pass. A
// float32 square is exact in double, so the compiler fusing square and add into an FMA changes nothing.
inline double sum_of_squares(const float* x, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += double(x[i]) * double(x[i]);
  return acc;
}

// sum_of_squares of several tensors: out[t] = Σ x[t][i]² over n[t] values, each the same chain as
// sum_of_squares (the same bits), four chains side by side. One chain waits an add's latency (3-4
// cycles) per element; four of them hide it. Tensors are taken longest first, so that the long ones
// run together and only short ones are left to run alone at the end.
inline void sums_of_squares(const float* const* x, const int64_t* n, double* out, int64_t count) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t t = 0; t < count; ++t) order[static_cast<size_t>(t)] = t;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return n[a] > n[b]; });
  struct Chain {
    const float* p;
    int64_t left, slot;
    double acc;
  };
  Chain c[4];
  int active = 0;
  size_t next = 0;
  for (;;) {
    while (active < 4 && next < order.size()) {
      const int64_t t = order[next++];
      c[active++] = Chain{x[t], n[t], t, 0.0};
    }
    if (active == 0) return;
    int64_t m = c[0].left;
    for (int k = 1; k < active; ++k) m = std::min(m, c[k].left);
    if (active == 4) {
      double a0 = c[0].acc, a1 = c[1].acc, a2 = c[2].acc, a3 = c[3].acc;
      const float *p0 = c[0].p, *p1 = c[1].p, *p2 = c[2].p, *p3 = c[3].p;
      for (int64_t i = 0; i < m; ++i) {
        a0 += double(p0[i]) * double(p0[i]);
        a1 += double(p1[i]) * double(p1[i]);
        a2 += double(p2[i]) * double(p2[i]);
        a3 += double(p3[i]) * double(p3[i]);
      }
      c[0].acc = a0, c[1].acc = a1, c[2].acc = a2, c[3].acc = a3;
    } else {
      for (int k = 0; k < active; ++k)
        for (int64_t i = 0; i < m; ++i) c[k].acc += double(c[k].p[i]) * double(c[k].p[i]);
    }
    for (int k = 0; k < active;) {
      c[k].p += m, c[k].left -= m;
      if (c[k].left > 0) {
        ++k;
        continue;
      }
      out[c[k].slot] = c[k].acc;
      c[k] = c[--active];
    }
  }
}

// ---- the kernels below reduce "columns": column (o, i) is the R values x[o, :, i] that give
// out[o, i]. Columns are taken in blocks of up to kColumnBlock neighbours (i0 .. i0 + w - 1) and a
// block is walked row by row, so every read is a contiguous run of w values; walking one column at
// a time would stride by `inner` and thrash the cache (worst when inner is a power of two). With
// inner = 1 (reducing the last dims) a block is a single column. Each column is reduced by one
// thread in a fixed order, so results do not depend on the thread count.

inline constexpr int64_t kColumnBlock = 32;

// Calls f(o, i0, w) for every block of columns, in parallel once the work pays for starting
// threads. f must not throw (an exception cannot leave an OpenMP region).
template <class F>
void for_each_column_block(int64_t outer, int64_t R, int64_t inner, F f) {
  const int64_t per_row = (inner + kColumnBlock - 1) / kColumnBlock, blocks = outer * per_row;
  parallel_for(blocks, outer * R * inner > kParallelGrain && blocks > 1, [&](int64_t b) {
    const int64_t o = b / per_row, i0 = (b % per_row) * kColumnBlock;
    f(o, i0, std::min(kColumnBlock, inner - i0));
  });
}

// True when v should replace `best` as the running max (kMax) or min. NaN wins, as in PyTorch,
// and ties keep the earlier value, so the index is the first one of the extremum.
template <bool kMax, class T>
bool beats(T v, T best) {
  if (v != v) return best == best;  // v is NaN (never true for integers)
  return kMax ? v > best : v < best;
}

// x (outer, R, inner) → values (outer, inner) = max (kMax) or min over r, and indices (outer, inner)
// = the first r where it occurs. Either output may be null. R must be > 0.
template <bool kMax, class T>
void extremum_kernel(const T* x, T* values, int64_t* indices, int64_t outer, int64_t R, int64_t inner) {
  for_each_column_block(outer, R, inner, [=](int64_t o, int64_t i0, int64_t w) {
    const T* x0 = x + o * R * inner + i0;  // x0[r * inner + j] = x[o, r, i0 + j]
    T best[kColumnBlock];
    int64_t at[kColumnBlock] = {};
    for (int64_t j = 0; j < w; ++j) best[j] = x0[j];
    for (int64_t r = 1; r < R; ++r)
      for (int64_t j = 0; j < w; ++j)
        if (beats<kMax>(x0[r * inner + j], best[j])) {
          best[j] = x0[r * inner + j];
          at[j] = r;
        }
    for (int64_t j = 0; j < w; ++j) {
      if (values) values[o * inner + i0 + j] = best[j];
      if (indices) indices[o * inner + i0 + j] = at[j];
    }
  });
}

// m[j] = max_r x0[r * inner + j] for j < w; a NaN, once met, sticks, so NaN in gives NaN out.
template <class T>
void block_max(const T* x0, int64_t R, int64_t inner, int64_t w, double* m) {
  std::fill(m, m + w, -INFINITY);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < w; ++j) {
      const double v = x0[r * inner + j];
      if (v > m[j] || v != v) m[j] = v;
    }
}

// x (outer, R, inner) → out (outer, inner) = log sum_r exp(x), shifted by the column max m so that
// no exp overflows: out = m + log sum_r exp(x - m). Accumulated in double.
template <class T>
void logsumexp_kernel(const T* x, T* out, int64_t outer, int64_t R, int64_t inner) {
  for_each_column_block(outer, R, inner, [=](int64_t o, int64_t i0, int64_t w) {
    const T* x0 = x + o * R * inner + i0;
    double m[kColumnBlock], s[kColumnBlock] = {};
    block_max(x0, R, inner, w, m);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < w; ++j) s[j] += std::exp(x0[r * inner + j] - m[j]);
    // m = ±inf (all terms -inf, or some +inf) is the answer itself; there x - m was NaN.
    for (int64_t j = 0; j < w; ++j) out[o * inner + i0 + j] = static_cast<T>(std::isinf(m[j]) ? m[j] : m[j] + std::log(s[j]));
  });
}

// x (outer, R, inner) → var (outer, inner) = sum_r (x - mean)^2 / (R - correction), and mean
// (outer, inner), kept for the backward. Two passes in double (mean first), which stays accurate
// when the mean is large against the spread. R <= correction divides by 0 (inf or NaN), as PyTorch.
template <class T>
void var_kernel(const T* x, T* var, T* mean, int64_t outer, int64_t R, int64_t inner, int64_t correction) {
  const double divisor = static_cast<double>(std::max<int64_t>(R - correction, 0));
  for_each_column_block(outer, R, inner, [=](int64_t o, int64_t i0, int64_t w) {
    const T* x0 = x + o * R * inner + i0;
    double m[kColumnBlock] = {}, ss[kColumnBlock] = {};
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < w; ++j) m[j] += x0[r * inner + j];
    for (int64_t j = 0; j < w; ++j) m[j] /= static_cast<double>(R);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < w; ++j) ss[j] += (x0[r * inner + j] - m[j]) * (x0[r * inner + j] - m[j]);
    for (int64_t j = 0; j < w; ++j) {
      var[o * inner + i0 + j] = static_cast<T>(ss[j] / divisor);
      mean[o * inner + i0 + j] = static_cast<T>(m[j]);
    }
  });
}

// Backward of max/min along one dim: gx (outer, R, inner) is zero except
// gx[o, indices[o, i], i] = g[o, i]; g and indices are (outer, inner).
template <class T>
void scatter_to_index_kernel(const T* g, const int64_t* indices, T* gx, int64_t outer, int64_t R, int64_t inner) {
  std::fill(gx, gx + outer * R * inner, T(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) gx[(o * R + indices[o * inner + i]) * inner + i] = g[o * inner + i];
}

}  // namespace relgrad::cpu
