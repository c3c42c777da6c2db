// The two 16-bit floating formats, as storage: BFloat16 (1 sign, 8 exponent, 7 mantissa bits: float32's
// range, 8 significant bits) and Float16 (IEEE binary16: 5 exponent, 10 mantissa bits, largest finite
// 65504). Arithmetic is never done in them: a value is widened to float (exactly) and narrowed back
// with round-to-nearest-even, as PyTorch's c10::BFloat16 / c10::Half and the GPU's cvt instructions.
// Host and device (nvcc) code; no relgrad includes.
#pragma once
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define RG_HALF_HD __host__ __device__ inline
#else
#define RG_HALF_HD inline
#endif

namespace relgrad {
namespace half_detail {
RG_HALF_HD uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
RG_HALF_HD float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace half_detail

// float -> bfloat16: the top 16 bits, rounded to nearest, ties to even. A NaN stays a NaN (its top
// payload bits kept, the quiet bit set, so a payload living only in the low bits cannot become inf).
RG_HALF_HD uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = half_detail::bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // a carry into the exponent is right
}
RG_HALF_HD float bf16_bits_to_float(uint16_t b) { return half_detail::float_of(static_cast<uint32_t>(b) << 16); }

// float -> IEEE half, round to nearest even: above 65504 rounds to inf once past the halfway point
// 65520, below 2^-14 to a subnormal (multiples of 2^-24), NaN stays a quiet NaN, the sign always kept.
RG_HALF_HD uint16_t float_to_fp16_bits(float f) {
  const uint32_t u = half_detail::bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x38800000u) {  // |f| >= 2^-14: a normal half, or inf
    // Round at bit 13, then move the exponent from float's bias (127) to half's (15).
    const uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    if (r >= (31u << 23)) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  // Subnormal (or zero): 0.5 + |f| has an ulp of 2^-24, the half subnormal step, so the float adder's
  // own round-to-nearest-even leaves the half mantissa in the low bits (1024 = the smallest normal).
  const float t = half_detail::float_of(a) + 0.5f;
  return static_cast<uint16_t>(sign | (half_detail::bits_of(t) - 0x3f000000u));
}
RG_HALF_HD float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return half_detail::float_of(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e == 0) {                                                                 // subnormal, zero
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;            // m · 2^-24, exact
    return sign ? -v : v;
  }
  return half_detail::float_of(sign | ((e + 112u) << 23) | (m << 13));
}

// The element types of the two storage dtypes: converted to and from float, never computed in.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  RG_HALF_HD explicit BFloat16(float f) : bits(float_to_bf16_bits(f)) {}
  RG_HALF_HD operator float() const { return bf16_bits_to_float(bits); }  // NOLINT: widening is exact
};
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  RG_HALF_HD explicit Float16(float f) : bits(float_to_fp16_bits(f)) {}
  RG_HALF_HD operator float() const { return fp16_bits_to_float(bits); }  // NOLINT: widening is exact
};

}  // namespace relgrad
