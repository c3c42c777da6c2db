// Elementwise entries: the CPU kernels read broadcast operands in place (core/cpu/elementwise.h);
// the CUDA kernels (cuda/elementwise.cu) take flat arrays, so broadcast operands are made contiguous first.
#include "core/backend/elementwise.h"

#include "core/backend/dense.h"
#include "core/base/functors.h"
#include "core/cpu/index.h"
#include "cuda/reduce.h"
#include "cuda/runtime.h"

namespace relgrad::backend {

namespace {

// Calls f(functor, cuda_op) for the functor that `u` names.
template <class F>
decltype(auto) with_unary(Unary u, F f) {
  switch (u) {
#define RG_UNARY(name, Functor) \
  case Unary::Functor: return f(fn::Functor{}, cuda::UnaryOp::Functor);
#include "core/base/unary_ops.def"
#undef RG_UNARY
  }
  throw Error("[unary] unknown op");
}
template <class F>
decltype(auto) with_binary(Binary b, F f) {
  switch (b) {
#define RG_BINARY(name, Functor, is_bool) \
  case Binary::Functor: return f(fn::Functor{}, cuda::BinaryOp::Functor, is_bool);
#include "core/base/binary_ops.def"
#undef RG_BINARY
  }
  throw Error("[binary] unknown op");
}

}  // namespace

Tensor unary_forward(Unary u, const Tensor& x, const char* op) {
  return with_unary(u, [&](auto f, cuda::UnaryOp cuda_op) {
    if (x.device().is_cpu()) return cpu::unary(x, f, op);
    dispatch_float(x.dtype(), op, [](auto) {});
    Tensor xc = dense(x);
    Tensor y = empty_on(x, x.shape(), x.dtype());
    cuda::unary_forward(cuda_op, x.dtype(), xc.raw_data(), y.raw_data(), x.numel(), x.device().index);
    return y;
  });
}

Tensor unary_backward(Unary u, const Tensor& x, const Tensor& y, const Tensor& gy, const char* op) {
  return with_unary(u, [&](auto f, cuda::UnaryOp cuda_op) {
    if (x.device().is_cpu()) return cpu::unary_grad(x, y, gy, f, op);
    Tensor xc = dense(x), yc = dense_as(y, x.shape()), gc = dense_as(gy, x.shape());
    Tensor gx = empty_on(x, x.shape(), x.dtype());
    cuda::unary_backward(cuda_op, x.dtype(), xc.raw_data(), yc.raw_data(), gc.raw_data(), gx.raw_data(), x.numel(),
                         x.device().index);
    return gx;
  });
}

Tensor pow_forward(const Tensor& x, double p) {
  if (x.device().is_cpu()) return cpu::unary(x, fn::PowScalar{p}, "pow");
  Tensor xc = dense(x);
  Tensor y = empty_on(x, x.shape(), x.dtype());
  cuda::pow_forward(p, x.dtype(), xc.raw_data(), y.raw_data(), x.numel(), x.device().index);
  return y;
}

Tensor pow_backward(const Tensor& x, const Tensor& gy, double p) {
  if (x.device().is_cpu()) return cpu::unary_grad(x, x, gy, fn::PowScalar{p}, "pow");
  Tensor xc = dense(x), gc = dense_as(gy, x.shape());
  Tensor gx = empty_on(x, x.shape(), x.dtype());
  cuda::pow_backward(p, x.dtype(), xc.raw_data(), gc.raw_data(), gx.raw_data(), x.numel(), x.device().index);
  return gx;
}

Tensor binary_forward(Binary b_op, const Tensor& a, const Tensor& b, const char* op) {
  return with_binary(b_op, [&](auto f, cuda::BinaryOp cuda_op, bool bool_result) {
    if (a.device().is_cpu()) return cpu::binary(a, b, f, bool_result, op);
    Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    Tensor ac = dense_as(a, shape), bc = dense_as(b, shape);
    Tensor out = empty_on(a, shape, bool_result ? kBool : a.dtype());
    cuda::binary_forward(cuda_op, a.dtype(), ac.raw_data(), bc.raw_data(), out.raw_data(), out.numel(),
                         a.device().index);
    return out;
  });
}

Tensor where_select(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* op) {
  Tensor out = empty_on(a, shape, a.dtype());
  Shape cs = cpu::broadcast_strides(cond, shape), as = cpu::broadcast_strides(a, shape),
        bs = cpu::broadcast_strides(b, shape);
  dispatch_all(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (a.device().is_cuda()) {
      cuda::where_select(a.dtype(), shape, out.raw_data(), static_cast<const bool*>(cond.raw_data()), cs, a.raw_data(),
                         as, b.raw_data(), bs, a.device().index);
      return;
    }
    cpu::where_kernel<T>(shape, out.data_ptr<T>(), cond.data_ptr<bool>(), cs, static_cast<const T*>(a.raw_data()), as,
                         static_cast<const T*>(b.raw_data()), bs);
  });
  return out;
}

}  // namespace relgrad::backend
