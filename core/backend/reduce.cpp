// Reduction entries: the CPU kernels of core/cpu/reduce.h or the CUDA ones of cuda/reduce.h, on
// the same (outer, R, inner) plan.
#include "core/backend/reduce.h"

#include <type_traits>

#include "core/backend/dense.h"
#include "cuda/reduce.h"

namespace relgrad::backend {

namespace {

// max and min are defined for float and int64 tensors; bool is refused.
template <class F>
void dispatch_ordered(DType dt, const char* op, F f) {
  RG_CHECK_T(DTypeError, dt != kBool, op, "not supported for bool tensors");
  dispatch_all(dt, op, [&](auto zero) {
    if constexpr (!std::is_same_v<decltype(zero), bool>) f(zero);
  });
}

}  // namespace

Tensor reduce_sum(const ReducePlan& p, const Shape& shape, double scale, const char* op) {
  const Tensor& x = p.x;
  Tensor out = empty_on(x, shape, x.dtype());
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::reduce_sum(x.dtype(), x.raw_data(), out.raw_data(), p.outer, p.R, p.inner, scale, x.device().index);
    else
      cpu::sum_kernel<T>(x.data_ptr<T>(), out.data_ptr<T>(), p.outer, p.R, p.inner, scale);
  });
  return out;
}

VarResult reduce_var(const ReducePlan& p, const Shape& shape, int64_t correction, const char* op) {
  const Tensor& x = p.x;
  VarResult r{empty_on(x, shape, x.dtype()), empty_on(x, p.keepdim_shape, x.dtype())};
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::reduce_var(x.dtype(), x.raw_data(), r.var.raw_data(), r.mean.raw_data(), p.outer, p.R, p.inner,
                       correction, x.device().index);
    else
      cpu::var_kernel<T>(x.data_ptr<T>(), r.var.data_ptr<T>(), r.mean.data_ptr<T>(), p.outer, p.R, p.inner,
                         correction);
  });
  return r;
}

Tensor reduce_logsumexp(const ReducePlan& p, const Shape& shape, const char* op) {
  const Tensor& x = p.x;
  Tensor out = empty_on(x, shape, x.dtype());
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda())
      cuda::reduce_logsumexp(x.dtype(), x.raw_data(), out.raw_data(), p.outer, p.R, p.inner, x.device().index);
    else
      cpu::logsumexp_kernel<T>(x.data_ptr<T>(), out.data_ptr<T>(), p.outer, p.R, p.inner);
  });
  return out;
}

ExtremumResult reduce_extremum(bool is_max, const ReducePlan& p, const Shape& shape, bool want_values,
                               bool want_indices, const char* op) {
  const Tensor& x = p.x;
  ExtremumResult r{want_values ? empty_on(x, shape, x.dtype()) : Tensor(),
                   want_indices ? empty_on(x, shape, kInt64) : Tensor()};
  dispatch_ordered(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::reduce_extremum(is_max, x.dtype(), x.raw_data(), raw_or_null(r.values),
                            static_cast<int64_t*>(raw_or_null(r.indices)), p.outer, p.R, p.inner, x.device().index);
      return;
    }
    T* values = ptr_or_null<T>(r.values);
    int64_t* indices = ptr_or_null<int64_t>(r.indices);
    if (is_max)
      cpu::extremum_kernel<true, T>(x.data_ptr<T>(), values, indices, p.outer, p.R, p.inner);
    else
      cpu::extremum_kernel<false, T>(x.data_ptr<T>(), values, indices, p.outer, p.R, p.inner);
  });
  return r;
}

Tensor scatter_to_index(const Tensor& g, const Tensor& indices, const Shape& in_shape, int64_t outer, int64_t R,
                        int64_t inner, const char* op) {
  Tensor gc = dense(g), ic = dense(indices), gx = empty_on(g, in_shape, g.dtype());
  dispatch_float(g.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (g.device().is_cuda())
      cuda::scatter_to_index(g.dtype(), gc.raw_data(), static_cast<const int64_t*>(ic.raw_data()), gx.raw_data(),
                             outer, R, inner, g.device().index);
    else
      cpu::scatter_to_index_kernel<T>(gc.data_ptr<T>(), ic.data_ptr<int64_t>(), gx.data_ptr<T>(), outer, R, inner);
  });
  return gx;
}

}  // namespace relgrad::backend
