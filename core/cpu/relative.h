// The relative-position primitive's two raw kernels (docs/relative-attention.md): an index-mapped gather
// from a "relative layout" to the (query, key) layout of attention scores, and its adjoint, a
// row-owned scatter. The index map C (t2, t1) holds, for query i and key j, the column of the
// relative layout that (i, j) reads, or -1 for "no entry" (the score term is 0 there).
//
// Neither kernel knows about tables, signs or alignments: those are folded into C by
// relative_index(); neither materialises anything of size (t2, t1, D).
#pragma once
#include <cstdint>

#include "core/base/relative_layout.h"
#include "core/parallel_for.h"

namespace relgrad::cpu {

// S (N, t2, t1) = P (N, t2, R) gathered through C (t2, t1): S[n,i,j] = C[i,j] >= 0 ? P[n,i,C[i,j]] : 0.
// P rows are strided (l.row_stride between queries, l.batch_stride between n) so broadcast P works.
template <class T>
void relative_gather_kernel(const RelativeLayout& l, const T* P, const int64_t* C, T* S) {
  const int64_t N = l.N, t2 = l.t2, t1 = l.t1, batch_stride = l.batch_stride, row_stride = l.row_stride;
  parallel_for(N * t2, N * t2 * t1 > 32768, [&](int64_t row) {
    const int64_t n = row / t2, i = row % t2;
    const T* p = P + n * batch_stride + i * row_stride;
    const int64_t* c = C + i * t1;
    T* s = S + row * t1;
    for (int64_t j = 0; j < t1; ++j) s[j] = c[j] >= 0 ? p[c[j]] : T(0);
  });
}

// P̄ (N, t2, R) = Cᵀ applied to S̄ (N, t2, t1): P̄[n,i,r] = Σ_{j: C[i,j] = r} S̄[n,i,j].
// Each (n, i) row of P̄ is written by one thread from its own row of S̄: no atomics, and the sum
// over j runs in increasing j, so the result does not depend on the thread count.
template <class T>
void relative_scatter_kernel(const RelativeLayout& l, const T* S, const int64_t* C, T* P) {
  const int64_t N = l.N, t2 = l.t2, t1 = l.t1, R = l.R;
  parallel_for(N * t2, N * t2 * (t1 + R) > 32768, [&](int64_t row) {
    const int64_t i = row % t2;
    const int64_t* c = C + i * t1;
    const T* s = S + row * t1;
    T* p = P + row * R;
    for (int64_t r = 0; r < R; ++r) p[r] = T(0);
    for (int64_t j = 0; j < t1; ++j)
      if (c[j] >= 0) p[c[j]] += s[j];
  });
}

}  // namespace relgrad::cpu
