// Shared by cuda/flash_attention_forward.cu and cuda/flash_attention_backward.cu (never included
// from outside cuda/): tile constants, kernel parameters, the device helpers both passes use (window
// staging, logits) and the host-side plan. The entry points are declared in cuda/flash_attention.h.
//
// Fused ("flash") relative attention on the GPU, forward and backward (cuda/flash_attention.h).
// The algorithm is the CPU kernel's (core/cpu/flash_attention.h), tile for tile, which the tests use
// as the oracle: a query tile [i0, i0 + BQ) against a key tile [j0, j0 + BK) reaches the distances
//   δ ∈ [j0 − π_max, j0 + BK − 1 − π_min]       ("the window", BK + π_max − π_min table rows)
// and each (i, j) picks its row of the window at offset j − π(i) − (j0 − π_max): the skew is an
// index, nothing of size (t2, t1) exists. Softmax is online; backward recomputes from lse.
//
// Why it is written this way (FP32/FP64 SIMT, no tensor cores: relgrad keeps TF32 off by default so
// results match the CPU):
//   * one block = 4 warps = one query tile of BQ = 16 rows (4 per warp); a key tile has BK = 32 keys,
//     one per lane, so a warp computes 4 rows × 32 keys of logits with each K row loaded from shared
//     memory once for its 4 rows; row max / sum are warp shuffles (fixed order: deterministic);
//   * the loops are bound by shared-memory loads, so rows are read 16 bytes at a time (float4 /
//     double2) when D is a multiple of 4 vector widths (staged rows padded to D + width), and the
//     P·V and dS·K products read each value / key row once for the warp's 4 rows;
//   * the P·V and dS·K products give each lane the head dims d = lane + 32t (D ≤ kMaxD = 128);
//   * the window's table rows are staged in shared memory when they fit (left/right alignment: 47
//     rows); with explicit positions spread far apart the kernels read the table rows from global
//     memory instead (same arithmetic, slower);
//   * backward has no atomics: dq (+ dqr) per query tile (K1), dk, dv per key tile (K2, accumulated
//     per thread in a fixed query order), the table and bias gradients per distance (K3: one block per
//     (32 distances, head, batch group) walks the query tiles in order with the tile's rows and the
//     keys it reaches staged, cuda/flash_plan.h) folded into table rows by a fixed-order gather (K4).
//     Deterministic run to run; index plans are cached on the device (cached_upload).
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/flash_attention.h"
#include "cuda/flash_plan.h"
#include "cuda/runtime.h"

