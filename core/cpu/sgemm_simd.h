// The vector operations relgrad's GEMM (core/cpu/sgemm.cpp) is written in, for the widest float32 ISA
// the build has: AVX-512F (16 lanes, 32 registers) or AVX2 with FMA (8 lanes, 16 registers). The kernel
// takes its tile from the width: kMR rows × kNR = 2 vectors of columns, as many accumulators as leave
// room for two B vectors and one broadcast (AVX-512 12 × 32: 24 + 3 of 32 registers; AVX2 6 × 16:
// 12 + 3 of 16). Every element is the same FMA chain on either, so both give the same bits.
//
// A Mask names the first `count` lanes of a vector (first_lanes); load_masked reads them (the other
// lanes are zero and their memory is never touched), store_masked writes only them.
#pragma once
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define RELGRAD_SGEMM_SIMD 1
#endif

namespace relgrad::cpu::simd {

#if defined(__AVX512F__)

inline constexpr int kLanes = 16;
inline constexpr int kMR = 12;  // rows of C per micro-tile
inline constexpr const char* kIsa = "AVX-512";
using Vec = __m512;
using Mask = __mmask16;

inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec load(const float* p) { return _mm512_load_ps(p); }  // p 64-byte aligned
inline Vec loadu(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm512_store_ps(p, v); }  // p 64-byte aligned
inline void storeu(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec broadcast(float x) { return _mm512_set1_ps(x); }
inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }  // a·b + c, one rounding

inline Mask first_lanes(int64_t count) {  // the low min(count, 16) lanes; none when count ≤ 0
  return count >= 16 ? Mask(0xFFFF) : count <= 0 ? Mask(0) : Mask((1u << count) - 1u);
}
inline Vec load_masked(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline void store_masked(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
// Lanes [0, kMR) of v at p (a row of packed A): here exactly those.
inline void store_panel(float* p, Vec v) { _mm512_mask_storeu_ps(p, first_lanes(kMR), v); }

// In-register transpose: r[i] holds row i of a 16×16 block; afterwards r[j] holds column j.
inline void transpose(Vec r[16]) {
  Vec t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  Vec u[16];  // u[4g + j], lane L: rows 4g..4g+3 of column 4L + j
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int j = 0; j < 4; ++j) {
    const Vec v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    const Vec v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const Vec v3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
    r[4 + j] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
  }
}

#elif defined(__AVX2__) && defined(__FMA__)

inline constexpr int kLanes = 8;
inline constexpr int kMR = 6;
inline constexpr const char* kIsa = "AVX2";
using Vec = __m256;
// The lanes as a vector mask, and their count: a full vector takes the plain load or store (a masked
// store costs many cycles on AMD's cores, and the kernel's last column vector is most often full).
struct Mask {
  __m256i lanes;
  int count;
};

inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec load(const float* p) { return _mm256_load_ps(p); }  // p 32-byte aligned
inline Vec loadu(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm256_store_ps(p, v); }  // p 32-byte aligned
inline void storeu(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec broadcast(float x) { return _mm256_set1_ps(x); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }  // a·b + c, one rounding

inline Mask first_lanes(int64_t count) {  // the low min(count, 8) lanes; none when count ≤ 0
  const int n = count >= 8 ? 8 : count <= 0 ? 0 : static_cast<int>(count);
  return {_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), n};
}
inline Vec load_masked(Mask m, const float* p) {
  return m.count == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.lanes);
}
// The first m.count lanes as plain stores of 4, 2 and 1 floats: AMD's cores run vmaskmovps to memory
// as microcode, some 12 cycles or more, where a product of 14 columns (an attention row of 14 keys)
// stores one such partial vector a row.
inline void store_masked(float* p, Mask m, Vec v) {
  if (m.count == 8) return _mm256_storeu_ps(p, v);
  __m128 part = _mm256_castps256_ps128(v);  // lanes 0-3, then 4-7
  int n = m.count;
  if (n >= 4) {
    _mm_storeu_ps(p, part);
    part = _mm256_extractf128_ps(v, 1), p += 4, n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
    part = _mm_movehl_ps(part, part), p += 2, n -= 2;
  }
  if (n == 1) _mm_store_ss(p, part);
}
// Lanes [0, kMR) of v at p (a row of packed A): all 8 lanes are stored, the last two past the row, so
// that packing takes no masked store; the caller's buffer has room (core/cpu/sgemm.cpp, pack_a).
inline void store_panel(float* p, Vec v) { _mm256_storeu_ps(p, v); }

// In-register transpose: r[i] holds row i of an 8×8 block; afterwards r[j] holds column j.
inline void transpose(Vec r[8]) {
  Vec t[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // rows 2i, 2i+1: columns 0,1 | 4,5 interleaved
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // columns 2,3 | 6,7
  }
  Vec u[8];  // u[4h + j]: rows 4h..4h+3 of columns j and 4 + j (one per 128-bit half)
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

#endif

}  // namespace relgrad::cpu::simd
