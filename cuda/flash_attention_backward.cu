// Fused relative attention on the GPU, backward pass, deterministic (no atomics): K0 Drow = dO·O per
// row, K1 dq (+ dqr) per query tile, K2 dk, dv per key tile, K3 table and bias gradients per distance,
// K4 their fold into table rows. Probabilities are recomputed from the forward lse. The algorithm, the
// tile shapes and why it is written this way: cuda/flash_attention_common.cuh.
#include <vector>

#include "cuda/flash_attention_common.cuh"
#include "cuda/index.h"

namespace relgrad::cuda {
namespace flash {
namespace {

// ---- backward K0: Drow (B·H·t2) = rowwise dO · O ---------------------------------------------------
template <class T>
__global__ void flash_rowdot_kernel(const T* dout, const T* out, T* drow, int64_t rows, int64_t D) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    T acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += dout[r * D + d] * out[r * D + d];
    drow[r] = acc;
  }
}

// Probabilities and logit gradients of the warp's rows against key j0 + lane:
//   P = exp(z − lse), G = scale · P · (dO·v − Drow)   (0 where hidden).
template <class T, bool kVec>
__device__ void warp_grads(const Params<T>& p, const T* sdO, const T* sV, const T (&lse_t)[kRows],
                           const T (&drow_t)[kRows], int64_t i0, int row0, const T (&z)[kRows], T (&P)[kRows],
                           T (&G)[kRows]) {
  const int lane = threadIdx.x % 32, D = static_cast<int>(p.D);
  T dp[kRows];
  #pragma unroll
  for (int r = 0; r < kRows; ++r) dp[r] = T(0);
  dot_rows<T, kVec>(sdO + row0 * D, D, sV + lane * p.ld, D, dp);
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + row0 + r;
    const T L = i < p.t2 ? lse_t[r] : neg_inf<T>();
    P[r] = z[r] == neg_inf<T>() || L == neg_inf<T>() ? T(0) : dexp(z[r] - L);
    G[r] = P[r] == T(0) ? T(0) : p.scale * P[r] * (dp[r] - drow_t[r]);
  }
}

// The dk/dv and table sums: thread (lane, dim group dg of 4) owns kOwn dims of its key (distance):
// d = dg·D/4 + t, contiguous, when the vector path runs (D/4 a multiple of the width), else
// d = dg + 4t. acc[t] += g · row[d] over the owned dims, with 16-byte loads of the broadcast row.
constexpr int kOwn = kMaxD / (kThreads / 32);
template <class T, bool kVec>
__device__ inline int own_dim(int dg, int t, int D) { return kVec ? dg * (D / 4) + t : dg + (kThreads / 32) * t; }
template <class T, bool kVec>
__device__ inline void add_owned(T (&acc)[kOwn], T g, const T* row, int dg, int D) {
  if constexpr (kVec) {
    using V = typename Vec16<T>::V;
    constexpr int n = Vec16<T>::n;
    const T* base = row + dg * (D / 4);
    #pragma unroll
    for (int t = 0; t < kOwn; t += n) {
      if (t >= D / 4) break;
      const V x = *reinterpret_cast<const V*>(base + t);
      const T* xs = reinterpret_cast<const T*>(&x);
      #pragma unroll
      for (int u = 0; u < n; ++u) acc[t + u] += g * xs[u];
    }
  } else {
    #pragma unroll
    for (int t = 0; t < kOwn; ++t) {
      const int d = dg + (kThreads / 32) * t;
      if (d >= D) break;
      acc[t] += g * row[d];
    }
  }
}
template <class T, bool kVec>
__device__ inline void store_owned(const T (&acc)[kOwn], T factor, T* out, int dg, int D) {
  #pragma unroll
  for (int t = 0; t < kOwn; ++t) {
    if (kVec ? t >= D / 4 : dg + (kThreads / 32) * t >= D) break;
    out[own_dim<T, kVec>(dg, t, D)] = factor * acc[t];
  }
}

