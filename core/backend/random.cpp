// Random entries: the CPU loops over the Philox stream live here, beside the calls to their CUDA
// twins (cuda/random.h).
#include "core/backend/random.h"

#include "core/backend/dense.h"
#include "core/base/philox.h"
#include "core/parallel_for.h"
#include "cuda/random.h"

namespace relgrad::backend {

namespace {

// out (shape, on the host) [i] = value(draw(seed, offset, i)), then copied to options' device.
template <class Value>
Tensor draw_on_host(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, const char* op,
                    Value value) {
  Tensor host = empty(shape, TensorOptions(options).device(Device::cpu()).requires_grad(false));
  dispatch_all(options.dtype_, op, [&](auto zero) {
    using T = decltype(zero);
    T* p = host.data_ptr<T>();
    const int64_t n = host.numel();
    parallel_for(n, n > 65536,
                 [&](int64_t i) { p[i] = static_cast<T>(value(philox::draw(seed, offset, static_cast<uint64_t>(i)))); });
  });
  if (options.device_.is_cpu()) return host;
  return copy_as(host, TensorOptions(options.dtype_).device(options.device_));
}

}  // namespace

Tensor uniform(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, const char* op) {
  if (options.device_.is_cuda()) {  // drawn straight into device memory
    Tensor out = empty(shape, options.requires_grad(false));
    cuda::rand_uniform(out.dtype(), out.raw_data(), out.numel(), seed, offset, out.device().index);
    return out;
  }
  return draw_on_host(shape, options, seed, offset, op,
                      [](const philox::Block& b) { return philox::uniform(b.x[0], b.x[1]); });
}

Tensor normal(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, const char* op) {
  return draw_on_host(shape, options, seed, offset, op, [](const philox::Block& b) { return philox::normal(b); });
}

Tensor integers(const Shape& shape, TensorOptions options, uint64_t seed, uint64_t offset, int64_t low, int64_t high,
                const char* op) {
  if (options.device_.is_cuda()) {
    Tensor out = empty(shape, options.requires_grad(false));
    cuda::rand_int(out.dtype(), out.raw_data(), out.numel(), seed, offset, low, high, out.device().index);
    return out;
  }
  const uint64_t range = static_cast<uint64_t>(high - low);
  return draw_on_host(shape, options, seed, offset, op, [=](const philox::Block& b) {
    uint64_t bits = (static_cast<uint64_t>(b.x[0]) << 32) | b.x[1];
    return static_cast<double>(low + static_cast<int64_t>(bits % range));  // modulo bias < range / 2^64
  });
}

DropoutForward dropout_forward(const Tensor& x, double p, bool drop_all, uint64_t seed, uint64_t offset,
                               uint64_t base) {
  DropoutForward f{empty_on(x, x.shape(), x.dtype()), empty_on(x, x.shape(), x.dtype())};
  if (x.device().is_cuda()) {
    cuda::dropout_forward(x.dtype(), x.raw_data(), f.out.raw_data(), f.mask.raw_data(), x.numel(), seed, offset, base,
                          p, drop_all ? 0.0 : 1.0 / (1.0 - p), drop_all, x.device().index);
    return f;
  }
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const T scale = drop_all ? T(0) : static_cast<T>(1.0 / (1.0 - p));
    const T* xp = x.data_ptr<T>();
    T* op_ = f.out.data_ptr<T>();
    T* mp = f.mask.data_ptr<T>();
    const int64_t n = x.numel();
    parallel_for(n, n > 65536, [&](int64_t i) {
      bool keep = false;
      if (!drop_all) {
        philox::Block b = philox::draw(seed, offset, base + static_cast<uint64_t>(i));
        keep = philox::uniform(b.x[0], b.x[1]) >= p;
      }
      mp[i] = keep ? scale : T(0);
      op_[i] = keep ? xp[i] * scale : T(0);
    });
  });
  return f;
}

}  // namespace relgrad::backend
