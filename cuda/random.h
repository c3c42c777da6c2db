// Random draws on the GPU from the same counter-based Philox4x32-10 stream as the CPU
// (core/base/philox.h is compiled for both): element i of a draw at generator state (seed, offset)
// is a pure function of (seed, offset, i), so a GPU draw equals the CPU draw for the same state.
// uniform() is exact double arithmetic on the integer bits, so rand, randint and dropout masks are
// bitwise the same on both devices. (randn uses log and cos, whose CUDA versions may differ from
// glibc's by an ulp; core/backend/random.cpp therefore draws randn on the host and copies it.)
#pragma once
#include <cstdint>

#include "core/base/dtype.h"

namespace relgrad::cuda {

// x (n), contiguous -> out (n), mask (n), both contiguous: keep_i = uniform(draw(seed, offset,
// base + i)) >= p (never when drop_all); mask_i = keep_i ? scale : 0; out_i = keep_i ? x_i * scale : 0.
// float32 / float64 (scale is rounded to the dtype first, as on the CPU).
void dropout_forward(DType dtype, const void* x, void* out, void* mask, int64_t n, uint64_t seed, uint64_t offset,
                     uint64_t base, double p, double scale, bool drop_all, int device);

// out (n), contiguous [i] = uniform in [0, 1) from draw(seed, offset, i); float32 / float64.
void rand_uniform(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t offset, int device);

// out (n), contiguous [i] = low + (bits_i mod (high - low)), bits_i the first two words of draw(seed,
// offset, i), converted through double as the CPU does; any dtype.
void rand_int(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
              int device);

}  // namespace relgrad::cuda
