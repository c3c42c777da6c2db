// Random factories from the counter-based Philox stream (core/base/philox.h). Element i of a draw
// is a pure function of (seed, offset, i): the same numbers on every thread count and, with the
// same formula in cuda/, on the GPU. rand and randint draw on the GPU directly (cuda/random.h, bitwise
// the CPU's numbers); randn draws on the host and copies, because its log and cos in CUDA's libm may
// differ from glibc's by an ulp and the numbers are meant to be the same on every device.
#include "autograd/ops.h"
#include "core/base/philox.h"
#include "cuda/random.h"

namespace relgrad {

namespace {
template <class Value>
Tensor draw(const Shape& shape, TensorOptions options, Generator* generator, const char* op, Value value) {
  Generator& gen = generator ? *generator : default_generator();
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor host = empty(shape, options.device(Device::cpu()).requires_grad(false));
  dispatch_all(options.dtype_, op, [&](auto zero) {
    using T = decltype(zero);
    T* p = host.data_ptr<T>();
    const int64_t n = host.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value(philox::draw(seed, offset, static_cast<uint64_t>(i))));
  });
  Tensor out = options.device_.is_cpu() ? host : host.to(options.device_);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}
// A draw made by a CUDA kernel `fill(out, n, seed, offset)` straight into device memory.
template <class Fill>
Tensor draw_on_device(const Shape& shape, TensorOptions options, Generator* generator, Fill fill) {
  Generator& gen = generator ? *generator : default_generator();
  const uint64_t seed = gen.seed(), offset = gen.next_offset();
  Tensor out = empty(shape, options.requires_grad(false));
  fill(out, seed, offset);
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
  RG_CHECK_T(DTypeError, is_floating(options.dtype_), "rand", "dtype must be floating, got ", dtype_name(options.dtype_));
  if (options.device_.is_cuda())
    return draw_on_device(shape, options, generator, [](const Tensor& out, uint64_t seed, uint64_t offset) {
      cuda::rand_uniform(out.dtype(), out.raw_data(), out.numel(), seed, offset, out.device().index);
    });
  return draw(shape, options, generator, "rand", [](const philox::Block& b) {
    return philox::uniform(b.x[0], b.x[1]);
  });
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
  RG_CHECK_T(DTypeError, is_floating(options.dtype_), "randn", "dtype must be floating, got ",
             dtype_name(options.dtype_));
  return draw(shape, options, generator, "randn", [](const philox::Block& b) { return philox::normal(b); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* generator) {
  RG_CHECK(high > low, "randint", "empty range [", low, ", ", high, ")");
  const uint64_t range = static_cast<uint64_t>(high - low);
  if (options.device_.is_cuda())
    return draw_on_device(shape, options, generator, [=](const Tensor& out, uint64_t seed, uint64_t offset) {
      cuda::rand_int(out.dtype(), out.raw_data(), out.numel(), seed, offset, low, high, out.device().index);
    });
  return draw(shape, options, generator, "randint", [=](const philox::Block& b) {
    uint64_t bits = (static_cast<uint64_t>(b.x[0]) << 32) | b.x[1];
    return static_cast<double>(low + static_cast<int64_t>(bits % range));  // modulo bias < range / 2^64
  });
}

}  // namespace relgrad
