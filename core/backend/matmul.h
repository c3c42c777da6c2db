// The backend seam for matrix products: Eigen's GEMM on the CPU (core/cpu/matmul.h), cuBLAS on the
// GPU (cuda/blas.h, planned here). Both read transposed and broadcast operands in place.
#pragma once
#include "core/tensor.h"

namespace relgrad::backend {

// a (a_batch..., n, k) @ b (b_batch..., k, m) → out (batch..., n, m), a fresh contiguous tensor on
// the operands' device, batch = broadcast(a_batch, b_batch) (checked by the caller, like the inner
// dims, the dtypes and the devices). With `init`: out = init + alpha · (a @ b), init broadcast to
// out's shape; without: out = alpha · (a @ b).
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const char* op, const Tensor& init = Tensor(),
              double alpha = 1.0);

// TF32 tensor-core math for float32 products on the GPU, as torch.backends.cuda.matmul.allow_tf32
// (off by default; train.tf32 turns it on for a run): ~1e-3 relative error instead of ~1e-6, faster
// GEMMs. Process-wide. No effect on the CPU, whose products are always full float32. The fused
// attention kernels read allow_tf32() too.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace relgrad::backend
