// Autocast (torch.autocast): a thread-local precision for matrix products. While an AutocastGuard
// with kBFloat16 or kFloat16 is in scope, every float32 matmul / addmm / bmm (so every Linear and the
// composite attention's q·kᵀ and P·V) and the fused attention core take their matrix operands rounded
// to that precision, accumulate in float32 and return float32. Everything else — softmax, norms, the
// loss, the optimizer, the weights themselves — stays float32: the weights are the float32 masters and
// are rounded afresh at every product, as PyTorch's autocast casts them.
//
// The rounding is the tensor cores' contract: a bf16/fp16 product of two 16-bit values is exact in
// float32 and the sum is accumulated in float32. So on the CPU the product is the float32 GEMM of the
// rounded operands, bit for bit what the contract allows (only the order of the float32 sums differs
// from a GPU's). The backward products follow the same rule: the incoming gradient is rounded too
// (on a GPU it is fed to the tensor cores in 16 bits), the saved operands are the float32 ones, rounded
// afresh by the backward's products (the same values), and the gradient reaching a float32 input is
// float32 (the cast's backward casts it back).
// float64 tensors (gradient checks) are never touched.
#pragma once
#include "core/tensor.h"

namespace relgrad {

class Autocast {
 public:
  // kFloat32 = off (the default), else kBFloat16 or kFloat16.
  static DType dtype();
  static void set_dtype(DType dtype);  // throws for any other dtype
};

// RAII: the autocast precision for this scope, the previous one restored on exit.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype) : previous_(Autocast::dtype()) { Autocast::set_dtype(dtype); }
  ~AutocastGuard() { Autocast::set_dtype(previous_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};

// What a product's operand x is rounded to now: Autocast::dtype() for a float32 x, kFloat32 (nothing)
// for any other dtype.
DType autocast_dtype_for(const Tensor& x);

// x (float32) with every value rounded to `low` (kBFloat16 or kFloat16), as a new float32 tensor on
// x's device; x itself when low is kFloat32. Records nothing (a product's operand, not an op).
Tensor round_to(const Tensor& x, DType low);

}  // namespace relgrad
