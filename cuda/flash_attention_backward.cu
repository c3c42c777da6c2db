// Fused relative attention on the GPU, backward pass, deterministic (no atomics): K0 Drow = dO·O per
// row, K1 dq (+ dqr) per query tile, K2 dk, dv per key tile, K3 table and bias gradients per distance,
// K4 their fold into table rows. Probabilities are recomputed from the forward lse. The algorithm, the
// tile shapes and why it is written this way: cuda/flash_attention_common.cuh.
#include <vector>

#include "cuda/flash_attention_common.cuh"

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
template <class T>
__device__ void warp_grads(const Params<T>& p, const T* sdO, const T* sV, const T (&lse_t)[kRows],
                           const T (&drow_t)[kRows], int64_t i0, int row0, const T (&z)[kRows], T (&P)[kRows],
                           T (&G)[kRows]) {
  const int lane = threadIdx.x % 32, D = static_cast<int>(p.D), ldk = D + 1;
  T dp[kRows];
  #pragma unroll
  for (int r = 0; r < kRows; ++r) dp[r] = T(0);
  for (int d = 0; d < D; ++d) {
    const T vd = sV[lane * ldk + d];
    #pragma unroll
    for (int r = 0; r < kRows; ++r) dp[r] += sdO[(row0 + r) * D + d] * vd;
  }
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + row0 + r;
    const T L = i < p.t2 ? lse_t[r] : neg_inf<T>();
    P[r] = z[r] == neg_inf<T>() || L == neg_inf<T>() ? T(0) : dexp(z[r] - L);
    G[r] = P[r] == T(0) ? T(0) : p.scale * P[r] * (dp[r] - drow_t[r]);
  }
}

// ---- backward K1: dq (+ dqr) per (query tile, b·h) -------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dq_kernel(Params<T> p, const T* dout, const T* lse, const T* drow, T* dq, T* dqr) {
  T *sQ, *sQR, *sdO, *sK, *sV, *sE, *sP, *sG;
  int* sEok;
  carve(p, true, sQ, sQR, sdO, sK, sV, sE, sEok, sP, sG);
  const int64_t qt = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H, i0 = qt * kBQ;
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRows, D = static_cast<int>(p.D), ldk = D + 1;
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
    warp_logits(p, sQ, sQR, sK, sE, sEok, b, h, i0, row0, j0, dlo, z);
    warp_grads(p, sdO, sV, lse_t, drow_t, i0, row0, z, P, G);
    #pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = i0 + row0 + r;
      const int64_t pi = i < p.t2 ? p.pos[i] : 0;
      for (int jj = 0; jj < kBK; ++jj) {
        const T gj = __shfl_sync(0xffffffffu, G[r], jj);
        if (gj == T(0)) continue;  // warp-uniform (the broadcast value)
        const T* e = rel_row(p, sE, sEok, h, dlo, pi, j0 + jj);
        #pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) {
          const int d = lane + 32 * t;
          if (d >= D) continue;
          gq[r][t] += gj * sK[jj * ldk + d];
          if (e) gqr[r][t] += gj * e[d];
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
template <class T>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dkdv_kernel(Params<T> p, const T* dout, const T* lse, const T* drow, T* dk, T* dv) {
  T *sQ, *sQR, *sdO, *sK, *sV, *sE, *sP, *sG;
  int* sEok;
  carve(p, true, sQ, sQR, sdO, sK, sV, sE, sEok, sP, sG);
  const int64_t kt = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H, j0 = kt * kBK;
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRows, D = static_cast<int>(p.D), ldk = D + 1;
  const int jk = threadIdx.x % 32, dg = threadIdx.x / 32;
  constexpr int kOwn = kMaxD / (kThreads / 32);
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
    warp_logits(p, sQ, sQR, sK, sE, sEok, b, h, i0, row0, j0, dlo, z);
    warp_grads(p, sdO, sV, lse_t, drow_t, i0, row0, z, P, G);
    #pragma unroll
    for (int r = 0; r < kRows; ++r) {
      sP[(row0 + r) * kBK + lane] = P[r];
      sG[(row0 + r) * kBK + lane] = G[r];
    }
    __syncthreads();
    for (int i = 0; i < kBQ; ++i) {  // rows in order: a fixed summation order
      const T pv = sP[i * kBK + jk], g = sG[i * kBK + jk];
      if (pv == T(0)) continue;
      #pragma unroll
      for (int t = 0; t < kOwn; ++t) {
        const int d = dg + (kThreads / 32) * t;
        if (d >= D) break;
        gk[t] += g * sQ[i * D + d];
        gv[t] += pv * sdO[i * D + d];
      }
    }
  }
  if (j0 + jk < p.t1) {
    #pragma unroll
    for (int t = 0; t < kOwn; ++t) {
      const int d = dg + (kThreads / 32) * t;
      if (d >= D) break;
      dk[(bh * p.t1 + j0 + jk) * p.D + d] = gk[t];
      dv[(bh * p.t1 + j0 + jk) * p.D + d] = gv[t];
    }
  }
}

