// exp and erf for float32 on the CPU, as plain arithmetic the compiler vectorises (glibc's expf and
// erff are calls, one element at a time: exp-heavy kernels ran at a quarter of memory speed).
// GCC vectorises them only with -fno-trapping-math (CMakeLists.txt): the selects below make a
// loop's body conditional, and without AVX-512's masks GCC's default -ftrapping-math forbids
// evaluating both arms, so the loop stays scalar (3x slower on an AVX2 processor).
// float64 keeps std::exp / std::erf (the gradient checks run in float64 and see no change), and CUDA
// keeps its own expf / erff: rg_exp and rg_erf pick per type and per compiler.
//
// Every element goes through the same operations (std::fma, selects, no table lookups), so a
// value's result does not depend on whether it landed in a vector lane or in the scalar tail, on
// its address or on the thread count: results stay bit-reproducible.
//
// Accuracy (tests/test_fused.cpp sweeps exp over [−87, 88.7] in relative steps of 1e-5 and erf over
// [−6, 6] in steps of 1/4096): exp ≤ 1 ulp on [−87, 88.7], 0 below −87 (results under 1.6e-38 are
// flushed to zero), inf above; erf within 5e-7 absolute (a few ulp near ±1) — both far inside the
// float32 golden tolerance.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>


#ifndef RG_HD
#ifdef __CUDACC__
#define RG_HD __host__ __device__ inline
#else
#define RG_HD inline
#endif
#endif
// Forced inline: called from inside kernel loops, these must be inlined there to vectorise (GCC
// otherwise keeps fast_expf out of line in the bigger kernels, one call per element).
#if defined(__GNUC__) || defined(__clang__)
#define RG_FORCE_INLINE inline __attribute__((always_inline))
#else
#define RG_FORCE_INLINE inline
#endif

#ifdef __CUDACC__
#define RG_HD_FORCE_INLINE __host__ __device__ __forceinline__
#else
#define RG_HD_FORCE_INLINE RG_FORCE_INLINE
#endif

namespace relgrad::fn {

// exp(x) = 2^n · exp(r), n = round(x / ln 2), r = x − n ln 2 (ln 2 split in two for an exact
// reduction), exp(r) by Cephes' expf polynomial on |r| ≤ ln2/2. 2^n is built in two halves so that
// n = 128 (overflow to inf) needs no special case.
RG_FORCE_INLINE float fast_expf(float x) {
  // Clamped with selects, not fmin/fmax (library calls that block vectorisation).
  // Below −87 the result would be under 1.6e-38, near or in the denormal range, where x86 arithmetic
  // takes a microcode assist of ~100 cycles per operation (a masked softmax row is half such values):
  // those results are flushed to 0 at the end, and the clamp keeps every intermediate normal.
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.8f ? 88.8f : xc;          // exp(88.8) is inf
  // A NaN computes on as 0: converting NaN to int32 (and shifting the result) is undefined behaviour,
  // which UBSan reports (the asan preset, docs/reliability.md). The NaN is returned at the end.
  xc = xc == xc ? xc : 0.0f;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5·2^23)
  float r = std::fma(n, -0.693359375f, xc);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r + 1.0f);
  const int32_t ni = static_cast<int32_t>(n), half = ni / 2;
  const int32_t b1 = (half + 127) << 23, b2 = (ni - half + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  const float y = x < -87.0f ? 0.0f : p * s1 * s2;
  return x == x ? y : x;  // NaN in, NaN out
}

// erf(x) as a rational function x·P(x²)/Q(x²) on [−4, 4] (Eigen's generic_fast_erf_float, MPL-2.0);
// erf is ±1 in float beyond that.
RG_FORCE_INLINE float fast_erff(float x) {
  float xc = x < -4.0f ? -4.0f : x;
  xc = xc > 4.0f ? 4.0f : xc;
  const float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = std::fma(x2, p, 2.77068142495902e-08f);
  p = std::fma(x2, p, -2.10102402082508e-06f);
  p = std::fma(x2, p, -5.69250639462346e-05f);
  p = std::fma(x2, p, -7.34990630326855e-04f);
  p = std::fma(x2, p, -2.95459980854025e-03f);
  p = std::fma(x2, p, -1.60960333262415e-02f);
  float q = -1.45660718464996e-05f;
  q = std::fma(x2, q, -2.13374055278905e-04f);
  q = std::fma(x2, q, -1.68282697438203e-03f);
  q = std::fma(x2, q, -7.37332916720468e-03f);
  q = std::fma(x2, q, -1.42647390514189e-02f);
  const float y = xc * p / q;
  return x == x ? y : x;
}

// The per-type choice used by the functors: fast float versions on the CPU, the standard library
// for double, CUDA's own functions on the device.
RG_HD_FORCE_INLINE float rg_exp(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  return fast_expf(x);
#endif
}
RG_HD_FORCE_INLINE double rg_exp(double x) { return std::exp(x); }
RG_HD_FORCE_INLINE float rg_erf(float x) {
#ifdef __CUDA_ARCH__
  return erff(x);
#else
  return fast_erff(x);
#endif
}
RG_HD_FORCE_INLINE double rg_erf(double x) { return std::erf(x); }

}  // namespace relgrad::fn