// ---- backward K1: dq (+ dqr) per (query tile, b·h) -------------------------------------------------
template <class T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dq_kernel(Params<T> p, const T* dout, const T* lse, const T* drow, T* dq, T* dqr) {
  T *sQ, *sQR, *sdO, *sK, *sV, *sE, *sP, *sG;
  int* sEok;
  carve(p, true, sQ, sQR, sdO, sK, sV, sE, sEok, sP, sG);
  const int64_t qt = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H, i0 = qt * kBQ;
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRows, D = static_cast<int>(p.D), ldk = p.ld;
  const int64_t pmin = p.tile_lo[qt], pmax = p.tile_hi[qt];
  load_rows(sQ, D, p.q + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
  if (sQR != sQ) load_rows(sQR, D, p.qr + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
  load_rows(sdO, D, dout + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
  T lse_t[kRows], drow_t[kRows];  // the warp's rows
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + row0 + r;
    lse_t[r] = i < p.t2 ? lse[bh * p.t2 + i] : neg_inf<T>();
    drow_t[r] = i < p.t2 ? drow[bh * p.t2 + i] : T(0);
  }
  T gq[kRows][kDimsPerLane], gqr[kRows][kDimsPerLane];
  #pragma unroll
  for (int r = 0; r < kRows; ++r)
    #pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) gq[r][t] = gqr[r][t] = T(0);
  for (int64_t j0 = 0; j0 < p.t1; j0 += kBK) {
    if (p.causal && j0 > pmax) break;
    const int64_t dlo = j0 - pmax;
    __syncthreads();
    load_rows(sK, ldk, p.k + bh * p.t1 * p.D, j0, kBK, p.t1, D);
    load_rows(sV, ldk, p.v + bh * p.t1 * p.D, j0, kBK, p.t1, D);
    if (p.E && p.e_smem) load_window(p, sE, sEok, h, dlo, static_cast<int>(kBK + pmax - pmin));
    __syncthreads();
    T z[kRows], P[kRows], G[kRows];
    warp_logits<T, kVec>(p, sQ, sQR, sK, sE, sEok, b, h, i0, row0, j0, dlo, z);
    warp_grads<T, kVec>(p, sdO, sV, lse_t, drow_t, i0, row0, z, P, G);
    // gq[r] += Σ_jj G[r][jj]·k[jj] (each key row read once for the warp's rows), gqr[r] += G·E[row(δ)].
    for (int jj = 0; jj < kBK; ++jj) {
      T kk[kDimsPerLane];
      lane_dims(sK + jj * ldk, lane, D, kk);
      #pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const T gj = __shfl_sync(0xffffffffu, G[r], jj);
        if (gj == T(0)) continue;  // warp-uniform (the broadcast value)
        const int64_t i = i0 + row0 + r;
        const T* e = rel_row(p, sE, sEok, h, dlo, i < p.t2 ? p.pos[i] : 0, j0 + jj);
        #pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) {
          const int d = lane + 32 * t;
          gq[r][t] += gj * kk[t];
          if (e && d < D) gqr[r][t] += gj * e[d];
        }
      }
    }
  }
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + row0 + r;
    if (i >= p.t2) continue;
    #pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d >= D) continue;
      const int64_t at = (bh * p.t2 + i) * p.D + d;
      if (dqr) {
        dq[at] = gq[r][t];
        dqr[at] = gqr[r][t];
      } else {
        dq[at] = gq[r][t] + gqr[r][t];
      }
    }
  }
}

