// Random factories from the counter-based Philox stream (core/base/philox.h). Element i of a draw
// is a pure function of (seed, offset, i): the same numbers on every thread count and on every
// device (core/backend/random.h draws rand and randint on the GPU directly, bitwise the CPU's
// numbers; randn on the host, then copies).
#include "autograd/ops.h"
#include "core/backend/random.h"

namespace relgrad {

namespace {
// One draw takes one offset from the generator (the default one when null).
template <class Draw>
Tensor draw(TensorOptions options, Generator* generator, Draw f) {
  Generator& gen = generator ? *generator : default_generator();
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = f(seed, offset);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
  RG_CHECK_T(DTypeError, is_floating(options.dtype_), "rand", "dtype must be floating, got ", dtype_name(options.dtype_));
  return draw(options, generator, [&](uint64_t seed, uint64_t offset) {
    return backend::uniform(shape, options, seed, offset, "rand");
  });
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
  RG_CHECK_T(DTypeError, is_floating(options.dtype_), "randn", "dtype must be floating, got ",
             dtype_name(options.dtype_));
  return draw(options, generator, [&](uint64_t seed, uint64_t offset) {
    return backend::normal(shape, options, seed, offset, "randn");
  });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* generator) {
  RG_CHECK(high > low, "randint", "empty range [", low, ", ", high, ")");
  return draw(options, generator, [&](uint64_t seed, uint64_t offset) {
    return backend::integers(shape, options, seed, offset, low, high, "randint");
  });
}

}  // namespace relgrad
