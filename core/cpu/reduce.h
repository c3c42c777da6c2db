// Reductions over any set of dims, reduced to one shape: a contiguous (outer, R, inner) block, where
// R is the product of the reduced dims. When the reduced dims are already adjacent in a contiguous
// tensor this is a free view; otherwise the reduced dims are permuted to the middle and copied once.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/strided.h"
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
  p.x = empty(perm_shape, TensorOptions(x.dtype()));
  copy_into(p.x, permuted, op);
  return p;
}

// out[o, i] = sum_r x[o, r, i], accumulated in double (float32 sums keep more precision), in a
// fixed order whatever the thread count, so results are reproducible.
template <class T>
void sum_kernel(const T* x, T* out, int64_t outer, int64_t R, int64_t inner, double scale) {
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * R > 32768 && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = x + o * R;
      double acc = 0;
      for (int64_t r = 0; r < R; ++r) acc += row[r];
      out[o] = static_cast<T>(acc * scale);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (outer * R * inner > 32768)
  for (int64_t oi = 0; oi < outer * inner; oi += inner) {  // one output row of `inner` columns
    int64_t o = oi / inner;
    std::vector<double> acc(inner, 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const T* src = x + (o * R + r) * inner;
      for (int64_t i = 0; i < inner; ++i) acc[i] += src[i];
    }
    for (int64_t i = 0; i < inner; ++i) out[o * inner + i] = static_cast<T>(acc[i] * scale);
  }
}

// ---- the kernels below all walk "columns": one column is the R values x[o, :, i] that reduce to
// out[o, i]. Columns are independent, so they are spread over OpenMP threads, and each column is
// always summed in the same order by one thread: results do not depend on the thread count.

// Calls f(o, i) for every column of an (outer, R, inner) block, in parallel once the block is big
// enough to pay for starting threads. f must not throw (exceptions cannot leave an OpenMP region).
template <class F>
void for_each_column(int64_t outer, int64_t R, int64_t inner, F f) {
  const int64_t columns = outer * inner;
#pragma omp parallel for schedule(static) if (columns * R > kParallelGrain && columns > 1)
  for (int64_t c = 0; c < columns; ++c) f(c / inner, c % inner);
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
  for_each_column(outer, R, inner, [=](int64_t o, int64_t i) {
    const T* col = x + o * R * inner + i;
    T best = col[0];
    int64_t best_r = 0;
    for (int64_t r = 1; r < R; ++r)
      if (beats<kMax>(col[r * inner], best)) {
        best = col[r * inner];
        best_r = r;
      }
    if (values) values[o * inner + i] = best;
    if (indices) indices[o * inner + i] = best_r;
  });
}

// x (outer, R, inner) → out (outer, inner) = log sum_r exp(x): shifted by the column max m so no
// exp overflows (out = m + log sum exp(x - m)); accumulated in double.
template <class T>
void logsumexp_kernel(const T* x, T* out, int64_t outer, int64_t R, int64_t inner) {
  for_each_column(outer, R, inner, [=](int64_t o, int64_t i) {
    const T* col = x + o * R * inner + i;
    double m = -INFINITY;
    for (int64_t r = 0; r < R; ++r) m = std::max<double>(m, col[r * inner]);  // skips NaN ...
    // ... which then reaches the sum: NaN in, NaN out. m = ±inf (all -inf, or some +inf) is the
    // answer itself; x - m would be NaN.
    if (std::isinf(m)) {
      out[o * inner + i] = static_cast<T>(m);
      return;
    }
    double s = 0;
    for (int64_t r = 0; r < R; ++r) s += std::exp(col[r * inner] - m);
    out[o * inner + i] = static_cast<T>(m + std::log(s));
  });
}

// x (outer, R, inner) → var (outer, inner) = sum_r (x - mean)^2 / (R - correction), and mean
// (outer, inner), kept for the backward. Two passes in double (mean first), which stays accurate
// when the mean is large against the spread. R <= correction divides by 0 (inf or NaN), as PyTorch.
template <class T>
void var_kernel(const T* x, T* var, T* mean, int64_t outer, int64_t R, int64_t inner, int64_t correction) {
  const double divisor = static_cast<double>(std::max<int64_t>(R - correction, 0));
  for_each_column(outer, R, inner, [=](int64_t o, int64_t i) {
    const T* col = x + o * R * inner + i;
    double m = 0;
    for (int64_t r = 0; r < R; ++r) m += col[r * inner];
    m /= static_cast<double>(R);
    double ss = 0;
    for (int64_t r = 0; r < R; ++r) ss += (col[r * inner] - m) * (col[r * inner] - m);
    var[o * inner + i] = static_cast<T>(ss / divisor);
    mean[o * inner + i] = static_cast<T>(m);
  });
}

// Backward of max/min along one dim: gx (outer, R, inner) is zero except
// gx[o, indices[o, i], i] = g[o, i].
template <class T>
void scatter_to_index_kernel(const T* g, const int64_t* indices, T* gx, int64_t outer, int64_t R, int64_t inner) {
  std::fill(gx, gx + outer * R * inner, T(0));
  for_each_column(outer, 1, inner, [=](int64_t o, int64_t i) {
    gx[(o * R + indices[o * inner + i]) * inner + i] = g[o * inner + i];
  });
}

}  // namespace relgrad::cpu
