// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
// counter-based generator. The random numbers of element i of a draw are a pure function of
// (seed, offset, i), so the CPU and CUDA produce the same stream and any element can be computed
// independently (by any thread, in any order).
#pragma once
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define RG_PHILOX_HD __host__ __device__ inline
#else
#define RG_PHILOX_HD inline
#endif

namespace relgrad::philox {

struct Block { uint32_t x[4]; };

RG_PHILOX_HD void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// Ten rounds over counter (c0..c3) with key (k0, k1); constants from the paper.
RG_PHILOX_HD Block philox4x32(Block c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c.x[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, c.x[2], hi1, lo1);
    c = Block{{hi1 ^ c.x[1] ^ k0, lo1, hi0 ^ c.x[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// The four 32-bit words of element `index` of the draw at (seed, offset).
RG_PHILOX_HD Block draw(uint64_t seed, uint64_t offset, uint64_t index) {
  Block c{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(offset),
           static_cast<uint32_t>(offset >> 32)}};
  return philox4x32(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform in [0, 1) with 53 random bits, from two words.
RG_PHILOX_HD double uniform(uint32_t hi, uint32_t lo) {
  uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller from the four words (1 - u keeps the log argument in (0, 1]).
RG_PHILOX_HD double normal(const Block& b) {
  double u1 = 1.0 - uniform(b.x[0], b.x[1]);
  double u2 = uniform(b.x[2], b.x[3]);
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586476925 * u2);
}

}  // namespace relgrad::philox
