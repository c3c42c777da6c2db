// The autocast switch and the operand rounding (autograd/autocast.h).
#include "autograd/autocast.h"

#include "autograd/profiler.h"
#include "core/backend/matmul.h"

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
  // Through the 16-bit storage and back: two copies, each the plain cast (core/base/half.h); a
  // transposed operand (kᵀ, Wᵀ) stays transposed, so a GEMM reads it as it would the float32 one.
  return backend::cast_operand(backend::cast_operand(x, low), kFloat32);
}

}  // namespace relgrad
