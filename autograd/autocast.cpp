// The autocast switch and the operand rounding (autograd/autocast.h).
#include "autograd/autocast.h"

#include "autograd/profiler.h"

namespace relgrad {
namespace {
thread_local DType autocast_dtype = kFloat32;
}  // namespace

DType Autocast::dtype() { return autocast_dtype; }

void Autocast::set_dtype(DType dtype) {
  RG_CHECK_T(DTypeError, dtype == kFloat32 || is_16bit_float(dtype), "autocast",
             "the precision is float32 (off), bfloat16 or float16, got ", dtype_name(dtype));
  autocast_dtype = dtype;
}

DType autocast_dtype_for(const Tensor& x) { return x.dtype() == kFloat32 ? autocast_dtype : kFloat32; }

Tensor round_to(const Tensor& x, DType low) {
  if (low == kFloat32) return x;
  RG_CHECK_T(DTypeError, x.dtype() == kFloat32 && is_16bit_float(low), "autocast",
             "rounds float32 to bfloat16 or float16, got ", dtype_name(x.dtype()), " to ", dtype_name(low));
  RG_PROFILE_OP("autocast_round");
  // A transposed operand (kᵀ, Wᵀ) stays transposed, so the GEMM reads it as it would the float32 one.
  if (!x.is_contiguous() && x.dim() >= 2 && x.transpose(-1, -2).is_contiguous())
    return round_to(x.detach().transpose(-1, -2), low).transpose(-1, -2);
  // Through the 16-bit storage and back: two copies, each the plain cast (core/base/half.h).
  return copy_as(copy_as(x, TensorOptions(low).device(x.device())), TensorOptions(kFloat32).device(x.device()));
}

}  // namespace relgrad
