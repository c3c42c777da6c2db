// Reductions over any set of dims, reduced to one shape: a contiguous (outer, R, inner) block, where
// R is the product of the reduced dims. When the reduced dims are already adjacent in a contiguous
// tensor this is a free view; otherwise the reduced dims are permuted to the middle and copied once.
#pragma once
#include <algorithm>
#include <vector>

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

}  // namespace relgrad::cpu
