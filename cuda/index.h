// Indexing kernels on the GPU (raw interface, plain pointers): the gather that serves embedding,
// index_select and gather, its deterministic scatter-add backwards, and the relative-position
// primitive's gather / scatter pair. The CPU twins are core/cpu/index.h and core/cpu/relative.h.
//
// Determinism: no atomics anywhere. Every output element of a scatter-add is written by exactly one
// thread, which adds its contributions in increasing source order starting from zero: the same sums
// in the same order as the CPU kernels, so the GPU gradients equal the CPU ones bit for bit (the
// float additions are the same IEEE operations) and are identical from run to run.
//   * scatter_add_rows (embedding, index_select: one index per source row k): the index values are
//     sorted on the device into CSR form (for each destination row r, the list of k with
//     index[k] == r, increasing: csr_by_key_on_device, a stable radix sort); one thread per (o, r, i)
//     sums its list.
//   * scatter_add_columns (gather: a different index per column): one thread per (o, i) column walks
//     k in order; the column is owned by that thread, so there is no race.
//   * relative_scatter: CSR per (query i, table row r) of the keys j with C[i, j] == r, sorted on the
//     device the same way from the index map.
// Nothing is copied from the host. Index values are checked by the caller before any kernel runs, so
// kernels never read out of bounds. All kernels run on the current device's default stream; `device`
// selects it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/base/dtype.h"
#include "core/base/relative_layout.h"

namespace relgrad::cuda {

// out (shape, contiguous) [e] = x[x_base(e) + index[index_off(e)] * x_step], where x_base and
// index_off are the dot products of e's multi-index with x_strides / index_strides (as
// cpu::gather_kernel). x, index (int64) and out are device pointers; any dtype.
void gather(DType dtype, const std::vector<int64_t>& shape, void* out, const void* x,
            const std::vector<int64_t>& x_strides, int64_t x_step, const int64_t* index,
            const std::vector<int64_t>& index_strides, int device);

// gx (O, n, I), contiguous, fully written = Σ_k g (O, K, I)[o, k, i] over the k with index[k] == r
// (index: K values on the device, all in [0, n)); rows equal to `skip` (embedding's padding_idx, -1
// for none) get no contributions, so their gradient is 0.
void scatter_add_rows(DType dtype, const void* g, const int64_t* index, int64_t skip, void* gx, int64_t O,
                      int64_t K, int64_t n, int64_t I, int device);

// gx (O, n, I), contiguous, fully written: gx[o, index(o, k, i), i] += g[o, k, i] for k = 0..K-1 in
// order, from zero; index (device, int64) element (o, k, i) at o*s0 + k*s1 + i*s2.
void scatter_add_columns(DType dtype, const void* g, const int64_t* index, int64_t s0, int64_t s1, int64_t s2,
                         void* gx, int64_t O, int64_t K, int64_t n, int64_t I, int device);

// S (N, t2, t1), contiguous = P (N, t2, R) gathered through C (t2, t1, device int64, contiguous):
// S[n,i,j] = C[i,j] >= 0 ? P[n*batch_stride + i*row_stride + C[i,j]] : 0 (core/base/relative_layout.h).
void relative_gather(DType dtype, const RelativeLayout& l, const void* P, const int64_t* C, void* S, int device);

// P (N, t2, R), contiguous, fully written = Σ_{j: C[i,j] = r} S (N, t2, t1, contiguous)[n, i, j], j
// increasing; C (t2, t1) on the device, entries in [-1, R).
void relative_scatter(DType dtype, const RelativeLayout& l, const void* S, const int64_t* C, void* P, int device);

// csr_by_key (below) on the device: keys (count, device) → offsets (buckets + 1) and entries (count;
// the first offsets[buckets] are the kept keys' positions), device buffers the caller allocated.
void csr_by_key_on_device(const int64_t* keys, int64_t count, int64_t buckets, int64_t* offsets, int64_t* entries,
                          int device);

// A stable counting sort of `count` keys in [0, buckets) (keys outside are dropped): offsets
// (buckets + 1) and the positions k of the kept keys, grouped by key, increasing within a key.
// The host oracle of csr_by_key_on_device (the order the scatter-adds sum in, the CPU's order);
// inline so the CPU-only tests can check it.
struct Csr {
  std::vector<int64_t> offsets;  // list of key r: entries[offsets[r] .. offsets[r + 1])
  std::vector<int64_t> entries;
};
inline Csr csr_by_key(const int64_t* keys, int64_t count, int64_t buckets) {
  Csr c;
  c.offsets.assign(static_cast<size_t>(buckets) + 1, 0);
  for (int64_t k = 0; k < count; ++k)
    if (keys[k] >= 0 && keys[k] < buckets) ++c.offsets[keys[k] + 1];
  for (int64_t r = 0; r < buckets; ++r) c.offsets[r + 1] += c.offsets[r];
  c.entries.resize(static_cast<size_t>(c.offsets[buckets]));
  std::vector<int64_t> next(c.offsets.begin(), c.offsets.end() - 1);
  for (int64_t k = 0; k < count; ++k)
    if (keys[k] >= 0 && keys[k] < buckets) c.entries[next[keys[k]]++] = k;
  return c;
}

}  // namespace relgrad::cuda
