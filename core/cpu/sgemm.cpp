#include "core/cpu/sgemm.h"

// GCC 12's AVX-512 intrinsics pass a self-initialised placeholder (`__Y = __Y`) as the unused
// merge source of unpack/shuffle, which -Wmaybe-uninitialized reports (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "core/cpu/sgemm_simd.h"
#ifdef RELGRAD_SGEMM_SIMD
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <new>
#include <utility>
#endif

#include "core/base/error.h"

namespace relgrad::cpu {

#ifdef RELGRAD_SGEMM_SIMD

namespace {

using simd::first_lanes;
using simd::kLanes;
using simd::kMR;  // rows of C per micro-tile (core/cpu/sgemm_simd.h): 12 on AVX-512, 6 on AVX2
using simd::Mask;
using simd::Vec;
constexpr int kNR = 2 * kLanes;  // columns of C per micro-tile: two vectors (32 on AVX-512, 16 on AVX2)
// k's blocking (k_block): a k up to kOneBlock is one block, a longer one is cut into blocks of at most
// kKC. Each block ends in a pass that reads and writes C's tile again, which at k = 768-1,024 cost 5-10 %
// (bench, 1 thread, a Linear's 4,096 × 1,024 × 256 forward and dX products: 91-95 GFLOP/s in blocks of
// 256, 100-106 in one), while a weight's gradient (k = the batch's 2,048-4,096 tokens) was 2-4 % faster
// in blocks of 256 than of 1,024. One block of 1,024 packs B panels of 128 KiB, which the micro-kernel
// reads from L2 (at 256, 32 KiB, from L1) at about 7 bytes a cycle, well within what L2 gives.
constexpr int64_t kOneBlock = 1024;
constexpr int64_t kKC = 256;
// Columns of B packed at once: up to kNC, so kb × kNC floats, 2-8 MiB, in L3 (each panel of it meets a
// block of A's rows, and A, packed per block of B, is packed once where m ≤ kNC; bench: 512 columns,
// which fit L2, were 0.92× on a Linear's dW of 1,024 columns, and 0.92-1.03× at k = 768-1,024).
constexpr int64_t kNC = 2048;
// A block of A's rows is packed (pack_a) where it meets at least this many columns of B, else read in
// place (AVX-512 bench: Q·Kᵀ's 256 columns 1.08×, the feed-forward's down projection 1.09×; dV's 64
// columns 0.9×, W0's 16: 0.8×).
constexpr int64_t kPackAColumns = 128;
// A product of at most this many rows reads a row-major B in place rather than packing it
// (Product::b_read_in_place; AVX2 bench, 1 thread, products one after another: 17 rows 1.30×, 32 rows
// 1.11×, 48 rows 1.06×, 64 rows 0.95×, 256 rows 0.85×).
constexpr int64_t kBInPlaceRows = 48;

// 64-byte aligned buffer that only grows: the packed B (or A) of the calling thread.
class Scratch {
 public:
  ~Scratch() { std::free(p_); }
  float* get(int64_t floats) {
    const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + 63) / 64 * 64;
    if (bytes > cap_) {
      std::free(p_);
      p_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!p_) {
        cap_ = 0;
        throw std::bad_alloc();
      }
      cap_ = bytes;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t cap_ = 0;
};

thread_local Scratch b_scratch, a_scratch;

// Packs B (k, m), element (p, j) at b[p·ps + j·js] with one of ps, js equal to 1, into
// ceil(m / kNR) panels of (k, kNR), row-major, one after another from dst; columns past m are zero.
// B is read in its own storage order (whole rows, or kLanes columns at a time), so every cache line it
// touches is used at once; it is often cold (a fresh activation), hence the prefetches.
void pack_b(const float* b, int64_t ps, int64_t js, float* dst, int64_t k, int64_t m) {
  const int64_t panels = (m + kNR - 1) / kNR, panel_size = k * kNR;
  if (js == 1) {  // rows of B are contiguous: copy each row across all panels
    for (int64_t p = 0; p < k; ++p) {
      if (p + 4 < k)
        for (int64_t j = 0; j < m; j += 16) __builtin_prefetch(b + (p + 4) * ps + j, 0, 3);  // a line each
      for (int64_t j = 0; j < panels * kNR; j += kLanes)
        simd::store(dst + (j / kNR) * panel_size + p * kNR + j % kNR,
                        simd::load_masked(first_lanes(m - j), b + p * ps + j));
    }
    return;
  }
  // columns of B are contiguous (ps == 1): transpose kLanes × kLanes blocks
  for (int64_t j = 0; j < panels * kNR; j += kLanes) {
    const int64_t jn = std::min<int64_t>(kLanes, m - j);  // may be ≤ 0: a block of zero padding
    float* out = dst + (j / kNR) * panel_size + j % kNR;
    for (int64_t p0 = 0; p0 < k; p0 += kLanes) {
      const Mask mk = first_lanes(k - p0);
      if (p0 + 32 < k)
        for (int64_t i = 0; i < jn; ++i) __builtin_prefetch(b + (j + i) * js + p0 + 32, 0, 3);
      Vec r[kLanes];
      for (int64_t i = 0; i < kLanes; ++i)
        r[i] = i < jn ? simd::load_masked(mk, b + (j + i) * js + p0) : simd::zero();
      simd::transpose(r);
      for (int64_t p = 0; p < std::min<int64_t>(kLanes, k - p0); ++p) simd::store(out + (p0 + p) * kNR, r[p]);
    }
  }
}

// Packs rows [0, rows) of A, element (i, p) at a[i·qs + p·ps] with one of qs, ps equal to 1, over
// p in [0, kb) into micro-panels of kMR rows: panel t holds at p·kMR, for each p, its rows side by side
// (a last panel's missing rows are left unset: its tail tile never reads them). Each p's store may
// run kLanes - kMR floats past its kMR (simd::store_panel), into the next p's place, written after
// it, or past the buffer's end: dst has kLanes floats to spare (a_buffer). Read in place, the
// micro-kernel's kMR rows at one p lie a whole row (or column) apart; packed, each of its steps reads
// one line (bench: 1.04-1.08× on W1's Linear and Q·Kᵀ products, the packing included, against
// copying row-major rows densely instead of transposing them).
void pack_a(const float* a, int64_t qs, int64_t ps, float* dst, int64_t rows, int64_t kb) {
  for (int64_t r0 = 0; r0 < rows; r0 += kMR) {
    const int64_t rn = std::min<int64_t>(kMR, rows - r0);
    float* out = dst + r0 * kb;
    if (qs == 1) {  // column-major: the panel's rows are side by side at each p already
      const Mask mk = first_lanes(rn);
      for (int64_t p = 0; p < kb; ++p) simd::store_panel(out + p * kMR, simd::load_masked(mk, a + r0 + p * ps));
      continue;
    }
    for (int64_t p0 = 0; p0 < kb; p0 += kLanes) {  // row-major: transpose kLanes × kLanes blocks (rows past rn are zero)
      const Mask mk = first_lanes(kb - p0);
      Vec r[kLanes];
      for (int64_t i = 0; i < kLanes; ++i)
        r[i] = i < rn ? simd::load_masked(mk, a + (r0 + i) * qs + p0) : simd::zero();
      simd::transpose(r);
      for (int64_t p = 0; p < std::min<int64_t>(kLanes, kb - p0); ++p) simd::store_panel(out + (p0 + p) * kMR, r[p]);
    }
  }
}

// One term's row of a B panel: packed (BPacked: kNR floats, aligned, zeros past m), or B's own row
// in place, whose last vector is read under `last` (nothing past the matrix is touched).
template <int NV, bool BPacked>
__attribute__((always_inline)) inline void load_b_row(const float* bp, Mask last, Vec b[NV]) {
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v)
    b[v] = BPacked ? simd::load(bp + kLanes * v) : v + 1 < NV ? simd::loadu(bp + kLanes * v)
                                                               : simd::load_masked(last, bp + kLanes * v);
}

// c (R, kLanes·NV) = alpha · a (R, k) @ b (k, kLanes·NV), or c = cin + that (accumulate: cin is c
// itself, or the values C starts from, rows ldcin apart); the last vector of each row is stored
// under `last`. a is a[r·lda + p] (ARow: A in place, row-major) or a[r + p·lda] (A in place
// column-major, or packed with lda = kMR); b is a packed panel (BPacked, rows kNR apart) or B in place
// (rows ldb apart). The accumulators stay in registers for the whole k block: each element is one
// chain of FMAs over p in order.
template <int R, int NV, bool ARow, bool BPacked>
__attribute__((always_inline)) inline void micro_kernel(int64_t k, const float* __restrict a, int64_t lda,
                                                        const float* __restrict bp, int64_t ldb, float* c, int64_t ldc,
                                                        const float* cin, int64_t ldcin, float alpha, bool accumulate,
                                                        Mask last) {
  const int64_t a_row = ARow ? lda : 1, a_step = ARow ? 1 : lda, b_step = BPacked ? kNR : ldb;
  Vec acc[R][NV];  // p = 0 initialises them (k ≥ 1), which also keeps them out of memory
  {
    Vec b[NV];
    load_b_row<NV, BPacked>(bp, last, b);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Vec x = simd::broadcast(a[r * a_row]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::mul(x, b[v]);
    }
    a += a_step;
    bp += b_step;
  }
  for (int64_t p = 1; p < k; ++p) {
    if (!ARow) __builtin_prefetch(a + 8 * lda, 0, 3);  // rows of A lie lda apart: the prefetcher may not see them
    Vec b[NV];
    load_b_row<NV, BPacked>(bp, last, b);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Vec x = simd::broadcast(a[r * a_row]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fmadd(x, b[v], acc[r][v]);
    }
    a += a_step;
    bp += b_step;
  }
  const Vec va = simd::broadcast(alpha);
  if (accumulate) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int v = 0; v + 1 < NV; ++v)
        simd::storeu(c + r * ldc + kLanes * v,
                         simd::fmadd(acc[r][v], va, simd::loadu(cin + r * ldcin + kLanes * v)));
      simd::store_masked(
          c + r * ldc + kLanes * (NV - 1), last,
          simd::fmadd(acc[r][NV - 1], va, simd::load_masked(last, cin + r * ldcin + kLanes * (NV - 1))));
    }
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int v = 0; v + 1 < NV; ++v) simd::storeu(c + r * ldc + kLanes * v, simd::mul(acc[r][v], va));
      simd::store_masked(c + r * ldc + kLanes * (NV - 1), last, simd::mul(acc[r][NV - 1], va));
    }
  }
}