namespace relgrad::cuda::flash {

constexpr const char* kOp = "flash_relative_attention";
constexpr int kBQ = flash_plan::kBQ, kBK = 32, kRows = 4, kThreads = 128, kMaxD = 128, kDimsPerLane = kMaxD / 32;
constexpr int kMaxWindow = 96;  // table rows staged in shared memory per tile (BK + π span ≤ 96)

template <class T>
struct Params {
  int64_t B, H, t2, t1, D;
  T scale;
  bool causal;
  const int64_t* pos;
  const T *q, *k, *v, *qr, *E;
  int64_t E_heads, R;
  const int64_t* rel_rows;
  const T* bias;
  int64_t bias_heads, Rb;
  const int64_t* bias_rows;
  int64_t min_delta, W;
  const bool* pad;
  const int64_t* tile_lo;  // (number of query tiles) π_min of each BQ tile
  const int64_t* tile_hi;  // π_max
  bool e_smem;             // the window's rows are staged in shared memory
  int win;                 // window capacity in rows (when e_smem)
  int ld;                  // row stride of the staged key, value and table rows (padded: see vec_width)
};

// 16-byte shared-memory loads: four floats or two doubles per load instruction. The tile loops are
// bound by shared-memory loads, not arithmetic; a 16-byte load feeds four (two) multiply-adds of a
// broadcast query row. Used when D is a multiple of 4·width (each of the 4 dim groups of the dk/dv
// sums then starts aligned too); the staged rows are then padded to D + width (rows of consecutive
// lanes fall in distinct bank groups), else to D + 1 with scalar loads.
template <class T>
struct Vec16;
template <>
struct Vec16<float> {
  using V = float4;
  static constexpr int n = 4;
  __device__ static float dot(const float4 a, const float4 b, float s) {
    s += a.x * b.x;
    s += a.y * b.y;
    s += a.z * b.z;
    return s + a.w * b.w;
  }
};
template <>
struct Vec16<double> {
  using V = double2;
  static constexpr int n = 2;
  __device__ static double dot(const double2 a, const double2 b, double s) {
    s += a.x * b.x;
    return s + a.y * b.y;
  }
};
template <class T>
inline bool use_vec(int64_t D) { return D % (4 * Vec16<T>::n) == 0; }
template <class T>
inline int staged_ld(int64_t D) { return static_cast<int>(use_vec<T>(D) ? D + Vec16<T>::n : D + 1); }

// s + Σ_d a[d]·b[d], d in order (the same order and roundings as the scalar loop).
template <class T, bool kVec>
__device__ inline T dot(const T* a, const T* b, int D, T s) {
  if constexpr (kVec) {
    using V = typename Vec16<T>::V;
    for (int d = 0; d < D; d += Vec16<T>::n)
      s = Vec16<T>::dot(*reinterpret_cast<const V*>(a + d), *reinterpret_cast<const V*>(b + d), s);
  } else {
    for (int d = 0; d < D; ++d) s += a[d] * b[d];
  }
  return s;
}

// s[r] += Σ_d A[r·lda + d]·b[d] for the warp's kRows rows: b (this lane's row) is loaded once for all.
template <class T, bool kVec>
__device__ inline void dot_rows(const T* A, int lda, const T* b, int D, T (&s)[kRows]) {
  if constexpr (kVec) {
    using V = typename Vec16<T>::V;
    for (int d = 0; d < D; d += Vec16<T>::n) {
      const V bv = *reinterpret_cast<const V*>(b + d);
      #pragma unroll
      for (int r = 0; r < kRows; ++r) s[r] = Vec16<T>::dot(*reinterpret_cast<const V*>(A + r * lda + d), bv, s[r]);
    }
  } else {
    for (int d = 0; d < D; ++d) {
      const T bd = b[d];
      #pragma unroll
      for (int r = 0; r < kRows; ++r) s[r] += A[r * lda + d] * bd;
    }
  }
}

__device__ inline float dexp(float x) { return expf(x); }
__device__ inline double dexp(double x) { return exp(x); }
__device__ inline float dlog(float x) { return logf(x); }
__device__ inline double dlog(double x) { return log(x); }
template <class T>
__device__ inline T neg_inf() { return -std::numeric_limits<T>::infinity(); }

template <class T>
__device__ inline T warp_max(T x) {
  for (int o = 16; o > 0; o >>= 1) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
template <class T>
__device__ inline T warp_sum(T x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <class T>
__device__ inline bool hidden(const Params<T>& p, int64_t b, int64_t pi, int64_t j) {
  return (p.causal && j > pi) || (p.pad && p.pad[b * p.t1 + j]);
}
__device__ inline int64_t lookup(const int64_t* rows, int64_t min_delta, int64_t W, int64_t delta) {
  const int64_t w = delta - min_delta;
  return rows && w >= 0 && w < W ? rows[w] : -1;
}

// dst (n, ld) ← rows [row0, row0 + n) of src (total, D), zero beyond `total`. All threads of the block.
template <class T>
__device__ void load_rows(T* dst, int ld, const T* src, int64_t row0, int n, int64_t total, int D) {
  for (int e = threadIdx.x; e < n * D; e += blockDim.x) {
    const int r = e / D, d = e % D;
    dst[r * ld + d] = row0 + r < total ? src[(row0 + r) * D + d] : T(0);
  }
}

// The lane's head dims d = lane + 32t of one staged row (0 past D): what the P·V and dS·K products
// read of a value or key row for all the warp's rows at once.
template <class T>
__device__ inline void lane_dims(const T* row, int lane, int D, T (&x)[kDimsPerLane]) {
  #pragma unroll
  for (int t = 0; t < kDimsPerLane; ++t) x[t] = lane + 32 * t < D ? row[lane + 32 * t] : T(0);
}

// The window's table rows, sE (nw, ld) and sEok (nw): δ = dlo + w. All threads of the block.
template <class T>
__device__ void load_window(const Params<T>& p, T* sE, int* sEok, int64_t h, int64_t dlo, int nw) {
  const int ld = p.ld;
  const T* E = p.E + (p.E_heads == 1 ? 0 : h) * p.R * p.D;
  for (int e = threadIdx.x; e < nw * p.D; e += blockDim.x) {
    const int w = e / static_cast<int>(p.D), d = e % static_cast<int>(p.D);
    const int64_t row = lookup(p.rel_rows, p.min_delta, p.W, dlo + w);
    sE[w * ld + d] = row >= 0 ? E[row * p.D + d] : T(0);
    if (d == 0) sEok[w] = row >= 0;
  }
}

// The relative row for (query at π, key j) as a pointer (shared window or global table), or null.
template <class T>
__device__ inline const T* rel_row(const Params<T>& p, const T* sE, const int* sEok, int64_t h, int64_t dlo,
                                   int64_t pi, int64_t j) {
  if (!p.E) return nullptr;
  if (p.e_smem) {
    const int w = static_cast<int>(j - pi - dlo);
    return sEok[w] ? sE + w * p.ld : nullptr;
  }
  const int64_t row = lookup(p.rel_rows, p.min_delta, p.W, j - pi);
  return row >= 0 ? p.E + ((p.E_heads == 1 ? 0 : h) * p.R + row) * p.D : nullptr;
}

// Logits z[r] of the warp's rows (tile rows row0 … row0 + 3) against key j0 + lane; −inf when hidden,
// past t1, or the row is past t2. sQ, sQR (BQ, D); sK (BK, ld).
template <class T, bool kVec>
__device__ void warp_logits(const Params<T>& p, const T* sQ, const T* sQR, const T* sK, const T* sE, const int* sEok,
                            int64_t b, int64_t h, int64_t i0, int row0, int64_t j0, int64_t dlo, T (&z)[kRows]) {
  const int lane = threadIdx.x % 32, D = static_cast<int>(p.D);
  const int64_t j = j0 + lane;
  T s[kRows];
  #pragma unroll
  for (int r = 0; r < kRows; ++r) s[r] = T(0);
  dot_rows<T, kVec>(sQ + row0 * D, D, sK + lane * p.ld, D, s);
  const T* bias = p.bias ? p.bias + (p.bias_heads == 1 ? 0 : h) * p.Rb : nullptr;
  #pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = i0 + row0 + r;
    if (i >= p.t2 || j >= p.t1) {
      z[r] = neg_inf<T>();
      continue;
    }
    const int64_t pi = p.pos[i];
    if (hidden(p, b, pi, j)) {
      z[r] = neg_inf<T>();
      continue;
    }
    if (const T* e = rel_row(p, sE, sEok, h, dlo, pi, j)) {
      // A staged row is aligned for 16-byte loads; a row of the global table may not be.
      s[r] += p.e_smem ? dot<T, kVec>(sQR + (row0 + r) * D, e, D, T(0)) : dot<T, false>(sQR + (row0 + r) * D, e, D, T(0));
    }
    T zz = p.scale * s[r];
    if (bias) {
      const int64_t br = lookup(p.bias_rows, p.min_delta, p.W, j - pi);
      if (br >= 0) zz += bias[br];
    }
    z[r] = zz;
  }
}

// Shared memory of the tile kernels, in T elements: sQ, sQR, sdO (BQ, D); sK, sV (BK, ld);
// sE (win, ld); sP, sG (BQ, BK) (the dk/dv kernel); then int sEok (win). Every piece is a multiple of
// 16 bytes when the vector path runs (D a multiple of 4 widths, ld of one width).
template <class T>
__device__ inline void carve(const Params<T>& p, bool with_dout, T*& sQ, T*& sQR, T*& sdO, T*& sK, T*& sV, T*& sE,
                             int*& sEok, T*& sP, T*& sG) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* s = reinterpret_cast<T*>(smem_raw);
  const int D = static_cast<int>(p.D);
  sQ = s;
  s += kBQ * D;
  sQR = p.E && p.qr != p.q ? s : sQ;
  if (sQR != sQ) s += kBQ * D;
  sdO = s;
  if (with_dout) s += kBQ * D;
  sK = s;
  s += kBK * p.ld;
  sV = s;
  s += kBK * p.ld;
  sE = s;
  if (p.e_smem) s += p.win * p.ld;
  sP = s;
  s += kBQ * kBK;
  sG = s;
  s += kBQ * kBK;
  sEok = reinterpret_cast<int*>(s);
}

// ---- host side --------------------------------------------------------------------------------------

// A device buffer from the caching allocator, freed at scope exit (kernels on the same stream that
// still use it are ordered before any reuse).
class Buffer {
 public:
  Buffer(size_t bytes, int device) : device_(device), ptr_(bytes ? device_malloc(bytes, device) : nullptr) {}
  ~Buffer() {
    if (ptr_) device_free(ptr_, device_);
  }
  Buffer(Buffer&& o) noexcept : device_(o.device_), ptr_(o.ptr_) { o.ptr_ = nullptr; }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  int device_;
  void* ptr_;
};

// A device copy of a small host index array, kept by content (cuda/flash_attention_cache.cu): the
// same plan in a later call (every training step after the first) copies nothing. Valid until 32
// other arrays have been asked for; the caller's DeviceGuard has made `device` current.
const int64_t* cached_upload(const std::vector<int64_t>& host, int device);

struct Plan {
  std::vector<int64_t> lo, hi;  // per query tile
  int64_t span = 0;             // max over tiles of π_max − π_min
  bool e_smem = false;
  int win = 0;
  size_t smem_fwd = 0, smem_bwd = 0;
};

inline int max_smem(int device) {
  int v = 0;
  RG_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), kOp);
  return v;
}

