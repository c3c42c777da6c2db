// The backend seam for random numbers: Philox draws (core/base/philox.h) on the CPU, or the same
// stream drawn by the kernels of cuda/random.h, bit for bit. The caller takes (seed, offset) from its
// Generator (core/rng.h); element i of a draw is a pure function of (seed, offset, i).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace relgrad::backend {

// U[0, 1) (float dtypes), N(0, 1) (float dtypes; drawn on the host and copied, since CUDA's log and
// cos may differ from glibc's by an ulp) and integers in [low, high) (any dtype), of `shape`, on
// options' device; requires_grad is left to the caller.
Tensor uniform(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, const char* op);
Tensor normal(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, const char* op);
Tensor integers(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
                const char* op);

// Inverted dropout of x (contiguous, float): element i kept iff uniform(seed, offset, base + i) >= p
// (never when drop_all); mask (x's shape) = keep ? 1/(1-p) : 0 and out = keep ? x/(1-p) : 0.
struct DropoutForward {
  Tensor out, mask;
};
DropoutForward dropout_forward(const Tensor& x, double p, bool drop_all, uint64_t seed, uint64_t offset,
                               uint64_t base);

}  // namespace relgrad::backend