// One B panel (rows ldb apart where read in place) against rows [0, rows) of A: full kMR-row tiles
// inline, then the remainder tile.
using PanelFn = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                         const float*, int64_t, float, bool, Mask);

template <int NV, bool ARow, bool BPacked, int R>
void tail_tile(int64_t k, const float* a, int64_t lda, const float* bp, int64_t ldb, float* c, int64_t ldc,
               const float* cin, int64_t ldcin, float alpha, bool accumulate, Mask last) {
  micro_kernel<R, NV, ARow, BPacked>(k, a, lda, bp, ldb, c, ldc, cin, ldcin, alpha, accumulate, last);
}

template <int NV, bool ARow, bool BPacked, int... R>
void tail(int r, int64_t k, const float* a, int64_t lda, const float* bp, int64_t ldb, float* c, int64_t ldc,
          const float* cin, int64_t ldcin, float alpha, bool accumulate, Mask last, std::integer_sequence<int, R...>) {
  using Fn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, const float*, int64_t,
                      float, bool, Mask);
  constexpr Fn table[] = {tail_tile<NV, ARow, BPacked, R + 1>...};
  table[r - 1](k, a, lda, bp, ldb, c, ldc, cin, ldcin, alpha, accumulate, last);
}

template <int NV, bool ARow, bool BPacked>
void panel(int64_t rows, int64_t k, const float* a, int64_t lda, int64_t a_qs, const float* bp, int64_t ldb, float* c,
           int64_t ldc, const float* cin, int64_t ldcin, float alpha, bool accumulate, Mask last) {
  int64_t i = 0;
  for (; i + kMR <= rows; i += kMR)
    micro_kernel<kMR, NV, ARow, BPacked>(k, a + i * a_qs, lda, bp, ldb, c + i * ldc, ldc, cin + i * ldcin, ldcin, alpha,
                                         accumulate, last);
  if (i < rows)
    tail<NV, ARow, BPacked>(static_cast<int>(rows - i), k, a + i * a_qs, lda, bp, ldb, c + i * ldc, ldc,
                            cin + i * ldcin, ldcin, alpha, accumulate, last, std::make_integer_sequence<int, kMR - 1>{});
}

