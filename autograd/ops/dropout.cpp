// Dropout (inverted): while training, element i of x (in row-major order of its shape) is kept iff
// the Philox uniform u(seed, offset, i) >= p, and kept elements are scaled by 1/(1-p) so the expected
// value is unchanged. One draw takes one offset from the generator (core/rng.h), so the mask depends
// only on the seed and on the draws before it: the same on any thread count, and the same mask
// rand() would give for that generator state (keep iff rand >= p). On CUDA the same loop runs as a
// kernel (cuda/random.h) on the same Philox stream: the mask equals the CPU's bit for bit.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/base/philox.h"
#include "cuda/random.h"

namespace relgrad {

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  const char* op = "dropout";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  RG_CHECK(p >= 0.0 && p <= 1.0, op, "p must be in [0, 1], got ", p, " (x ", shape_str(x.shape()), ")");
  dispatch_float(x.dtype(), op, [](auto) {});  // DTypeError for int and bool tensors, in every mode
  if (!training || p == 0.0) return x;

  // mask (x's shape, contiguous) = keep ? 1/(1-p) : 0; out = keep ? x/(1-p) : 0. Written as a select,
  // not x * mask, so that p = 1 gives exact zeros even where x is inf or NaN.
  const bool drop_all = p == 1.0;  // nothing random to draw: every element is dropped
  Generator& gen = generator ? *generator : default_generator();
  const uint64_t seed = gen.seed(), offset = drop_all ? 0 : gen.next_offset();
  // A row shard (data parallelism, core/rng.h): element i is element base + i of the whole batch.
  RG_CHECK(gen.shard_rows() == 0 || x.numel() % gen.shard_rows() == 0, op, "x ", shape_str(x.shape()),
           " is not batch-major for the generator's row shard of ", gen.shard_rows(), " rows");
  const uint64_t base = gen.element_base(x.numel());
  Tensor xc = x.detach().contiguous();
  Tensor out = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  Tensor mask = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  if (x.device().is_cuda()) {
    cuda::dropout_forward(x.dtype(), xc.raw_data(), out.raw_data(), mask.raw_data(), x.numel(), seed, offset, base, p,
                          drop_all ? 0.0 : 1.0 / (1.0 - p), drop_all, x.device().index);
  } else {
    dispatch_float(x.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      const T scale = drop_all ? T(0) : static_cast<T>(1.0 / (1.0 - p));
      const T* xp = xc.data_ptr<T>();
      T* op_ = out.data_ptr<T>();
      T* mp = mask.data_ptr<T>();
      const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) {
        bool keep = false;
        if (!drop_all) {
          philox::Block b = philox::draw(seed, offset, base + static_cast<uint64_t>(i));
          keep = philox::uniform(b.x[0], b.x[1]) >= p;
        }
        mp[i] = keep ? scale : T(0);
        op_[i] = keep ? xp[i] * scale : T(0);
      }
    });
  }
  if (!needs_grad({x})) return out;
  // Saves the scaled mask, the only thing the backward needs: d out / d x = mask.
  return record(out, op, {x}, [mask = SavedTensor(mask)](const Tensor& g) -> TensorList { return {mul(g, mask.get())}; });
}

}  // namespace relgrad
