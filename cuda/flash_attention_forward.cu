// Fused relative attention on the GPU, forward pass: one block per (query tile, b·h), online softmax,
// writes out and lse (the backward pass recomputes from lse). The algorithm, the tile shapes and why
// it is written this way: cuda/flash_attention_common.cuh.
#include "cuda/flash_attention_common.cuh"

namespace relgrad::cuda {
namespace flash {
namespace {

// ---- forward: grid (query tiles, B·H), 128 threads; out (B, H, t2, D), lse (B, H, t2) -------------
template <class T, bool kVec>
__global__ void __launch_bounds__(kThreads) flash_fwd_kernel(Params<T> p, T* out, T* lse) {
  T *sQ, *sQR, *sdO, *sK, *sV, *sE, *sP, *sG;
  int* sEok;
  carve(p, false, sQ, sQR, sdO, sK, sV, sE, sEok, sP, sG);
  const int64_t qt = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H, i0 = qt * kBQ;
  const int lane = threadIdx.x % 32, row0 = (threadIdx.x / 32) * kRows, D = static_cast<int>(p.D), ldk = p.ld;
  const int64_t pmin = p.tile_lo[qt], pmax = p.tile_hi[qt];
  load_rows(sQ, D, p.q + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
  if (sQR != sQ) load_rows(sQR, D, p.qr + bh * p.t2 * p.D, i0, kBQ, p.t2, D);
  T acc[kRows][kDimsPerLane], m[kRows], l[kRows];
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = neg_inf<T>();
    l[r] = T(0);
    #pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) acc[r][t] = T(0);
  }
  for (int64_t j0 = 0; j0 < p.t1; j0 += kBK) {
    if (p.causal && j0 > pmax) break;  // block-uniform: every later key is after every query of the tile
    const int64_t dlo = j0 - pmax;
    __syncthreads();  // the previous tile's reads are done
    load_rows(sK, ldk, p.k + bh * p.t1 * p.D, j0, kBK, p.t1, D);
    load_rows(sV, ldk, p.v + bh * p.t1 * p.D, j0, kBK, p.t1, D);
    if (p.E && p.e_smem) load_window(p, sE, sEok, h, dlo, static_cast<int>(kBK + pmax - pmin));
    __syncthreads();
    T z[kRows], pr[kRows], corr[kRows];
    warp_logits<T, kVec>(p, sQ, sQR, sK, sE, sEok, b, h, i0, row0, j0, dlo, z);
    #pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const T mt = warp_max(z[r]);
      corr[r] = T(1), pr[r] = T(0);
      if (mt == neg_inf<T>()) continue;  // warp-uniform: no visible key of this tile for this row
      const T m_new = fmax(m[r], mt);
      corr[r] = m[r] == neg_inf<T>() ? T(0) : dexp(m[r] - m_new);
      pr[r] = z[r] == neg_inf<T>() ? T(0) : dexp(z[r] - m_new);
      l[r] = l[r] * corr[r] + warp_sum(pr[r]);
      m[r] = m_new;
    }
    // acc[r] = acc[r]·corr[r] + Σ_jj P[r][jj]·v[jj]: each value row is read once for the warp's rows.
    #pragma unroll
    for (int r = 0; r < kRows; ++r)
      #pragma unroll
      for (int t = 0; t < kDimsPerLane; ++t) acc[r][t] *= corr[r];
    for (int jj = 0; jj < kBK; ++jj) {
      T vv[kDimsPerLane];
      lane_dims(sV + jj * ldk, lane, D, vv);
      #pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const T pj = __shfl_sync(0xffffffffu, pr[r], jj);
        #pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) acc[r][t] += pj * vv[t];
      }
    }
  }
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + row0 + r;
    if (i >= p.t2) continue;
    const bool any = l[r] > T(0);
    const T inv = any ? T(1) / l[r] : T(0);
    #pragma unroll
    for (int t = 0; t < kDimsPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < D) out[(bh * p.t2 + i) * p.D + d] = any ? acc[r][t] * inv : T(0);
    }
    if (lane == 0) lse[bh * p.t2 + i] = any ? m[r] + dlog(l[r]) : neg_inf<T>();
  }
}

template <class T>
void forward(const FlashArgs& a, void* out, void* lse) {
  if (a.B * a.H == 0 || a.t2 == 0) return;
  const Plan pl = make_plan<T>(a);
  const Params<T> p = params<T>(a, pl, cached_upload(pl.lo, a.device), cached_upload(pl.hi, a.device));
  const dim3 grid(static_cast<unsigned>(pl.lo.size()), static_cast<unsigned>(a.B * a.H));
  auto launch = [&](auto kernel) {
    RG_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(pl.smem_fwd)),
                  kOp);
    kernel<<<grid, kThreads, pl.smem_fwd>>>(p, static_cast<T*>(out), static_cast<T*>(lse));
    RG_CUDA_CHECK_LAUNCH(kOp);
  };
  if (use_vec<T>(a.D)) launch(flash_fwd_kernel<T, true>);
  else launch(flash_fwd_kernel<T, false>);
}

}  // namespace
}  // namespace flash

void flash_attention_forward(const FlashArgs& a, void* out, void* lse) {
  DeviceGuard guard(a.device, flash::kOp);
  if (a.dtype == DType::Float32) flash::forward<float>(a, out, lse);
  else if (a.dtype == DType::Float64) flash::forward<double>(a, out, lse);
  else throw DTypeError(detail::concat("[", flash::kOp, "] expected float32 or float64, got ", dtype_name(a.dtype)));
}

}  // namespace relgrad::cuda
