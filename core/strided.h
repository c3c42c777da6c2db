// The one N-d loop every CPU elementwise kernel uses.
//
// strided_for_each<N>(shape, {strides of operand 0, ..., operand N-1}, body) calls
//   body(offsets, n, inner_strides)
// once per innermost row, where offsets[k] is operand k's element offset at the row start, n the
// row length and inner_strides[k] operand k's stride along the row. Dimensions of size 1 are dropped
// and dimensions that are contiguous in every operand are merged first, so a contiguous tensor is a
// single row. Rows are spread over OpenMP threads when the tensor is large enough to pay for it.
// It sits in core/, not core/cpu/, because Tensor's host copy (core/tensor.cpp) runs on it too, and
// core/ may not include the floor above it (tests/check_layering.sh).
#pragma once
#include <array>
#include <cstdint>

#include <algorithm>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/parallel_for.h"
#include "core/shape.h"

namespace relgrad::cpu {

// Below this many elements a kernel stays on one thread (thread start-up costs more).
inline constexpr int64_t kParallelGrain = 32768;

template <size_t N>
struct StridedLayout {
  Shape shape;                      // merged dims
  std::vector<std::array<int64_t, N>> strides;  // per dim, per operand
};

template <size_t N>
StridedLayout<N> coalesce(const Shape& shape, const std::array<const Shape*, N>& strides) {
  StridedLayout<N> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = (*strides[k])[d];
    if (!out.shape.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k) mergeable &= out.strides.back()[k] == s[k] * shape[d];
      if (mergeable) {
        out.shape.back() *= shape[d];
        out.strides.back() = s;
        continue;
      }
    }
    out.shape.push_back(shape[d]);
    out.strides.push_back(s);
  }
  if (out.shape.empty()) {  // a scalar, or all dims of size 1
    out.shape.push_back(1);
    out.strides.push_back({});
  }
  return out;
}

template <size_t N, class Body>
void strided_for_each(const Shape& shape, const std::array<const Shape*, N>& strides, Body&& body) {
  int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  StridedLayout<N> L = coalesce<N>(shape, strides);
  const int64_t ndim = static_cast<int64_t>(L.shape.size());
  const int64_t row_len = L.shape.back();
  const std::array<int64_t, N> inner = L.strides.back();
  const int64_t rows = numel / row_len;
  auto run_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::array<int64_t, N> off{};
      int64_t rem = r;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        int64_t i = rem % L.shape[d];
        rem /= L.shape[d];
        for (size_t k = 0; k < N; ++k) off[k] += i * L.strides[d][k];
      }
      body(off, row_len, inner);
    }
  };
  if (numel < kParallelGrain || !team_would_share()) {  // no region for a team of one (core/parallel_for.h)
    run_rows(0, rows);
    return;
  }
  if (rows == 1) {  // one long row: split it into chunks so threads still share the work
    int64_t chunks = (numel + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t start = c * kParallelGrain;
      int64_t len = std::min(kParallelGrain, row_len - start);
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = start * inner[k];
      body(off, len, inner);
    }
    return;
  }
#pragma omp parallel
  {
#ifdef _OPENMP
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
    int nt = 1, t = 0;
#endif
    int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
    run_rows(begin, end);
  }
}

}  // namespace relgrad::cpu
