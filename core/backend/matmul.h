// The backend seam for matrix products: Eigen's GEMM on the CPU (core/cpu/matmul.h), cuBLAS on the
// GPU (cuda/blas.h, planned here). Both read transposed and broadcast operands in place.
#pragma once
#include "core/tensor.h"

namespace relgrad::backend {

// a (a_batch..., n, k) @ b (b_batch..., k, m) → out (batch..., n, m), a fresh contiguous tensor on
// the operands' device, batch = broadcast(a_batch, b_batch) (checked by the caller, like the inner
// dims, the dtypes and the devices). With `init`: out = init + alpha · (a @ b), init broadcast to
// out's shape; without: out = alpha · (a @ b).
// `products` (autocast, autograd/autocast.h): kFloat32 multiplies the operands as they are; kBFloat16
// or kFloat16 (float32 operands only) multiplies them rounded to that precision, exactly, with float32
// sums and a float32 result, as the tensor cores do. On the CPU that is the float32 GEMM of the rounded
// values; on the GPU, cuBLAS's 16-bit GEMM (cuda/blas.h) of 16-bit copies. The two differ only in
// the order of the float32 sums.
// `into` (optional, without init): out written there and returned, as cpu::matmul's (its shape, unit
// column stride, any other strides); on the GPU the product is computed fresh and copied into it.
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const char* op, const Tensor& init = Tensor(),
              double alpha = 1.0, DType products = kFloat32, const Tensor& into = Tensor());

// x (float32) cast to `dtype` (a 16-bit storage dtype, or float32 again): a new tensor on x's device. A
// transposed matrix view (kᵀ, Wᵀ: its last two dims column-major and dense) stays transposed, so a
// GEMM reads the cast as it would read x. round_to (autograd/autocast.h) is two of these casts.
Tensor cast_operand(const Tensor& x, DType dtype);

// TF32 tensor-core math for float32 products on the GPU, as torch.backends.cuda.matmul.allow_tf32
// (off by default; train.tf32 turns it on for a run): ~1e-3 relative error instead of ~1e-6, faster
// GEMMs. Process-wide. No effect on the CPU, whose products are always full float32. The fused
// attention kernels read allow_tf32() too.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace relgrad::backend
