// Elementwise math, written once for the CPU and for CUDA (RG_HD marks functions both compilers
// build). Each unary functor has the value f(x) and the backward rule grad(x, y, gy) = gy * f'(x),
// given the input x, the saved output y and the incoming gradient gy; backward uses whichever of
// x and y is cheaper. The list of unary ops lives in unary_ops.def: adding one is a functor here and
// a line there (see README "How to add an op").
#pragma once
#include <cmath>

#include "core/base/fast_math.h"

// Forced inline (RG_HD_FORCE_INLINE, core/base/fast_math.h): the kernels call these per element
// inside their loops, which vectorise only when the call is inlined.
#undef RG_HD
#define RG_HD RG_HD_FORCE_INLINE

namespace relgrad::fn {

struct Neg {
  template <class T> RG_HD T operator()(T x) const { return -x; }
  template <class T> RG_HD T grad(T, T, T gy) const { return -gy; }
};
struct Exp {
  template <class T> RG_HD T operator()(T x) const { return rg_exp(x); }
  template <class T> RG_HD T grad(T, T y, T gy) const { return gy * y; }
};
struct Log {
  template <class T> RG_HD T operator()(T x) const { return std::log(x); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return gy / x; }
};
struct Sqrt {
  template <class T> RG_HD T operator()(T x) const { return std::sqrt(x); }
  template <class T> RG_HD T grad(T, T y, T gy) const { return gy / (T(2) * y); }
};
struct Rsqrt {  // y = x^(-1/2), dy/dx = -y^3 / 2
  template <class T> RG_HD T operator()(T x) const { return T(1) / std::sqrt(x); }
  template <class T> RG_HD T grad(T, T y, T gy) const { return T(-0.5) * gy * y * y * y; }
};
struct Abs {  // subgradient 0 at x = 0, as PyTorch
  template <class T> RG_HD T operator()(T x) const { return std::fabs(x); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return x > T(0) ? gy : (x < T(0) ? -gy : T(0)); }
};
struct Tanh {
  template <class T> RG_HD T operator()(T x) const { return std::tanh(x); }
  template <class T> RG_HD T grad(T, T y, T gy) const { return gy * (T(1) - y * y); }
};
struct Sigmoid {  // two branches so exp never overflows
  template <class T> RG_HD T operator()(T x) const {
    if (x >= T(0)) return T(1) / (T(1) + rg_exp(-x));
    T e = rg_exp(x);
    return e / (T(1) + e);
  }
  template <class T> RG_HD T grad(T, T y, T gy) const { return gy * y * (T(1) - y); }
};
struct Relu {  // gradient 0 at x = 0, as PyTorch
  template <class T> RG_HD T operator()(T x) const { return x > T(0) ? x : T(0); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return x > T(0) ? gy : T(0); }
};
struct Silu {  // x * sigmoid(x)
  template <class T> RG_HD T operator()(T x) const { return x * Sigmoid{}(x); }
  template <class T> RG_HD T grad(T x, T, T gy) const {
    T s = Sigmoid{}(x);
    return gy * s * (T(1) + x * (T(1) - s));
  }
};
struct Gelu {  // exact form: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
  // Both rules in terms of e = erf(x / sqrt 2), so a forward that keeps e (core/cpu/fused.h) hands the
  // backward the same operations on the same values without computing it again.
  template <class T> RG_HD static T erf_of(T x) { return rg_erf(x * T(0.70710678118654752440)); }
  template <class T> RG_HD static T from_erf(T x, T e) { return T(0.5) * x * (T(1) + e); }
  template <class T> RG_HD static T grad_from_erf(T x, T e, T gy) {
    T cdf = T(0.5) * (T(1) + e);
    T pdf = T(0.39894228040143267794) * rg_exp(T(-0.5) * x * x);
    return gy * (cdf + x * pdf);
  }
  template <class T> RG_HD T operator()(T x) const { return from_erf(x, erf_of(x)); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return grad_from_erf(x, erf_of(x), gy); }
};
struct GeluTanh {  // approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  template <class T> RG_HD T operator()(T x) const {
    T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  template <class T> RG_HD T grad(T x, T, T gy) const {
    T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    T t = std::tanh(inner);
    T dinner = T(0.79788456080286535588) * (T(1) + T(3) * T(0.044715) * x * x);
    return gy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);
  }
};
struct Sin {
  template <class T> RG_HD T operator()(T x) const { return std::sin(x); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return gy * std::cos(x); }
};
struct Cos {
  template <class T> RG_HD T operator()(T x) const { return std::cos(x); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return -gy * std::sin(x); }
};
struct Softplus {  // log(1 + e^x), x itself above 20 as PyTorch's threshold; d/dx = sigmoid(x)
  template <class T> RG_HD T operator()(T x) const { return x > T(20) ? x : std::log1p(rg_exp(x)); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return gy * Sigmoid{}(x); }
};
struct PowScalar {  // y = x^p for a scalar exponent p; d/dx = p x^(p-1) (0 when p == 0, as PyTorch)
  double p;
  template <class T> RG_HD T operator()(T x) const { return std::pow(x, T(p)); }
  template <class T> RG_HD T grad(T x, T, T gy) const { return p == 0.0 ? T(0) : gy * T(p) * std::pow(x, T(p - 1.0)); }
};

// Binary arithmetic (the backward rules of these are written with tensor ops in autograd/ops).
struct Add { template <class T> RG_HD T operator()(T a, T b) const { return a + b; } };
struct Sub { template <class T> RG_HD T operator()(T a, T b) const { return a - b; } };
struct Mul {
  template <class T> RG_HD T operator()(T a, T b) const {
    if constexpr (sizeof(T) == 1) return a && b;  // bool (refused by the kernels, but instantiated)
    else return a * b;
  }
};
struct Div { template <class T> RG_HD T operator()(T a, T b) const { return a / b; } };
// Comparisons produce bool masks.
struct Eq { template <class T> RG_HD bool operator()(T a, T b) const { return a == b; } };
struct Ne { template <class T> RG_HD bool operator()(T a, T b) const { return a != b; } };
struct Lt { template <class T> RG_HD bool operator()(T a, T b) const { return a < b; } };
struct Le { template <class T> RG_HD bool operator()(T a, T b) const { return a <= b; } };
struct Gt { template <class T> RG_HD bool operator()(T a, T b) const { return a > b; } };
struct Ge { template <class T> RG_HD bool operator()(T a, T b) const { return a >= b; } };

}  // namespace relgrad::fn
