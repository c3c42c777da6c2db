// The backend seam for elementwise ops: each entry takes and returns Tensors on any device and picks
// the CPU kernel (core/cpu/elementwise.h, core/cpu/index.h) or the CUDA one (cuda/elementwise.cu,
// cuda/reduce.h). Callers above (autograd/) never see a device, a raw pointer or a CUDA name.
#pragma once
#include "core/tensor.h"

namespace relgrad::backend {

// One entry per functor of core/base/unary_ops.def and core/base/binary_ops.def.
enum class Unary {
#define RG_UNARY(name, Functor) Functor,
#include "core/base/unary_ops.def"
#undef RG_UNARY
};
enum class Binary {
#define RG_BINARY(name, Functor, is_bool) Functor,
#include "core/base/binary_ops.def"
#undef RG_BINARY
};

// y (x's shape) = f(x).
Tensor unary_forward(Unary f, const Tensor& x, const char* op);
// gx (x's shape) = f.grad(x, y, gy); gy may be a broadcast view of x's shape.
Tensor unary_backward(Unary f, const Tensor& x, const Tensor& y, const Tensor& gy, const char* op);
// y = x^p and gx = gy · p · x^(p-1).
Tensor pow_forward(const Tensor& x, double p);
Tensor pow_backward(const Tensor& x, const Tensor& gy, double p);
// out (broadcast shape of a and b) = f(a, b); bool for comparisons, else a's dtype. a and b share a
// device and a dtype (checked by the caller).
Tensor binary_forward(Binary f, const Tensor& a, const Tensor& b, const char* op);
// out (shape) = cond ? a : b, all three read in place through their broadcast strides to `shape`;
// a and b share a dtype, cond is bool.
Tensor where_select(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* op);

}  // namespace relgrad::backend
