// matmul's two kernels side by side: cpu::matmul (core/cpu/matmul.cpp) and its CUDA twin below,
// which plans cuBLAS's strided-batched GEMM (cuda/blas.h) with the same contract.
#include "core/backend/matmul.h"

#include <utility>

#include "core/backend/dense.h"
#include "core/cpu/matmul.h"
#include "cuda/blas.h"

namespace relgrad::backend {

namespace {

// x's last two dims as cuBLAS reads them; a view that is neither row- nor column-major there (e.g. a
// step-2 slice of both dims) is copied once into a contiguous tensor, replacing x.
cuda::MatrixLayout gemm_operand(Tensor& x, const char* op) {
  cuda::MatrixLayout L = cuda::classify_matrix(x.size(-2), x.size(-1), x.stride(-2), x.stride(-1));
  if (L.order != cuda::MatrixOrder::Neither) return L;
  Tensor packed = empty_on(x, x.shape(), x.dtype());
  copy_into(packed, x, op);
  x = packed;
  return cuda::classify_matrix(x.size(-2), x.size(-1), x.stride(-2), x.stride(-1));
}

// x (.., r, c) viewed as (.., c, r): its last two dims swapped (core's view; transpose is autograd's).
Tensor swap_last_two(const Tensor& x) {
  Shape shape = x.shape(), strides = x.strides();
  const size_t d = shape.size();
  std::swap(shape[d - 1], shape[d - 2]);
  std::swap(strides[d - 1], strides[d - 2]);
  return make_view(x, shape, strides, x.offset());
}

// The CUDA twin of cpu::matmul (same contract): out (batch..., n, m) = [init +] alpha · (a @ b), float32
// when a_in and b_in are 16-bit (autocast's tensor-core operands), else their dtype.
Tensor cuda_matmul(const Tensor& a_in, const Tensor& b_in, const Shape& batch, const char* op, const Tensor& init,
                   double alpha) {
  const int64_t n = a_in.size(-2), k = a_in.size(-1), m = b_in.size(-1);
  const Shape out_shape = cpu::matmul_shape(batch, n, m);
  const TensorOptions options = TensorOptions(cuda::gemm_output_dtype(a_in.dtype())).device(a_in.device());
  const bool accumulate = init.defined();
  if (k == 0 && !accumulate) return zeros(out_shape, options);  // an empty sum
  Tensor out = empty(out_shape, options);
  if (out.numel() == 0) return out;
  if (accumulate) copy_into(out, init, op);  // copy_into broadcasts init to the product's shape
  if (k == 0) return out;
  Tensor a = a_in, b = b_in;  // handles: gemm_operand may replace them by packed copies
  const cuda::MatrixLayout la = gemm_operand(a, op), lb = gemm_operand(b, op);
  cuda::gemm_batched(a.dtype(), a.raw_data(), la, cpu::batch_offsets(a, batch), b.raw_data(), lb,
                     cpu::batch_offsets(b, batch), out.raw_data(), n, k, m, alpha, accumulate, a.device().index);
  return out;
}

}  // namespace

Tensor cast_operand(const Tensor& x, DType dtype) {
  if (!x.is_contiguous() && x.dim() >= 2 && swap_last_two(x).is_contiguous())
    return swap_last_two(cast_operand(swap_last_two(x), dtype));
  return copy_as(x, TensorOptions(dtype).device(x.device()));
}

Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const char* op, const Tensor& init, double alpha,
              DType products, const Tensor& into) {
  RG_CHECK_T(DTypeError, products == kFloat32 || (is_16bit_float(products) && a.dtype() == kFloat32), op,
             "products in ", dtype_name(products), " take float32 operands, got ", dtype_name(a.dtype()));
  if (a.device().is_cuda()) {
    // The tensor cores' operands: 16-bit copies (a (.., n, k), b (.., k, m)), one cast kernel each.
    Tensor out = products == kFloat32
                     ? cuda_matmul(a, b, batch, op, init, alpha)
                     : cuda_matmul(cast_operand(a, products), cast_operand(b, products), batch, op, init, alpha);
    if (!into.defined()) return out;
    copy_into(into, out, op);
    return into;
  }
  if (products == kFloat32) return cpu::matmul(a, b, batch, op, init, alpha, into);
  // The CPU has no 16-bit GEMM worth calling: float32 on the rounded values computes the same products.
  auto rounded = [products](const Tensor& x) { return cast_operand(cast_operand(x, products), kFloat32); };
  return cpu::matmul(rounded(a), rounded(b), batch, op, init, alpha, into);
}

void set_allow_tf32(bool allow) { cuda::set_allow_tf32(allow); }
bool allow_tf32() { return cuda::allow_tf32(); }

}  // namespace relgrad::backend