// ---- backward K3: per-distance gradients, grid (distance chunks of 32, H) --------------------------
// Lane ↔ lookup entry w = chunk·32 + lane (δ = min_delta + w); warp wp takes rows i ≡ wp (mod 4) of
// every batch, in order, and sums into its own shared slice; the 4 slices are added in order.
//   gEd (H, W, D), gbd (H, W)
template <class T>
__global__ void __launch_bounds__(kThreads) flash_bwd_dist_kernel(Params<T> p, const T* dout, const T* lse,
                                                                  const T* drow, bool want_E, bool want_b, T* gEd,
                                                                  T* gbd) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sAcc = reinterpret_cast<T*>(smem_raw);  // (4, 32, D + 1)
  T* sB = sAcc + 4 * 32 * (p.D + 1);         // (4, 32)
  const int lane = threadIdx.x % 32, wp = threadIdx.x / 32, D = static_cast<int>(p.D), ld = D + 1;
  const int64_t h = blockIdx.y, w = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  for (int e = threadIdx.x; e < 4 * 32 * ld; e += blockDim.x) sAcc[e] = T(0);
  __syncthreads();
  // The logit needs both terms whatever is differentiated; the sums only the wanted ones.
  const int64_t row = p.E && w < p.W ? p.rel_rows[w] : -1;
  const int64_t brow = p.bias && w < p.W ? p.bias_rows[w] : -1;
  const bool acc_E = want_E && row >= 0, acc_b = want_b && brow >= 0;
  const T* e = row >= 0 ? p.E + ((p.E_heads == 1 ? 0 : h) * p.R + row) * p.D : nullptr;
  const T* bias = brow >= 0 ? p.bias + (p.bias_heads == 1 ? 0 : h) * p.Rb : nullptr;
  T* acc = sAcc + (wp * 32 + lane) * ld;
  T bacc = 0;
  if (acc_E || acc_b) {
    for (int64_t b = 0; b < p.B; ++b) {
      const int64_t bh = b * p.H + h;
      for (int64_t i = wp; i < p.t2; i += 4) {
        const T L = lse[bh * p.t2 + i];
        if (L == neg_inf<T>()) continue;
        const int64_t pi = p.pos[i], j = pi + p.min_delta + w;
        if (j < 0 || j >= p.t1 || hidden(p, b, pi, j)) continue;
        const T* qi = p.q + (bh * p.t2 + i) * p.D;
        const T* qri = p.qr + (bh * p.t2 + i) * p.D;
        const T* doi = dout + (bh * p.t2 + i) * p.D;
        const T* kj = p.k + (bh * p.t1 + j) * p.D;
        const T* vj = p.v + (bh * p.t1 + j) * p.D;
        T z = 0, dp = 0;
        for (int d = 0; d < D; ++d) z += qi[d] * kj[d];
        if (e)
          for (int d = 0; d < D; ++d) z += qri[d] * e[d];
        z *= p.scale;
        if (bias) z += bias[brow];
        for (int d = 0; d < D; ++d) dp += doi[d] * vj[d];
        const T ds = dexp(z - L) * (dp - drow[bh * p.t2 + i]);
        if (acc_E)
          for (int d = 0; d < D; ++d) acc[d] += p.scale * ds * qri[d];
        if (acc_b) bacc += ds;
      }
    }
  }
  sB[wp * 32 + lane] = bacc;
  __syncthreads();
  const int64_t w0 = static_cast<int64_t>(blockIdx.x) * 32;
  if (want_E)
    for (int el = threadIdx.x; el < 32 * D; el += blockDim.x) {
      const int l2 = el / D, d = el % D;
      if (w0 + l2 >= p.W) continue;
      T s = 0;
      for (int k = 0; k < 4; ++k) s += sAcc[(k * 32 + l2) * ld + d];
      gEd[(h * p.W + w0 + l2) * p.D + d] = s;
    }
  if (want_b && threadIdx.x < 32 && w0 + threadIdx.x < p.W) {
    T s = 0;
    for (int k = 0; k < 4; ++k) s += sB[k * 32 + threadIdx.x];
    gbd[h * p.W + w0 + threadIdx.x] = s;
  }
}

// ---- backward K4: fold distances into table rows ---------------------------------------------------
// out (heads, rows, cols) [heads = 1: all H heads summed, in order]; src (H, W, cols); the entries w of
// row r are list[start[r] .. start[r + 1]) (increasing).
template <class T>
__global__ void flash_fold_kernel(const T* src, const int64_t* start, const int64_t* list, T* out, int64_t heads,
                                  int64_t rows, int64_t cols, int64_t H, int64_t W) {
  const int64_t n = heads * rows * cols, stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t c = e % cols, r = (e / cols) % rows, eh = e / (cols * rows);
    T s = 0;
    for (int64_t h = heads == 1 ? 0 : eh; h < (heads == 1 ? H : eh + 1); ++h)
      for (int64_t k = start[r]; k < start[r + 1]; ++k) s += src[(h * W + list[k]) * cols + c];
    out[e] = s;
  }
}

