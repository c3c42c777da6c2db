// Elementwise ops: unary (generated from core/base/unary_ops.def), pow, binary arithmetic with
// broadcasting and comparisons (where and masked_fill are in where.cpp). Forward picks the CPU kernel (core/cpu/elementwise.h)
// or the CUDA one (cuda/elementwise.cu); backward sits beside each forward.
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/base/functors.h"
#include "core/cpu/elementwise.h"
#include "cuda/runtime.h"

namespace relgrad {

namespace {

// On CUDA the kernels take contiguous arrays: broadcast operands are materialised first.
Tensor cuda_contiguous(const Tensor& t, const Shape& shape) {
  Tensor e = t.shape() == shape ? t : t.detach().expand(shape);
  return e.is_contiguous() ? e : e.contiguous();
}

template <class F>
Tensor unary_forward(const Tensor& x, F f, cuda::UnaryOp cuda_op, const char* op) {
  if (x.device().is_cpu()) return cpu::unary(x, f, op);
  dispatch_float(x.dtype(), op, [](auto) {});
  Tensor xc = cuda_contiguous(x, x.shape());
  Tensor y = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  cuda::unary_forward(cuda_op, x.dtype(), xc.raw_data(), y.raw_data(), x.numel(), x.device().index);
  return y;
}

template <class F>
Tensor unary_backward(const Tensor& x, const Tensor& y, const Tensor& gy, F f, cuda::UnaryOp cuda_op, const char* op) {
  if (x.device().is_cpu()) return cpu::unary_grad(x, y, gy, f, op);
  Tensor xc = cuda_contiguous(x, x.shape()), yc = cuda_contiguous(y, x.shape()), gc = cuda_contiguous(gy, x.shape());
  Tensor gx = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  cuda::unary_backward(cuda_op, x.dtype(), xc.raw_data(), yc.raw_data(), gc.raw_data(), gx.raw_data(), x.numel(),
                       x.device().index);
  return gx;
}

// One differentiable unary op: y = f(x); dx = f.grad(x, y, dy).
template <class F>
Tensor unary_op(const Tensor& x, F f, cuda::UnaryOp cuda_op, const char* op) {
  Tensor y = unary_forward(x, f, cuda_op, op);
  if (!needs_grad({x})) return y;
  return record(y, op, {x}, [f, cuda_op, op, x = SavedTensor(x), y = SavedTensor(y)](const Tensor& gy) -> TensorList {
    return {unary_backward(x.get(), y.get(), gy, f, cuda_op, op)};
  });
}

template <class F>
Tensor binary_forward(const Tensor& a, const Tensor& b, F f, cuda::BinaryOp cuda_op, bool bool_result,
                      const char* op) {
  check_same_device(a, b, op);
  check_same_dtype(a, b, op);
  if (a.device().is_cpu()) return cpu::binary(a, b, f, bool_result, op);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor ac = cuda_contiguous(a, shape), bc = cuda_contiguous(b, shape);
  Tensor out = empty(shape, TensorOptions(bool_result ? kBool : a.dtype()).device(a.device()));
  cuda::binary_forward(cuda_op, a.dtype(), ac.raw_data(), bc.raw_data(), out.raw_data(), out.numel(), a.device().index);
  return out;
}

Tensor scalar_like(double v, const Tensor& t) { return scalar_tensor(v, TensorOptions(t.dtype()).device(t.device())); }

}  // namespace

// ---- unary ops from the X-macro list ----------------------------------------------------------
#define RG_UNARY(name, Functor) \
  Tensor name(const Tensor& x) { return unary_op(x, fn::Functor{}, cuda::UnaryOp::Functor, #name); }
#include "core/base/unary_ops.def"
#undef RG_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return gelu_erf(x);
  if (approximate == "tanh") return gelu_tanh(x);
  throw Error("[gelu] approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

// pow with a scalar exponent: its functor carries the exponent, so it is not in the X-macro list.
Tensor pow(const Tensor& x, double exponent) {
  fn::PowScalar f{exponent};
  auto forward = [&]() {
    if (x.device().is_cpu()) return cpu::unary(x, f, "pow");
    Tensor xc = cuda_contiguous(x, x.shape());
    Tensor y = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
    cuda::pow_forward(exponent, x.dtype(), xc.raw_data(), y.raw_data(), x.numel(), x.device().index);
    return y;
  };
  Tensor y = forward();
  if (!needs_grad({x})) return y;
  return record(y, "pow", {x}, [f, x = SavedTensor(x)](const Tensor& gy) -> TensorList {
    const Tensor& xv = x.get();
    if (xv.device().is_cpu()) return {cpu::unary_grad(xv, xv, gy, f, "pow")};
    Tensor xc = cuda_contiguous(xv, xv.shape()), gc = cuda_contiguous(gy, xv.shape());
    Tensor gx = empty(xv.shape(), TensorOptions(xv.dtype()).device(xv.device()));
    cuda::pow_backward(f.p, xv.dtype(), xc.raw_data(), gc.raw_data(), gx.raw_data(), xv.numel(), xv.device().index);
    return {gx};
  });
}

// ---- binary arithmetic: the backward rules, written with ops (so they run on any device) ---------
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, fn::Add{}, cuda::BinaryOp::Add, false, "add");
  if (!needs_grad({a, b})) return out;
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "add", {a, b}, [sa, sb](const Tensor& g) -> TensorList { return {sum_to(g, sa), sum_to(g, sb)}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, fn::Sub{}, cuda::BinaryOp::Sub, false, "sub");
  if (!needs_grad({a, b})) return out;
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "sub", {a, b},
                [sa, sb](const Tensor& g) -> TensorList { return {sum_to(g, sa), sum_to(neg(g), sb)}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, fn::Mul{}, cuda::BinaryOp::Mul, false, "mul");
  if (!needs_grad({a, b})) return out;
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // Save only the operand each gradient needs: d(ab)/da = b, d(ab)/db = a.
  return record(out, "mul", {a, b},
                [need_a, need_b, sa = a.shape(), sb = b.shape(), a = need_b ? SavedTensor(a) : SavedTensor(),
                 b = need_a ? SavedTensor(b) : SavedTensor()](const Tensor& g) -> TensorList {
                  return {need_a ? sum_to(mul(g, b.get()), sa) : Tensor(),
                          need_b ? sum_to(mul(g, a.get()), sb) : Tensor()};
                });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, fn::Div{}, cuda::BinaryOp::Div, false, "div");
  if (!needs_grad({a, b})) return out;
  bool need_b = b.requires_grad();
  // d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -out/b.
  return record(out, "div", {a, b},
                [need_b, sa = a.shape(), sb = b.shape(), b = SavedTensor(b),
                 out = need_b ? SavedTensor(out) : SavedTensor()](const Tensor& g) -> TensorList {
                  Tensor g_over_b = div(g, b.get());
                  return {sum_to(g_over_b, sa), need_b ? sum_to(neg(mul(g_over_b, out.get())), sb) : Tensor()};
                });
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor rsub(const Tensor& a, double b) { return sub(scalar_like(b, a), a); }
Tensor rdiv(const Tensor& a, double b) { return div(scalar_like(b, a), a); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return rdiv(b, a); }
Tensor operator-(const Tensor& x) { return neg(x); }

// ---- comparisons: bool masks, no gradient ----------------------------------------------------------
#define RG_COMPARE(name, Functor)                                                                        \
  Tensor name(const Tensor& a, const Tensor& b) {                                                        \
    return binary_forward(a, b, fn::Functor{}, cuda::BinaryOp::Functor, true, #name);                    \
  }                                                                                                      \
  Tensor name(const Tensor& a, double b) { return name(a, scalar_like(b, a)); }
RG_COMPARE(eq, Eq)
RG_COMPARE(ne, Ne)
RG_COMPARE(lt, Lt)
RG_COMPARE(le, Le)
RG_COMPARE(gt, Gt)
RG_COMPARE(ge, Ge)
#undef RG_COMPARE

}  // namespace relgrad