template <bool BPacked>
PanelFn panel_for(int nv, bool a_row_major) {
  if (a_row_major) return nv == 2 ? panel<2, true, BPacked> : panel<1, true, BPacked>;
  return nv == 2 ? panel<2, false, BPacked> : panel<1, false, BPacked>;
}

PanelFn panel_for(int nv, bool a_row_major, bool b_packed) {
  return b_packed ? panel_for<true>(nv, a_row_major) : panel_for<false>(nv, a_row_major);
}

// k's blocks: one up to kOneBlock, else at most kKC long and as even as possible, so a long k has no
// short last block; the bounds depend on k alone, which keeps every element's arithmetic the same in
// any cut of C (tests/test_sgemm.cpp states this order as a scalar model and checks it bit for bit).
int64_t k_block(int64_t k) {
  if (k <= kOneBlock) return std::max<int64_t>(k, 1);  // k = 0 (an empty sum) never reaches the walk
  const int64_t blocks = (k + kKC - 1) / kKC;
  return (k + blocks - 1) / blocks;
}

// One product's blocking: B in blocks of (kb ≤ kc) × (nc ≤ kNC), each packed into `panels` panels;
// A's rows in blocks of mc. The walk is the same whichever threads do it.
struct Product {
  const float* a;
  const float* b;
  float* c;
  const float* cin;  // where accumulate's first k block reads C's starting values: c, or an init (sgemm.h)
  int64_t lda, ldb, ldc, ldcin, n, k, m;
  bool a_row_major, b_row_major, accumulate;
  float alpha;
  int64_t a_qs, a_ps, b_ps, b_js;  // a(i, p) = a[i·a_qs + p·a_ps], b(p, j) = b[p·b_ps + j·b_js]
  int64_t kc;
  bool b_in_place;  // the micro-kernel reads B's rows where they are (b_read_in_place), not packed

