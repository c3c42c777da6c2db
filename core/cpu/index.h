// CPU kernels for indexing and selection: the gather that serves embedding, index_select and
// gather; its scatter-add backward; and the three-way select of where / masked_fill.
// Plain functions on buffers and strides, no autograd. Index values are checked by the caller
// (check_indices below) before any kernel runs, so the kernels never read or write out of bounds and
// never throw inside an OpenMP region.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "core/parallel_for.h"
#include "core/strided.h"
#include "core/tensor.h"

namespace relgrad::cpu {

// Position of the first index outside [0, size) in idx[0..count), or -1 when all are valid.
inline int64_t first_bad_index(const int64_t* idx, int64_t count, int64_t size) {
  for (int64_t i = 0; i < count; ++i)
    if (idx[i] < 0 || idx[i] >= size) return i;
  return -1;
}

// Throws IndexError "[op] index 7 is out of range for size 5 ..." if any of the `index` values
// (int64, contiguous) lies outside [0, size). `what` names the tensor and dim, for the message.
inline void check_indices(const Tensor& index, int64_t size, const char* op, const std::string& what) {
  const int64_t* p = index.data_ptr<int64_t>();
  int64_t bad = first_bad_index(p, index.numel(), size);
  RG_CHECK_T(IndexError, bad < 0, op, "index ", bad < 0 ? 0 : p[bad], " is out of range for size ", size, " (",
             what, ")");
}

// The one forward kernel of embedding, index_select and gather:
//   out[e] = x[x_base(e) + index[e] * x_step]
// over the elements e of `shape` (out contiguous). x_strides are x's strides laid over `shape` with
// 0 along the indexed dim, so x_base(e) is the start of the line being indexed; the index value then
// picks the position on that line (x_step = x's stride along the indexed dim). index_strides lay the
// index over `shape` (0 where the index is broadcast, e.g. index_select's 1-D index).
template <class T>
void gather_kernel(const Shape& shape, T* out, const T* x, const Shape& x_strides, int64_t x_step,
                   const int64_t* index, const Shape& index_strides) {
  const Shape out_strides = contiguous_strides(shape);
  strided_for_each<3>(shape, {&out_strides, &x_strides, &index_strides},
                      [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
                        for (int64_t i = 0; i < n; ++i)
                          out[o[0] + i * s[0]] = x[o[1] + i * s[1] + index[o[2] + i * s[2]] * x_step];
                      });
}

// Columns per task of scatter_add_kernel: 64 contiguous elements (a few cache lines) per task keeps
// the writes of one task local while leaving enough tasks to share among threads.
inline constexpr int64_t kScatterBlock = 64;

// The backward of the gather kernel, a deterministic scatter-add:
//   gx[o, index(o, k, i), i] += g[o, k, i]     g (O, K, I), gx (O, n, I), both contiguous
// with index element (o, k, i) at o*index_strides[0] + k*index_strides[1] + i*index_strides[2]
// (embedding and index_select pass (0, 1, 0): one index per k). Entries whose index equals `skip`
// are dropped (embedding's padding_idx; -1 skips none).
// Why it is race-free and deterministic: an element gx[o, r, i] can only receive from g[o, :, i], so
// tasks own disjoint (o, column-block) pairs, and each task adds over k in increasing order — the
// same sums in the same order on any number of threads (bitwise equal to the serial loop).
template <class T>
void scatter_add_kernel(const T* g, const int64_t* index, const std::array<int64_t, 3>& index_strides, T* gx,
                        int64_t O, int64_t K, int64_t n, int64_t I, int64_t skip) {
  const int64_t blocks = (I + kScatterBlock - 1) / kScatterBlock;
  const int64_t tasks = O * blocks;
  parallel_for(tasks, O * K * I > kParallelGrain && tasks > 1, [&](int64_t t) {
    const int64_t o = t / blocks, i0 = (t % blocks) * kScatterBlock, i1 = std::min(I, i0 + kScatterBlock);
    for (int64_t k = 0; k < K; ++k) {
      const T* grow = g + (o * K + k) * I;
      const int64_t* irow = index + o * index_strides[0] + k * index_strides[1];
      if (index_strides[2] == 0) {  // one destination row for the whole block: a vectorisable row add
        const int64_t r = irow[0];
        if (r == skip) continue;
        T* dst = gx + (o * n + r) * I;
        for (int64_t i = i0; i < i1; ++i) dst[i] += grow[i];
      } else {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = irow[i * index_strides[2]];
          if (r != skip) gx[(o * n + r) * I + i] += grow[i];
        }
      }
    }
  });
}

// out = cond ? a : b over `shape` (out contiguous); cs, as, bs are the operands' strides broadcast to
// `shape` (0 along broadcast dims), as from broadcast_strides in core/cpu/elementwise.h.
template <class T>
void where_kernel(const Shape& shape, T* out, const bool* cond, const Shape& cs, const T* a, const Shape& as,
                  const T* b, const Shape& bs) {
  const Shape out_strides = contiguous_strides(shape);
  strided_for_each<4>(shape, {&out_strides, &cs, &as, &bs},
                      [&](const std::array<int64_t, 4>& o, int64_t n, const std::array<int64_t, 4>& s) {
                        for (int64_t i = 0; i < n; ++i)
                          out[o[0] + i * s[0]] = cond[o[1] + i * s[1]] ? a[o[2] + i * s[2]] : b[o[3] + i * s[3]];
                      });
}

}  // namespace relgrad::cpu