// ---- backward K2: dk, dv per (key tile, b·h); query tiles in order ---------------------------------
// Thread (key jk = tid % 32, dim group dg = tid / 32) owns dk, dv[j0 + jk][dg + 4t].
template <class T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dkdv_kernel(Params<T> p, const T* dout, const T* lse, const T* drow, T* dk, T* dv) {
  T *sQ, *sQR, *sdO, *sK, *sV, *sE, *sP, *sG;
  int* sEok;
  carve(p, true, sQ, sQR, sdO, sK, sV, sE, sEok, sP, sG);
  const int64_t kt = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H, j0 = kt * kBK;
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRows, D = static_cast<int>(p.D), ldk = p.ld;
  const int jk = threadIdx.x % 32, dg = threadIdx.x / 32;
  T gk[kOwn], gv[kOwn];
  #pragma unroll
  for (int t = 0; t < kOwn; ++t) gk[t] = gv[t] = T(0);
  load_rows(sK, ldk, p.k + bh * p.t1 * p.D, j0, kBK, p.t1, D);
  load_rows(sV, ldk, p.v + bh * p.t1 * p.D, j0, kBK, p.t1, D);
  const int64_t nqt = (p.t2 + kBQ - 1) / kBQ;
  for (int64_t qt = 0; qt < nqt; ++qt) {
    const int64_t pmin = p.tile_lo[qt], pmax = p.tile_hi[qt], i0 = qt * kBQ, dlo = j0 - pmax;
    if (p.causal && j0 > pmax) continue;  // block-uniform
    __syncthreads();  // the previous query tile's reads are done
    load_rows(sQ, D, p.q + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
    if (sQR != sQ) load_rows(sQR, D, p.qr + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
    load_rows(sdO, D, dout + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
    if (p.E && p.e_smem) load_window(p, sE, sEok, h, dlo, static_cast<int>(kBK + pmax - pmin));
    __syncthreads();
    T lse_t[kRows], drow_t[kRows];
    #pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = i0 + row0 + r;
      lse_t[r] = i < p.t2 ? lse[bh * p.t2 + i] : neg_inf<T>();
      drow_t[r] = i < p.t2 ? drow[bh * p.t2 + i] : T(0);
    }
    T z[kRows], P[kRows], G[kRows];
    warp_logits<T, kVec>(p, sQ, sQR, sK, sE, sEok, b, h, i0, row0, j0, dlo, z);
    warp_grads<T, kVec>(p, sdO, sV, lse_t, drow_t, i0, row0, z, P, G);
    #pragma unroll
    for (int r = 0; r < kRows; ++r) {
      sP[(row0 + r) * kBK + lane] = P[r];
      sG[(row0 + r) * kBK + lane] = G[r];
    }
    __syncthreads();
    for (int i = 0; i < kBQ; ++i) {  // rows in order: a fixed summation order
      const T pv = sP[i * kBK + jk], g = sG[i * kBK + jk];
      if (pv == T(0)) continue;
      add_owned<T, kVec>(gk, g, sQ + i * D, dg, D);
      add_owned<T, kVec>(gv, pv, sdO + i * D, dg, D);
    }
  }
  if (j0 + jk < p.t1) {
    store_owned<T, kVec>(gk, T(1), dk + (bh * p.t1 + j0 + jk) * p.D, dg, D);
    store_owned<T, kVec>(gv, T(1), dv + (bh * p.t1 + j0 + jk) * p.D, dg, D);
  }
}

// ---- backward K3: per-distance gradients, grid (distance chunks of kND, H, batch groups) -------------
// The loop order and its index math are cuda/flash_plan.h's (tested on the host by
// tests/test_flash_plan.cpp). Lane ↔ lookup entry w = w0 + lane (δ = min_delta + w); warp wp takes
// rows 4·wp … 4·wp + 3 of each query tile. Per (b, query tile): stage the tile's q, qr, dO and the
// keys it reaches through the chunk (at most kND + span rows, else read from global memory), compute
// dS of each (row, distance) into sG (kBQ, kND), then thread (w, dg) adds Σ_i dS_iw · qr_i[d] for
// d ≡ dg (mod 4) over the tile's rows in order. dS_ij = P_ij (dP_ij − Drow_i) is the logit's gradient.
//   gEd (G, H, W, D) = scale · Σ dS·qr,  gbd (G, H, W) = Σ dS   (G batch groups, summed by the fold)
template <class T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dist_kernel(Params<T> p, const T* dout, const T* lse, const T* drow, bool want_E, bool want_b,
                          bool stage_keys, int key_rows, int64_t groups, T* gEd, T* gbd) {
  using namespace flash_plan;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int D = static_cast<int>(p.D), ldk = p.ld;
  T* sQ = reinterpret_cast<T*>(smem_raw);         // (kBQ, D)
  T* sQR = p.qr != p.q ? sQ + kBQ * D : sQ;        // (kBQ, D)
  T* sdO = sQ + (sQR != sQ ? 2 : 1) * kBQ * D;     // (kBQ, D)
  T* sE = sdO + kBQ * D;                           // (kND, ld): the chunk's table rows
  T* sG = sE + kND * ldk;                          // (kBQ, kND)
  T* sK = sG + kBQ * kND;                          // (key_rows, ld) when stage_keys
  T* sV = sK + (stage_keys ? key_rows * ldk : 0);  // (key_rows, ld)
  const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, row0 = wp * kRows;
  const int64_t h = blockIdx.y, g = blockIdx.z, w0 = static_cast<int64_t>(blockIdx.x) * kND, w = w0 + lane;
  const int64_t row = p.E && w < p.W ? p.rel_rows[w] : -1;
  const int64_t brow = p.bias && w < p.W ? p.bias_rows[w] : -1;
  const T* bias = p.bias ? p.bias + (p.bias_heads == 1 ? 0 : h) * p.Rb : nullptr;
  const bool wanted = (want_E && row >= 0) || (want_b && brow >= 0);  // this lane's distance gets a sum
  // The chunk's table rows, once for the whole block.
  if (p.E) {
    const T* E = p.E + (p.E_heads == 1 ? 0 : h) * p.R * p.D;
    for (int e = threadIdx.x; e < kND * D; e += blockDim.x) {
      const int l = e / D, d = e % D;
      const int64_t r = w0 + l < p.W ? p.rel_rows[w0 + l] : -1;
      sE[l * ldk + d] = r >= 0 ? E[r * p.D + d] : T(0);
    }
  }
  // Thread (wl, dg) owns the sums of distance w0 + wl, dims dg, dg + 4, …
  const int wl = threadIdx.x % 32, dg = threadIdx.x / 32;
  T acc[kOwn];
  #pragma unroll
  for (int t = 0; t < kOwn; ++t) acc[t] = T(0);
  T bacc = 0;
  const int64_t b_lo = group_begin(g, groups, p.B), b_hi = group_begin(g + 1, groups, p.B);
  const int64_t nqt = (p.t2 + kBQ - 1) / kBQ;
  const bool skip = chunk_all_hidden(p.causal, p.min_delta, w0) || (!want_E && !want_b);
  for (int64_t b = b_lo; b < b_hi && !skip; ++b) {
    const int64_t bh = b * p.H + h;
    for (int64_t qt = 0; qt < nqt; ++qt) {
      const int64_t i0 = qt * kBQ;
      const KeyRange keys = keys_for_chunk(p.tile_lo[qt], p.tile_hi[qt], p.min_delta, w0, p.t1);
      if (keys.empty()) continue;  // block-uniform
      __syncthreads();  // the previous tile's reads are done
      load_rows(sQ, D, p.q + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
      if (sQR != sQ) load_rows(sQR, D, p.qr + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
      load_rows(sdO, D, dout + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
      if (stage_keys) {
        load_rows(sK, ldk, p.k + bh * p.t1 * p.D, keys.lo, static_cast<int>(keys.size()), p.t1, D);
        load_rows(sV, ldk, p.v + bh * p.t1 * p.D, keys.lo, static_cast<int>(keys.size()), p.t1, D);
      }
      __syncthreads();
      #pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t i = i0 + row0 + r;
        const T L = i < p.t2 ? lse[bh * p.t2 + i] : neg_inf<T>();
        const int64_t pi = i < p.t2 ? p.pos[i] : 0, j = key_of(pi, p.min_delta, w);
        const bool ok = wanted && L != neg_inf<T>() && j >= 0 && j < p.t1 && !hidden(p, b, pi, j);
        T ds = 0;
        if (ok) {
          const T* kj = stage_keys ? sK + (j - keys.lo) * ldk : p.k + (bh * p.t1 + j) * p.D;
          const T* vj = stage_keys ? sV + (j - keys.lo) * ldk : p.v + (bh * p.t1 + j) * p.D;
          const T* qi = sQ + (row0 + r) * D;
          const T* qri = sQR + (row0 + r) * D;
          const T* doi = sdO + (row0 + r) * D;
          const T* e = sE + lane * ldk;
          // Staged rows are aligned for 16-byte loads; rows read from global memory may not be.
          T z = stage_keys ? dot<T, kVec>(qi, kj, D, T(0)) : dot<T, false>(qi, kj, D, T(0));
          if (row >= 0) z = dot<T, kVec>(qri, e, D, z);
          z *= p.scale;
          if (brow >= 0) z += bias[brow];
          const T dp = stage_keys ? dot<T, kVec>(doi, vj, D, T(0)) : dot<T, false>(doi, vj, D, T(0));
          ds = dexp(z - L) * (dp - drow[bh * p.t2 + i]);
        }
        sG[(row0 + r) * kND + lane] = ds;
      }
      __syncthreads();
      for (int i = 0; i < kBQ; ++i) {  // rows in order: a fixed summation order
        const T gi = sG[i * kND + wl];
        if (gi == T(0)) continue;
        if (dg == 0) bacc += gi;
        add_owned<T, kVec>(acc, gi, sQR + i * D, dg, D);
      }
    }
  }
  if (w0 + wl >= p.W) return;
  const int64_t at = (g * p.H + h) * p.W + w0 + wl;
  if (want_E) store_owned<T, kVec>(acc, p.scale, gEd + at * p.D, dg, D);
  if (want_b && dg == 0) gbd[at] = bacc;
}

// ---- backward K4: fold distances into table rows ---------------------------------------------------
// out (heads, rows, cols) [heads = 1: all H heads summed, in order]; src (G, H, W, cols); the entries w
// of row r are list[start[r] .. start[r + 1]) (increasing). Order: groups, then heads, then entries.
template <class T>
__global__ void flash_fold_kernel(const T* src, const int64_t* start, const int64_t* list, T* out, int64_t heads,
                                  int64_t rows, int64_t cols, int64_t G, int64_t H, int64_t W) {
  const int64_t n = heads * rows * cols, stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t c = e % cols, r = (e / cols) % rows, eh = e / (cols * rows);
    T s = 0;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t h = heads == 1 ? 0 : eh; h < (heads == 1 ? H : eh + 1); ++h)
        for (int64_t k = start[r]; k < start[r + 1]; ++k) s += src[((g * H + h) * W + list[k]) * cols + c];
    out[e] = s;
  }
}

template <class T>
void fold(const T* src, const int64_t* rows_host, int64_t W, int64_t R, int64_t heads, int64_t cols, int64_t G,
          int64_t H, T* out, int device) {
  const int64_t n = heads * R * cols;
  if (n == 0) return;
  // Row r's entries w (increasing) with rows[w] = r: the scatter-adds' stable counting sort.
  const Csr lists = csr_by_key(rows_host, W, R);
  if (lists.entries.empty()) {  // no distance maps to the table: its gradient is 0
    RG_CUDA_CHECK(cudaMemset(out, 0, static_cast<size_t>(n) * sizeof(T)), kOp);
    return;
  }
  flash_fold_kernel<T><<<grid_size(n), kBlockSize>>>(src, cached_upload(lists.offsets, device),
                                                     cached_upload(lists.entries, device), out, heads, R, cols, G, H, W);
  RG_CUDA_CHECK_LAUNCH(kOp);
}

template <class T>
void backward(const FlashArgs& a, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv, T* dqr, T* dE,
              T* dbias) {
  const int64_t BH = a.B * a.H;
  const bool want_E = dE && a.E, want_b = dbias && a.bias;
  if (want_E && (BH == 0 || a.t2 == 0 || a.t1 == 0))
    RG_CUDA_CHECK(cudaMemset(dE, 0, static_cast<size_t>(a.E_heads * a.R * a.D) * sizeof(T)), kOp);
  if (want_b && (BH == 0 || a.t2 == 0 || a.t1 == 0))
    RG_CUDA_CHECK(cudaMemset(dbias, 0, static_cast<size_t>(a.bias_heads * a.Rb) * sizeof(T)), kOp);
  if (BH == 0) return;
  if (a.t1 == 0 || a.t2 == 0) {  // nothing visible: every gradient is 0
    const size_t qn = static_cast<size_t>(BH * a.t2 * a.D) * sizeof(T), kn = static_cast<size_t>(BH * a.t1 * a.D) * sizeof(T);
    if (qn) RG_CUDA_CHECK(cudaMemset(dq, 0, qn), kOp);
    if (qn && dqr) RG_CUDA_CHECK(cudaMemset(dqr, 0, qn), kOp);
    if (kn) RG_CUDA_CHECK(cudaMemset(dk, 0, kn), kOp);
    if (kn) RG_CUDA_CHECK(cudaMemset(dv, 0, kn), kOp);
    return;
  }
  const Plan pl = make_plan<T>(a);
  const Params<T> p = params<T>(a, pl, cached_upload(pl.lo, a.device), cached_upload(pl.hi, a.device));
  Buffer drow(static_cast<size_t>(BH * a.t2) * sizeof(T), a.device);
  flash_rowdot_kernel<T><<<grid_size(BH * a.t2), kBlockSize>>>(dout, out, drow.as<T>(), BH * a.t2, a.D);
  RG_CUDA_CHECK_LAUNCH(kOp);

  const bool vec = use_vec<T>(a.D);
  RG_CUDA_CHECK(cudaFuncSetAttribute(vec ? flash_bwd_dq_kernel<T, true> : flash_bwd_dq_kernel<T, false>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(pl.smem_bwd)),
                kOp);
  const dim3 gq(static_cast<unsigned>(pl.lo.size()), static_cast<unsigned>(BH));
  // Without a table there is no relative query: dqr (if asked for) is 0.
  T* dqr_arg = a.E ? dqr : nullptr;
  (vec ? flash_bwd_dq_kernel<T, true> : flash_bwd_dq_kernel<T, false>)<<<gq, kThreads, pl.smem_bwd>>>(
      p, dout, lse, drow.as<T>(), dq, dqr_arg);
  RG_CUDA_CHECK_LAUNCH(kOp);
  if (dqr && !a.E) RG_CUDA_CHECK(cudaMemset(dqr, 0, static_cast<size_t>(BH * a.t2 * a.D) * sizeof(T)), kOp);

  RG_CUDA_CHECK(cudaFuncSetAttribute(vec ? flash_bwd_dkdv_kernel<T, true> : flash_bwd_dkdv_kernel<T, false>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(pl.smem_bwd)),
                kOp);
  const dim3 gk(static_cast<unsigned>((a.t1 + kBK - 1) / kBK), static_cast<unsigned>(BH));
  (vec ? flash_bwd_dkdv_kernel<T, true> : flash_bwd_dkdv_kernel<T, false>)<<<gk, kThreads, pl.smem_bwd>>>(
      p, dout, lse, drow.as<T>(), dk, dv);
  RG_CUDA_CHECK_LAUNCH(kOp);

  if (!want_E && !want_b) return;
  const int64_t W = a.W, H = a.H, D = a.D, chunks = (W + flash_plan::kND - 1) / flash_plan::kND;
  const int64_t G = flash_plan::batch_groups(a.B, H, chunks, W, D, 4 * sm_count(a.device), int64_t{1} << 25);
  Buffer gEd(static_cast<size_t>(want_E ? G * H * W * D : 0) * sizeof(T), a.device);
  Buffer gbd(static_cast<size_t>(want_b ? G * H * W : 0) * sizeof(T), a.device);
  if (W > 0) {
    const size_t dq_rows = static_cast<size_t>(p.qr != p.q ? 3 : 2) * kBQ * D;
    const size_t ld = static_cast<size_t>(p.ld);
    const size_t fixed = (dq_rows + flash_plan::kND * ld + kBQ * flash_plan::kND) * sizeof(T);
    const int key_rows = static_cast<int>(std::min<int64_t>(flash_plan::kND + pl.span, 1 << 20));
    const size_t staged = fixed + 2 * static_cast<size_t>(key_rows) * ld * sizeof(T);
    const size_t limit = static_cast<size_t>(max_smem(a.device));
    // Stage the keys when they fit in a third of the limit (two blocks per SM or more); else read them
    // from global memory (explicit positions spread far apart).
    const bool stage_keys = flash_plan::kND + pl.span <= kMaxWindow && staged <= limit / 3;
    const size_t smem = stage_keys ? staged : fixed;
    RG_CHECK_T(DeviceError, smem <= limit, kOp, "the distance pass needs ", smem, " bytes of shared memory for D = ", D);
    const auto dist_kernel = vec ? flash_bwd_dist_kernel<T, true> : flash_bwd_dist_kernel<T, false>;
    RG_CUDA_CHECK(cudaFuncSetAttribute(dist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)),
                  kOp);
    const dim3 gd(static_cast<unsigned>(chunks), static_cast<unsigned>(H), static_cast<unsigned>(G));
    dist_kernel<<<gd, kThreads, smem>>>(p, dout, lse, drow.as<T>(), want_E, want_b, stage_keys, key_rows,
                                                     G, gEd.as<T>(), gbd.as<T>());
    RG_CUDA_CHECK_LAUNCH(kOp);
  }
  if (want_E) fold<T>(gEd.as<T>(), a.rel_rows_host, W, a.R, a.E_heads, D, G, H, dE, a.device);
  if (want_b) fold<T>(gbd.as<T>(), a.bias_rows_host, W, a.Rb, a.bias_heads, 1, G, H, dbias, a.device);
}

}  // namespace
}  // namespace flash

void flash_attention_backward(const FlashArgs& a, const void* out, const void* lse, const void* dout, void* dq,
                              void* dk, void* dv, void* dqr, void* dE, void* dbias) {
  DeviceGuard guard(a.device, flash::kOp);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    flash::backward<T>(a, static_cast<const T*>(out), static_cast<const T*>(lse), static_cast<const T*>(dout),
                       static_cast<T*>(dq), static_cast<T*>(dk), static_cast<T*>(dv), static_cast<T*>(dqr),
                       static_cast<T*>(dE), static_cast<T*>(dbias));
  };
  if (a.dtype == DType::Float32) run(float{});
  else if (a.dtype == DType::Float64) run(double{});
  else throw DTypeError(detail::concat("[", flash::kOp, "] expected float32 or float64, got ", dtype_name(a.dtype)));
}

}  // namespace relgrad::cuda