  // b_may_stay: B may be read in place (sgemm_shared packs it for its team, so says false).
  Product(const float* a_, int64_t lda_, bool a_row, const float* b_, int64_t ldb_, bool b_row, float* c_,
          int64_t ldc_, float alpha_, bool accumulate_, int64_t n_, int64_t k_, int64_t m_, const float* c_in,
          int64_t ldc_in, bool b_may_stay = true)
      : a(a_), b(b_), c(c_), cin(c_in ? c_in : c_), lda(lda_), ldb(ldb_), ldc(ldc_), ldcin(c_in ? ldc_in : ldc_), n(n_),
        k(k_), m(m_), a_row_major(a_row), b_row_major(b_row), accumulate(accumulate_), alpha(alpha_),
        a_qs(a_row ? lda_ : 1), a_ps(a_row ? 1 : lda_),
        b_ps(b_row ? ldb_ : 1), b_js(b_row ? 1 : ldb_), kc(k_block(k_)),
        b_in_place(b_may_stay && b_read_in_place(b_row, n_)) {}

  // Packing B costs a pass over it, which pays where each panel meets many tiles of A's rows. A
  // product of few rows (attention's per-head products of short sequences, 17 × 16 × 17 in the main
  // job) reads B in place instead where its rows are contiguous: the same values in the same order.
  static bool b_read_in_place(bool b_row_major, int64_t n) { return b_row_major && n <= kBInPlaceRows; }

  // Where the micro-kernel reads panel jp of the B block at (p0, j0), terms from klo on, and the
  // distance between its rows: bp's packed panels, or B itself.
  std::pair<const float*, int64_t> b_panel(const float* bp, int64_t p0, int64_t j0, int64_t kb, int64_t jp,
                                           int64_t klo) const {
    if (b_in_place) return {b + (p0 + klo) * b_ps + j0 + jp * kNR, b_ps};
    return {bp + jp * kb * kNR + klo * kNR, kNR};
  }