// Row lists of a lookup: for each table row r, the entries w (increasing) with rows[w] = r.
void row_lists(const int64_t* rows, int64_t W, int64_t R, std::vector<int64_t>& start, std::vector<int64_t>& list) {
  start.assign(static_cast<size_t>(R + 1), 0);
  for (int64_t w = 0; w < W; ++w)
    if (rows[w] >= 0) ++start[rows[w] + 1];
  for (int64_t r = 0; r < R; ++r) start[r + 1] += start[r];
  list.resize(static_cast<size_t>(start[R]));
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t w = 0; w < W; ++w)
    if (rows[w] >= 0) list[fill[rows[w]]++] = w;
}

template <class T>
void fold(const T* src, const int64_t* rows_host, int64_t W, int64_t R, int64_t heads, int64_t cols, int64_t H,
          T* out, int device) {
  std::vector<int64_t> start, list;
  row_lists(rows_host, W, R, start, list);
  Buffer s = upload(start, device), l = upload(list, device);
  const int64_t n = heads * R * cols;
  if (n == 0) return;
  flash_fold_kernel<T><<<grid_size(n), kBlockSize>>>(src, s.as<int64_t>(), l.as<int64_t>(), out, heads, R, cols, H, W);
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
  Buffer lo = upload(pl.lo, a.device), hi = upload(pl.hi, a.device);
  const Params<T> p = params<T>(a, pl, lo.as<int64_t>(), hi.as<int64_t>());
  Buffer drow(static_cast<size_t>(BH * a.t2) * sizeof(T), a.device);
  flash_rowdot_kernel<T><<<grid_size(BH * a.t2), kBlockSize>>>(dout, out, drow.as<T>(), BH * a.t2, a.D);
  RG_CUDA_CHECK_LAUNCH(kOp);

  RG_CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_dq_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(pl.smem_bwd)),
                kOp);
  const dim3 gq(static_cast<unsigned>(pl.lo.size()), static_cast<unsigned>(BH));
  // Without a table there is no relative query: dqr (if asked for) is 0.
  T* dqr_arg = a.E ? dqr : nullptr;
  flash_bwd_dq_kernel<T><<<gq, kThreads, pl.smem_bwd>>>(p, dout, lse, drow.as<T>(), dq, dqr_arg);
  RG_CUDA_CHECK_LAUNCH(kOp);
  if (dqr && !a.E) RG_CUDA_CHECK(cudaMemset(dqr, 0, static_cast<size_t>(BH * a.t2 * a.D) * sizeof(T)), kOp);

  RG_CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_dkdv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(pl.smem_bwd)),
                kOp);
  const dim3 gk(static_cast<unsigned>((a.t1 + kBK - 1) / kBK), static_cast<unsigned>(BH));
  flash_bwd_dkdv_kernel<T><<<gk, kThreads, pl.smem_bwd>>>(p, dout, lse, drow.as<T>(), dk, dv);
  RG_CUDA_CHECK_LAUNCH(kOp);

  if (!want_E && !want_b) return;
  const int64_t W = a.W, H = a.H, D = a.D;
  Buffer gEd(static_cast<size_t>(want_E ? H * W * D : 0) * sizeof(T), a.device);
  Buffer gbd(static_cast<size_t>(want_b ? H * W : 0) * sizeof(T), a.device);
  if (W > 0) {
    const size_t smem = static_cast<size_t>(4 * 32 * (D + 1) + 4 * 32) * sizeof(T);
    RG_CHECK_T(DeviceError, smem <= static_cast<size_t>(max_smem(a.device)), kOp, "the distance pass needs ", smem,
               " bytes of shared memory for D = ", D);
    RG_CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_dist_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)),
                  kOp);
    const dim3 gd(static_cast<unsigned>((W + 31) / 32), static_cast<unsigned>(H));
    flash_bwd_dist_kernel<T><<<gd, kThreads, smem>>>(p, dout, lse, drow.as<T>(), want_E, want_b, gEd.as<T>(),
                                                     gbd.as<T>());
    RG_CUDA_CHECK_LAUNCH(kOp);
  }
  if (want_E) fold<T>(gEd.as<T>(), a.rel_rows_host, W, a.R, a.E_heads, D, H, dE, a.device);
  if (want_b) fold<T>(gbd.as<T>(), a.bias_rows_host, W, a.Rb, a.bias_heads, 1, H, dbias, a.device);
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
