// The index plan of the fused relative attention's CUDA kernels (cuda/flash_attention_*.cu), as
// plain functions compiled both for the device and for the host: the kernels call them, and
// tests/test_flash_plan.cpp runs the same loop order on the CPU with them, so the index math of a
// kernel is tested where no GPU is. No CUDA header, no Tensor: only integers.
//
// The table-gradient pass (backward K3) owns a chunk of kND consecutive distances of one head and a
// group of batches. Its loop:
//   for b in group, for each query tile [i0, i0 + kBQ) in order:
//     the tile's keys are keys_for_chunk(π_min, π_max, ...): for lane w of the chunk and query i the
//     key is j = π(i) + min_delta + w0 + w, so the tile reads at most kND + π_max − π_min keys;
//     dS_ij (the logit gradient) of each (row, lane) is written to a (kBQ, kND) tile, then each
//     thread adds Σ_i dS_i,w · qr_i over the tile's rows in order into its distance's accumulator.
// For a fixed query i the distances are distinct keys, so no two rows of one tile collide on a key
// and nothing needs atomics; every sum runs in a fixed order and the result is the same bits run
// after run. The fold into table rows (row lists by csr_by_key, cuda/index.h) adds the distances of each row in increasing
// order, the batch groups first, then the heads.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define RG_FLASH_HD __host__ __device__
#else
#define RG_FLASH_HD
#endif

namespace relgrad::cuda::flash_plan {

constexpr int kBQ = 16;  // query rows per tile (4 warps × 4 rows)
constexpr int kND = 32;  // distances per chunk of the table-gradient pass (one per lane)

// Inclusive key range [lo, hi] (empty when hi < lo).
struct KeyRange {
  int64_t lo = 0, hi = -1;
  RG_FLASH_HD bool empty() const { return hi < lo; }
  RG_FLASH_HD int64_t size() const { return hi < lo ? 0 : hi - lo + 1; }
};

// The key of query position pi at lookup entry w (δ = min_delta + w).
RG_FLASH_HD inline int64_t key_of(int64_t pi, int64_t min_delta, int64_t w) { return pi + min_delta + w; }

// Keys a query tile with positions in [pmin, pmax] reaches through the distance chunk [w0, w0 + kND),
// clipped to [0, t1).
RG_FLASH_HD inline KeyRange keys_for_chunk(int64_t pmin, int64_t pmax, int64_t min_delta, int64_t w0, int64_t t1) {
  KeyRange r;
  r.lo = key_of(pmin, min_delta, w0);
  r.hi = key_of(pmax, min_delta, w0 + kND - 1);
  if (r.lo < 0) r.lo = 0;
  if (r.hi > t1 - 1) r.hi = t1 - 1;
  return r;
}

// Under a causal mask a pair is visible only when j ≤ π(i), i.e. δ ≤ 0: a chunk whose smallest
// distance is positive has no visible pair at all.
RG_FLASH_HD inline bool chunk_all_hidden(bool causal, int64_t min_delta, int64_t w0) {
  return causal && min_delta + w0 > 0;
}

// Batch groups: group g of G covers b ∈ [group_begin(g), group_begin(g + 1)).
RG_FLASH_HD inline int64_t group_begin(int64_t g, int64_t G, int64_t B) { return g * B / G; }

// How many batch groups the table-gradient pass uses: enough blocks to fill the GPU (target_blocks),
// no more groups than batches, and the per-group partial sums (G, H, W, D) within max_partial
// elements.
inline int64_t batch_groups(int64_t B, int64_t H, int64_t chunks, int64_t W, int64_t D, int64_t target_blocks,
                            int64_t max_partial) {
  const int64_t per_group = H * chunks > 0 ? H * chunks : 1;
  int64_t G = (target_blocks + per_group - 1) / per_group;
  const int64_t by_memory = H * W * D > 0 ? max_partial / (H * W * D) : B;
  if (G > by_memory) G = by_memory;
  if (G > B) G = B;
  return G < 1 ? 1 : G;
}

// The per-query-tile bounds π_min, π_max of a position array (host): lo, hi (ceil(t2 / kBQ) each).
inline void tile_bounds(const int64_t* pos, int64_t t2, int64_t* lo, int64_t* hi) {
  for (int64_t i0 = 0, t = 0; i0 < t2; i0 += kBQ, ++t) {
    lo[t] = hi[t] = pos[i0];
    for (int64_t i = i0; i < i0 + kBQ && i < t2; ++i) {
      if (pos[i] < lo[t]) lo[t] = pos[i];
      if (pos[i] > hi[t]) hi[t] = pos[i];
    }
  }
}

}  // namespace relgrad::cuda::flash_plan