  // Room for pack_a's panels of `rows` rows and kb terms: whole panels, and kLanes floats to spare.
  static float* a_buffer(int64_t rows, int64_t kb) { return a_scratch.get((rows + kMR - 1) / kMR * kMR * kb + kLanes); }

  float* b_buffer() const { return b_scratch.get((std::min(m, kNC) + kNR - 1) / kNR * kNR * kc); }

  // Panels [q0, q1) of the B block at (p0, j0), kb × nc, into bp.
  void pack_panels(float* bp, int64_t p0, int64_t j0, int64_t kb, int64_t nc, int64_t q0, int64_t q1) const {
    const int64_t cols = std::min(q1 * kNR, nc) - q0 * kNR;
    pack_b(b + p0 * b_ps + (j0 + q0 * kNR) * b_js, b_ps, b_js, bp + q0 * kb * kNR, kb, cols);
  }

  // Rows [i0, i0 + rows) of C against panels [q0, q1) of the packed B block at (p0, j0), kb × nc.
  void rows_block(const float* bp, int64_t p0, int64_t j0, int64_t kb, int64_t nc, int64_t i0, int64_t rows, int64_t q0,
                  int64_t q1) const {
    const float* ab = a + i0 * a_qs + p0 * a_ps;
    int64_t ab_ld = lda, ab_qs = a_qs;
    bool ab_rows = a_row_major;
    // Packing A costs a pass over each block of it; it pays where the block meets kPackAColumns of B
    // or more. Packed or not, the arithmetic is the same.
    if ((q1 - q0) * kNR >= kPackAColumns) {
      float* packed = a_buffer(rows, kb);
      pack_a(ab, a_qs, a_ps, packed, rows, kb);
      ab = packed, ab_ld = kMR, ab_qs = kb, ab_rows = false;  // micro-panels kMR·kb apart
    }
    const bool add = accumulate || p0 > 0;  // later k blocks add to what the earlier ones stored
    for (int64_t jp = q0; jp < q1; ++jp) {
      const int64_t cols = std::min<int64_t>(kNR, nc - jp * kNR);
      const int nv = cols > kLanes ? 2 : 1;
      const Mask last = first_lanes(cols - kLanes * (nv - 1));
      const auto [src, ld_src] = start(p0, i0, j0 + jp * kNR);
      const auto [bq, ldbq] = b_panel(bp, p0, j0, kb, jp, 0);
      panel_for(nv, ab_rows, !b_in_place)(rows, kb, ab, ab_ld, ab_qs, bq, ldbq, c + i0 * ldc + j0 + jp * kNR, ldc,
                                          src, ld_src, alpha, add, last);
    }
  }

  // Where block p0's sums for C's element (i, j) onwards add to: the first block to cin (C itself or
  // the init), later ones to what the earlier blocks stored in C.
  std::pair<const float*, int64_t> start(int64_t p0, int64_t i, int64_t j) const {
    return p0 == 0 ? std::pair(cin + i * ldcin + j, ldcin) : std::pair<const float*, int64_t>(c + i * ldc + j, ldc);
  }

