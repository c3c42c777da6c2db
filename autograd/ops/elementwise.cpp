// Elementwise ops: unary (generated from core/base/unary_ops.def), pow, binary arithmetic with
// broadcasting and comparisons (where and masked_fill are in where.cpp). Forward calls the backend
// entry (core/backend/elementwise.h), which picks the CPU or CUDA kernel; backward sits beside each forward.
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/elementwise.h"

namespace relgrad {

namespace {

// One differentiable unary op: y = f(x); dx = f.grad(x, y, dy).
Tensor unary_op(const Tensor& x, backend::Unary f, const char* op) {
  Tensor y = backend::unary_forward(f, x, op);
  if (!needs_grad({x})) return y;
  return record(y, op, {x}, [f, op, x = SavedTensor(x), y = SavedTensor(y)](const Tensor& gy) -> TensorList {
    return {backend::unary_backward(f, x.get(), y.get(), gy, op)};
  });
}

Tensor binary_forward(const Tensor& a, const Tensor& b, backend::Binary f, const char* op) {
  RG_PROFILE_OP(op);  // the kernel; record's bookkeeping after it is host time
  check_same_device(a, b, op);
  check_same_dtype(a, b, op);
  return backend::binary_forward(f, a, b, op);
}

Tensor scalar_like(double v, const Tensor& t) { return scalar_tensor(v, TensorOptions(t.dtype()).device(t.device())); }

}  // namespace

// ---- unary ops from the X-macro list ----------------------------------------------------------
#define RG_UNARY(name, Functor) \
  Tensor name(const Tensor& x) { RG_PROFILE_OP(#name); return unary_op(x, backend::Unary::Functor, #name); }
#include "core/base/unary_ops.def"
#undef RG_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return gelu_erf(x);
  if (approximate == "tanh") return gelu_tanh(x);
  throw Error("[gelu] approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

// pow with a scalar exponent: its functor carries the exponent, so it is not in the X-macro list.
Tensor pow(const Tensor& x, double exponent) {
  RG_PROFILE_OP("pow");
  Tensor y = backend::pow_forward(x, exponent);
  if (!needs_grad({x})) return y;
  return record(y, "pow", {x}, [exponent, x = SavedTensor(x)](const Tensor& gy) -> TensorList {
    return {backend::pow_backward(x.get(), gy, exponent)};
  });
}

// ---- binary arithmetic: the backward rules, written with ops (so they run on any device) ---------
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, backend::Binary::Add, "add");
  if (!needs_grad({a, b})) return out;
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "add", {a, b}, [sa, sb](const Tensor& g) -> TensorList { return {sum_to(g, sa), sum_to(g, sb)}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, backend::Binary::Sub, "sub");
  if (!needs_grad({a, b})) return out;
  Shape sa = a.shape(), sb = b.shape();
  return record(out, "sub", {a, b},
                [sa, sb](const Tensor& g) -> TensorList { return {sum_to(g, sa), sum_to(neg(g), sb)}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(a, b, backend::Binary::Mul, "mul");
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
  Tensor out = binary_forward(a, b, backend::Binary::Div, "div");
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

Tensor add(const Tensor& a, double b) { RG_PROFILE_OP("add"); return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { RG_PROFILE_OP("sub"); return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { RG_PROFILE_OP("mul"); return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { RG_PROFILE_OP("div"); return div(a, scalar_like(b, a)); }
Tensor rsub(const Tensor& a, double b) { RG_PROFILE_OP("sub"); return sub(scalar_like(b, a), a); }
Tensor rdiv(const Tensor& a, double b) { RG_PROFILE_OP("div"); return div(scalar_like(b, a), a); }

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
    return binary_forward(a, b, backend::Binary::Functor, #name);                    \
  }                                                                                                      \
  Tensor name(const Tensor& a, double b) { RG_PROFILE_OP(#name); return name(a, scalar_like(b, a)); }
RG_COMPARE(eq, Eq)
RG_COMPARE(ne, Ne)
RG_COMPARE(lt, Lt)
RG_COMPARE(le, Le)
RG_COMPARE(gt, Gt)
RG_COMPARE(ge, Ge)
#undef RG_COMPARE

}  // namespace relgrad