inline int64_t sm_count(int device) {
  int v = 0;
  RG_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device), kOp);
  return v;
}

template <class T>
Plan make_plan(const FlashArgs& a) {
  RG_CHECK_T(ShapeError, a.D <= kMaxD, kOp, "the CUDA kernel supports head sizes up to ", kMaxD, ", got D = ", a.D);
  RG_CHECK_T(ShapeError, a.B * a.H <= 65535, kOp, "the CUDA kernel supports B·H up to 65535, got ", a.B * a.H);
  Plan pl;
  const int64_t tiles = (a.t2 + kBQ - 1) / kBQ;
  pl.lo.resize(static_cast<size_t>(tiles));
  pl.hi.resize(static_cast<size_t>(tiles));
  flash_plan::tile_bounds(a.pos_host, a.t2, pl.lo.data(), pl.hi.data());
  int64_t span = 0;
  for (int64_t t = 0; t < tiles; ++t) span = std::max(span, pl.hi[t] - pl.lo[t]);
  pl.span = span;
  const size_t D = static_cast<size_t>(a.D), base_q = kBQ * D * (a.E && a.qr != a.q ? 2 : 1);
  const size_t ld = static_cast<size_t>(staged_ld<T>(a.D));
  const size_t kv = 2 * kBK * ld, pg = 2 * kBQ * kBK;
  auto bytes = [&](bool with_dout, int win) {
    return (base_q + (with_dout ? kBQ * D : 0) + kv + static_cast<size_t>(win) * ld + pg) * sizeof(T) +
           static_cast<size_t>(win) * sizeof(int);
  };
  const size_t limit = static_cast<size_t>(max_smem(a.device));
  if (a.E && kBK + span <= kMaxWindow && bytes(true, kBK + static_cast<int>(span)) <= limit) {
    pl.e_smem = true;
    pl.win = kBK + static_cast<int>(span);
  }
  pl.smem_fwd = bytes(false, pl.win);
  pl.smem_bwd = bytes(true, pl.win);
  RG_CHECK_T(DeviceError, pl.smem_bwd <= limit, kOp, "needs ", pl.smem_bwd, " bytes of shared memory per block for D = ",
             a.D, ", the device allows ", limit);
  return pl;
}

template <class T>
Params<T> params(const FlashArgs& a, const Plan& pl, const int64_t* lo, const int64_t* hi) {
  Params<T> p;
  p.B = a.B, p.H = a.H, p.t2 = a.t2, p.t1 = a.t1, p.D = a.D, p.scale = static_cast<T>(a.scale), p.causal = a.causal;
  p.pos = a.pos;
  p.q = static_cast<const T*>(a.q), p.k = static_cast<const T*>(a.k), p.v = static_cast<const T*>(a.v);
  p.qr = static_cast<const T*>(a.qr ? a.qr : a.q);
  p.E = static_cast<const T*>(a.E), p.E_heads = a.E_heads, p.R = a.R, p.rel_rows = a.E ? a.rel_rows : nullptr;
  p.bias = static_cast<const T*>(a.bias), p.bias_heads = a.bias_heads, p.Rb = a.Rb;
  p.bias_rows = a.bias ? a.bias_rows : nullptr;
  p.min_delta = a.min_delta, p.W = a.W, p.pad = a.pad;
  p.tile_lo = lo, p.tile_hi = hi, p.e_smem = pl.e_smem, p.win = pl.win, p.ld = staged_ld<T>(a.D);
  return p;
}

}  // namespace relgrad::cuda::flash