  // rows_block for sgemm_window: each micro-tile of rows [i0, i0 + rows) gets its own range of terms
  // (Left, LeftTransposed) or of B panels (Output) from the window, and packs only its terms of A,
  // with zeros where X is outside the window.
  void rows_block_window(const float* bp, int64_t p0, int64_t j0, int64_t kb, int64_t nc, int64_t i0, int64_t rows,
                         const GemmWindow& w) const {
    float* packed = a_buffer(rows, kb);
    const bool add = accumulate || p0 > 0;
    for (int64_t t0 = 0; t0 < rows; t0 += kMR) {
      const int64_t rn = std::min<int64_t>(kMR, rows - t0), r0 = i0 + t0;
      int64_t klo = 0, khi = k, clo = 0, chi = m;  // the tile's terms and columns, absolute
      const int64_t* lo = w.on == WindowOn::LeftTransposed ? w.col_lo : w.lo;
      const int64_t* hi = w.on == WindowOn::LeftTransposed ? w.col_hi : w.hi;
      int64_t wlo = lo[r0], whi = hi[r0];
      for (int64_t r = r0 + 1; r < r0 + rn; ++r) wlo = std::min(wlo, lo[r]), whi = std::max(whi, hi[r]);
      if (w.on == WindowOn::Output) clo = wlo, chi = whi;
      else klo = wlo, khi = whi;
      klo = std::clamp<int64_t>(klo - p0, 0, kb), khi = std::clamp<int64_t>(khi - p0, 0, kb);
      const int64_t q_lo = std::max<int64_t>(0, clo - j0) / kNR;
      const int64_t q_hi = chi <= j0 ? 0 : (std::min(nc, chi - j0) + kNR - 1) / kNR;
      if (q_lo >= q_hi) continue;
      // A's tile: in place where its entries outside the window are zeros already (attention's masked
      // weights and their gradients are) and it meets few B panels, as sgemm reads it; else packed
      // (where it is not clean, with zeros put in). The same values either way.
      const bool clean = klo >= khi || w.on == WindowOn::Output || outside_is_zero(w, r0, rn, p0, klo, khi);
      const float* at = a + r0 * a_qs + (p0 + klo) * a_ps;
      int64_t at_ld = lda;
      bool at_rows = a_row_major;
      if (klo < khi && (!clean || (q_hi - q_lo) * kNR >= kPackAColumns)) {
        float* ap = packed + t0 * kb;
        pack_a(at, a_qs, a_ps, ap + klo * kMR, rn, khi - klo);
        if (!clean) zero_outside(ap, w, r0, rn, p0, klo, khi);
        at = ap + klo * kMR, at_ld = kMR, at_rows = false;
      }
      for (int64_t jp = q_lo; jp < q_hi; ++jp) {
        const int64_t cols = std::min<int64_t>(kNR, nc - jp * kNR);
        float* ct = c + r0 * ldc + j0 + jp * kNR;
        const auto [src, ld_src] = start(p0, r0, j0 + jp * kNR);
        if (klo >= khi) {  // no term in this block: C keeps its starting values (zeros, or cin's)
          for (int64_t r = 0; r < rn; ++r)
            if (!add) std::fill(ct + r * ldc, ct + r * ldc + cols, 0.0f);
            else if (src != ct) std::copy(src + r * ld_src, src + r * ld_src + cols, ct + r * ldc);
          continue;
        }
        const int nv = cols > kLanes ? 2 : 1;
        const auto [bq, ldbq] = b_panel(bp, p0, j0, kb, jp, klo);
        panel_for(nv, at_rows, !b_in_place)(rn, khi - klo, at, at_ld, 0, bq, ldbq, ct, ldc, src, ld_src, alpha, add,
                                            first_lanes(cols - kLanes * (nv - 1)));
      }
    }
  }

  // True when A's entries of the tile (C's rows [r0, r0 + rn), terms [klo, khi) of block p0) that lie
  // outside the window are all zero: then reading them adds nothing.
  bool outside_is_zero(const GemmWindow& w, int64_t r0, int64_t rn, int64_t p0, int64_t klo, int64_t khi) const {
    auto at = [&](int64_t t, int64_t p) { return a[(r0 + t) * a_qs + (p0 + p) * a_ps]; };
    if (w.on == WindowOn::Left) {
      for (int64_t t = 0; t < rn; ++t) {
        const int64_t keep_lo = std::clamp<int64_t>(w.lo[r0 + t] - p0, klo, khi);
        const int64_t keep_hi = std::clamp<int64_t>(w.hi[r0 + t] - p0, keep_lo, khi);
        for (int64_t p = klo; p < keep_lo; ++p)
          if (at(t, p) != 0.0f) return false;
        for (int64_t p = keep_hi; p < khi; ++p)
          if (at(t, p) != 0.0f) return false;
      }
      return true;
    }
    for (int64_t p = klo; p < khi; ++p) {
      const int64_t xlo = w.lo[p0 + p], xhi = w.hi[p0 + p];
      if (xlo <= r0 && xhi >= r0 + rn) continue;
      for (int64_t t = 0; t < rn; ++t)
        if ((r0 + t < xlo || r0 + t >= xhi) && at(t, p) != 0.0f) return false;
    }
    return true;
  }

