// Dropout (inverted): while training, element i of x (in row-major order of its shape) is kept iff
// the Philox uniform u(seed, offset, i) >= p, and kept elements are scaled by 1/(1-p) so the expected
// value is unchanged. One draw takes one offset from the generator (core/rng.h), so the mask depends
// only on the seed and on the draws before it: the same on any thread count, and the same mask
// rand() would give for that generator state (keep iff rand >= p). The backend (core/backend/random.h)
// runs the same loop on the CPU or as a CUDA kernel: the mask is the same bit for bit.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/random.h"

namespace relgrad {

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  const char* op = "dropout";
  RG_PROFILE_OP(op);
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
  backend::DropoutForward f = backend::dropout_forward(x.detach().contiguous(), p, drop_all, seed, offset, base);
  Tensor out = f.out;
  if (!needs_grad({x})) return out;
  // Saves the scaled mask, the only thing the backward needs: d out / d x = mask.
  return record(out, op, {x}, [mask = SavedTensor(f.mask)](const Tensor& g) -> TensorList { return {mul(g, mask.get())}; });
}

}  // namespace relgrad
