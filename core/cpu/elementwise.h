// CPU elementwise kernels, templated on a functor from core/base/functors.h. Outputs are fresh
// contiguous tensors; inputs may be any strided view (broadcast inputs have stride 0).
#pragma once
#include <array>
#include <type_traits>

#include "core/strided.h"
#include "core/tensor.h"

namespace relgrad::cpu {

// Strides of `t` viewed with shape `shape` (t broadcast to it; missing or size-1 dims get stride 0).
inline Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape s(shape.size(), 0);
  const int64_t lead = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t i = 0; i < t.dim(); ++i) s[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return s;
}

// y = f(x), x any shape → y same shape.
template <class F>
Tensor unary(const Tensor& x, F f, const char* op) {
  Tensor y = empty(x.shape(), TensorOptions(x.dtype()));
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const T* xp = static_cast<const T*>(x.raw_data());
    T* yp = y.data_ptr<T>();
    strided_for_each<2>(x.shape(), {&y.strides(), &x.strides()},
                        [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
                          if (s[0] == 1 && s[1] == 1) {  // contiguous rows: a loop the compiler vectorises
                            T* yr = yp + o[0];
                            const T* xr = xp + o[1];
                            for (int64_t i = 0; i < n; ++i) yr[i] = f(xr[i]);
                          } else {
                            for (int64_t i = 0; i < n; ++i) yp[o[0] + i * s[0]] = f(xp[o[1] + i * s[1]]);
                          }
                        });
  });
  return y;
}

// gx = f.grad(x, y, gy), all of one shape.
template <class F>
Tensor unary_grad(const Tensor& x, const Tensor& y, const Tensor& gy, F f, const char* op) {
  Tensor gx = empty(x.shape(), TensorOptions(x.dtype()));
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const T* xp = static_cast<const T*>(x.raw_data());
    const T* yp = static_cast<const T*>(y.raw_data());
    const T* gp = static_cast<const T*>(gy.raw_data());
    T* op_ = gx.data_ptr<T>();
    strided_for_each<4>(x.shape(), {&gx.strides(), &x.strides(), &y.strides(), &gy.strides()},
                        [&](const std::array<int64_t, 4>& o, int64_t n, const std::array<int64_t, 4>& s) {
                          if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {  // contiguous: vectorisable
                            T* r = op_ + o[0];
                            const T *xr = xp + o[1], *yr = yp + o[2], *gr = gp + o[3];
                            for (int64_t i = 0; i < n; ++i) r[i] = f.grad(xr[i], yr[i], gr[i]);
                            return;
                          }
                          for (int64_t i = 0; i < n; ++i)
                            op_[o[0] + i * s[0]] = f.grad(xp[o[1] + i * s[1]], yp[o[2] + i * s[2]], gp[o[3] + i * s[3]]);
                        });
  });
  return gx;
}

// out = f(a, b) with NumPy broadcasting; out has dtype `out_dtype` (bool for comparisons).
// a and b must have the same dtype (checked by the caller).
template <class F>
Tensor binary(const Tensor& a, const Tensor& b, F f, bool bool_result, const char* op) {
  RG_CHECK_T(DTypeError, bool_result || a.dtype() != DType::Bool, op,
             "arithmetic on bool tensors is not supported; convert with .to()");
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor out = empty(shape, TensorOptions(bool_result ? DType::Bool : a.dtype()));
  Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  dispatch_all(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    using R = std::conditional_t<std::is_same_v<decltype(f(T{}, T{})), bool>, bool, T>;
    const T* ap = static_cast<const T*>(a.raw_data());
    const T* bp = static_cast<const T*>(b.raw_data());
    R* op_ = static_cast<R*>(out.raw_data());
    strided_for_each<3>(shape, {&out.strides(), &sa, &sb},
                        [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
                          if (s[0] == 1 && s[1] == 1 && s[2] == 1) {  // the common case, vectorisable
                            R* r = op_ + o[0];
                            const T* x = ap + o[1];
                            const T* y = bp + o[2];
                            for (int64_t i = 0; i < n; ++i) r[i] = f(x[i], y[i]);
                          } else {
                            for (int64_t i = 0; i < n; ++i)
                              op_[o[0] + i * s[0]] = f(ap[o[1] + i * s[1]], bp[o[2] + i * s[2]]);
                          }
                        });
  });
  return out;
}

}  // namespace relgrad::cpu