  // Zeros in the packed micro-panel ap (terms p of block p0 at ap[p·kMR + lane]) where X is outside the
  // window, over the tile's terms [klo, khi): lane t is C's row r0 + t.
  static void zero_outside(float* ap, const GemmWindow& w, int64_t r0, int64_t rn, int64_t p0, int64_t klo,
                           int64_t khi) {
    if (w.on == WindowOn::Left) {  // X = A: row r keeps terms [lo[r], hi[r])
      for (int64_t t = 0; t < rn; ++t) {
        const int64_t keep_lo = std::clamp<int64_t>(w.lo[r0 + t] - p0, klo, khi);
        const int64_t keep_hi = std::clamp<int64_t>(w.hi[r0 + t] - p0, keep_lo, khi);
        for (int64_t p = klo; p < keep_lo; ++p) ap[p * kMR + t] = 0.0f;
        for (int64_t p = keep_hi; p < khi; ++p) ap[p * kMR + t] = 0.0f;
      }
      return;
    }
    for (int64_t p = klo; p < khi; ++p) {  // X = Aᵀ: term p is X's row p0 + p, which keeps columns [lo, hi)
      const int64_t xlo = w.lo[p0 + p], xhi = w.hi[p0 + p];
      if (xlo <= r0 && xhi >= r0 + rn) continue;  // the whole tile inside
      for (int64_t t = 0; t < rn; ++t)
        if (r0 + t < xlo || r0 + t >= xhi) ap[p * kMR + t] = 0.0f;
    }
  }

  // Rows of A per block: ≈ 64 KiB, so that a block stays in L2 while each B panel meets all its rows.
  static int64_t row_block(int64_t kb) { return std::max<int64_t>(kMR, (16384 / kb + kMR - 1) / kMR * kMR); }

  // One calling thread's walk (sgemm, sgemm_window): for each block of B, packed whole into the
  // thread's buffer, each block of A's rows, handed to `rows` (bp, p0, j0, kb, nc, i0, rows).
  template <class Rows>
  void walk(Rows&& rows) const {
    float* bp = b_in_place ? nullptr : b_buffer();
    for (int64_t j0 = 0; j0 < m; j0 += kNC)
      for (int64_t p0 = 0; p0 < k; p0 += kc) {
        const int64_t nc = std::min(kNC, m - j0), kb = std::min(kc, k - p0), mc = row_block(kb);
        if (!b_in_place) pack_panels(bp, p0, j0, kb, nc, 0, (nc + kNR - 1) / kNR);
        for (int64_t i0 = 0; i0 < n; i0 += mc) rows(bp, p0, j0, kb, nc, i0, std::min(mc, n - i0));
      }
  }

  bool trivial() const {  // nothing to multiply: no work, or an empty sum (zeros, or C's starting values)
    if (n > 0 && m > 0 && k > 0) return false;
    for (int64_t i = 0; i < n && m > 0; ++i)
      if (!accumulate) std::fill(c + i * ldc, c + i * ldc + m, 0.0f);
      else if (cin != c) std::copy(cin + i * ldcin, cin + i * ldcin + m, c + i * ldc);
    return true;
  }
};

}  // namespace

bool sgemm_available() { return true; }

std::string sgemm_kernel() {
  return std::string("relgrad ") + simd::kIsa + ", " + std::to_string(kMR) + "x" + std::to_string(kNR) +
         " tiles, k in one block up to " + std::to_string(kOneBlock) + ", else blocks of " + std::to_string(kKC);
}

void sgemm(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major, float* c,
           int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m, const float* c_in,
           int64_t ldc_in) {
  const Product P(a, lda, a_row_major, b, ldb, b_row_major, c, ldc, alpha, accumulate, n, k, m, c_in, ldc_in);
  if (P.trivial()) return;
  P.walk([&](const float* bp, int64_t p0, int64_t j0, int64_t kb, int64_t nc, int64_t i0, int64_t rows) {
    P.rows_block(bp, p0, j0, kb, nc, i0, rows, 0, (nc + kNR - 1) / kNR);
  });
}

void sgemm_window(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major,
                  float* c, int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m,
                  const GemmWindow& window, const float* c_in, int64_t ldc_in) {
  const Product P(a, lda, a_row_major, b, ldb, b_row_major, c, ldc, alpha, accumulate, n, k, m, c_in, ldc_in);
  if (P.trivial()) return;
  P.walk([&](const float* bp, int64_t p0, int64_t j0, int64_t kb, int64_t nc, int64_t i0, int64_t rows) {
    P.rows_block_window(bp, p0, j0, kb, nc, i0, rows, window);
  });
}

void sgemm_shared(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major,
                  float* c, int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m, int threads,
                  const float* c_in, int64_t ldc_in) {
  const Product P(a, lda, a_row_major, b, ldb, b_row_major, c, ldc, alpha, accumulate, n, k, m, c_in, ldc_in,
                  /*b_may_stay=*/false);  // the team packs B below
  if (P.trivial()) return;
  // All of B packed first, its k blocks one after another, each `panels` panels of kb × kNR: one pass by
  // the team and one barrier (a barrier per k block cost more than it saved: threads that wait
  // passively sleep at each). Then each task walks all k blocks of its part of C alone.
  const int64_t panels = (m + kNR - 1) / kNR, k_blocks = (k + P.kc - 1) / P.kc;
  float* bp = b_scratch.get(panels * kNR * k);  // the caller's buffer, one for the team
  // Tasks: blocks of A's rows (whole micro-tiles, as even as possible, at least two per thread), and
  // where that leaves fewer than four tasks a thread, groups of at least 4 B panels as well.
  const int64_t micro = (n + kMR - 1) / kMR, mc = Product::row_block(P.kc);
  const int64_t row_tasks = std::min(micro, std::max<int64_t>((n + mc - 1) / mc, 2 * threads));
  const int64_t col_tasks =
      std::clamp<int64_t>((4 * threads + row_tasks - 1) / row_tasks, 1, std::max<int64_t>(1, panels / 4));
  std::exception_ptr error;  // an allocation that failed in a thread, rethrown here
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static) collapse(2)
    for (int64_t kq = 0; kq < k_blocks; ++kq)
      for (int64_t q = 0; q < panels; ++q) {
        const int64_t p0 = kq * P.kc;
        P.pack_panels(bp + p0 * panels * kNR, p0, 0, std::min(P.kc, k - p0), m, q, q + 1);
      }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < row_tasks * col_tasks; ++t) try {
        const int64_t r = t / col_tasks, q = t % col_tasks;
        const int64_t i0 = r * micro / row_tasks * kMR, i1 = std::min(n, (r + 1) * micro / row_tasks * kMR);
        for (int64_t p0 = 0; p0 < k; p0 += P.kc)  // k blocks in order, as sgemm() adds them
          P.rows_block(bp + p0 * panels * kNR, p0, 0, std::min(P.kc, k - p0), m, i0, i1 - i0, q * panels / col_tasks,
                       (q + 1) * panels / col_tasks);
      } catch (...) {
#pragma omp critical(relgrad_sgemm_error)
        if (!error) error = std::current_exception();
      }
  }
  if (error) std::rethrow_exception(error);
}

#else  // neither AVX-512 nor AVX2 with FMA: not offered (core/cpu/gemm_library.cpp asks sgemm_available first)

bool sgemm_available() { return false; }
std::string sgemm_kernel() { return ""; }

void sgemm(const float*, int64_t, bool, const float*, int64_t, bool, float*, int64_t, float, bool, int64_t, int64_t,
           int64_t, const float*, int64_t) {
  throw Error("[gemm] relgrad's sgemm needs AVX-512F or AVX2 with FMA, which this build has neither of");
}
void sgemm_shared(const float*, int64_t, bool, const float*, int64_t, bool, float*, int64_t, float, bool, int64_t,
                  int64_t, int64_t, int, const float*, int64_t) {
  throw Error("[gemm] relgrad's sgemm needs AVX-512F or AVX2 with FMA, which this build has neither of");
}
void sgemm_window(const float*, int64_t, bool, const float*, int64_t, bool, float*, int64_t, float, bool, int64_t,
                  int64_t, int64_t, const GemmWindow&, const float*, int64_t) {
  throw Error("[gemm] relgrad's sgemm needs AVX-512F or AVX2 with FMA, which this build has neither of");
}

#endif

}  // namespace relgrad::cpu
