// Reductions over any set of dims with keepdim: sum, mean, var, logsumexp, amax/amin, max/min (all
// elements, or along one dim with indices) and argmax/argmin. Forward calls a kernel from
// core/cpu/reduce.h or cuda/reduce.h on the (outer, R, inner) layout that plan_reduce gives; backward
// broadcasts the output gradient back over the reduced dims (with ops, so it runs on either device).
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/cpu/reduce.h"
#include "cuda/reduce.h"

namespace relgrad {

namespace {

// A new tensor of `dtype` on x's device.
TensorOptions on_device_of(const Tensor& x, DType dtype) { return TensorOptions(dtype).device(x.device()); }

// The (outer, R, inner) plan serves both devices: for a CUDA tensor its permuted copy (made when the
// reduced dims are not one block of a contiguous tensor) stays on the GPU.
using cpu::plan_reduce;

// sum or mean (scale = 1/R) over dims.
Tensor sum_scaled(const Tensor& x, const Shape& dims, bool keepdim, bool mean_, const char* op) {
  cpu::ReducePlan p = plan_reduce(x, dims, op);
  Tensor out = empty(keepdim ? p.keepdim_shape : p.out_shape, on_device_of(x, x.dtype()));
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    double scale = mean_ ? 1.0 / static_cast<double>(p.R) : 1.0;
    if (x.device().is_cuda())
      cuda::reduce_sum(x.dtype(), p.x.raw_data(), out.raw_data(), p.outer, p.R, p.inner, scale, x.device().index);
    else
      cpu::sum_kernel<T>(p.x.data_ptr<T>(), out.data_ptr<T>(), p.outer, p.R, p.inner, scale);
  });
  if (!needs_grad({x})) return out;
  return record(out, op, {x}, [in_shape = x.shape(), ks = p.keepdim_shape, R = p.R, mean_](const Tensor& g) -> TensorList {
    Tensor gk = g.reshape(ks).expand(in_shape);
    return {mean_ ? mul(gk, 1.0 / static_cast<double>(R)) : contiguous(gk)};
  });
}

// max and min are defined for float and int64 tensors (ints get no gradient); bool is refused.
template <class F>
void dispatch_ordered(DType dt, const char* op, F f) {
  RG_CHECK_T(DTypeError, dt != kBool, op, "not supported for bool tensors");
  dispatch_all(dt, op, [&](auto zero) {
    if constexpr (!std::is_same_v<decltype(zero), bool>) f(zero);
  });
}

// The max (kMax) or min over `dims`: values and/or the first index of the extremum (the index is
// meaningful only along one dim). Outputs have the keepdim or the reduced shape.
struct Extremum {
  Tensor values, indices;
  Shape keepdim_shape;
};
template <bool kMax>
Extremum extremum(const Tensor& x, const Shape& dims, bool keepdim, bool want_values, bool want_indices,
                  const char* op) {
  cpu::ReducePlan p = plan_reduce(x, dims, op);
  RG_CHECK_T(IndexError, p.R > 0, op, "cannot reduce over a dimension of size 0: input shape ", shape_str(x.shape()),
             ", dims ", shape_str(p.dims));
  const Shape& shape = keepdim ? p.keepdim_shape : p.out_shape;
  Tensor values = want_values ? empty(shape, on_device_of(x, x.dtype())) : Tensor();
  Tensor indices = want_indices ? empty(shape, on_device_of(x, kInt64)) : Tensor();
  dispatch_ordered(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::reduce_extremum(kMax, x.dtype(), p.x.raw_data(), want_values ? values.raw_data() : nullptr,
                            want_indices ? static_cast<int64_t*>(indices.raw_data()) : nullptr, p.outer, p.R,
                            p.inner, x.device().index);
      return;
    }
    cpu::extremum_kernel<kMax, T>(p.x.data_ptr<T>(), want_values ? values.data_ptr<T>() : nullptr,
                                  want_indices ? indices.data_ptr<int64_t>() : nullptr, p.outer, p.R, p.inner);
  });
  return {values, indices, p.keepdim_shape};
}

// amax/amin, and max/min over all elements: the gradient is shared evenly among all elements equal
// to the extremum (PyTorch's rule; a tie splits it rather than picking one arbitrarily).
template <bool kMax>
Tensor extremum_values(const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
  Extremum e = extremum<kMax>(x, dims, keepdim, true, false, op);
  Tensor out = e.values;
  if (!needs_grad({x})) return out;
  return record(out, op, {x}, [ks = e.keepdim_shape, dims, x = SavedTensor(x), out = SavedTensor(out)](const Tensor& g) -> TensorList {
    const Tensor& xv = x.get();
    Tensor hit = to_dtype(eq(xv, out.get().reshape(ks)), xv.dtype());  // 1 where x is the extremum
    Tensor count = sum(hit, dims, /*keepdim=*/true);
    return {mul(hit, div(g.reshape(ks), count))};
  });
}

// max/min along one dim with indices: the gradient goes to the returned (first) index only.
template <bool kMax>
std::tuple<Tensor, Tensor> extremum_dim(const Tensor& x, int64_t dim, bool keepdim, const char* op) {
  Extremum e = extremum<kMax>(x, {dim}, keepdim, true, true, op);
  if (!needs_grad({x})) return {e.values, e.indices};
  // Gradient layout (outer, R, inner) around the reduced dim d of the (contiguous) input shape.
  Shape in = x.shape();
  int64_t d = normalize_dim(dim, x.dim(), op), outer = 1, R = 1, inner = 1;
  for (int64_t k = 0; k < x.dim(); ++k) (k < d ? outer : k == d ? R : inner) *= in[k];
  Tensor values = record(e.values, op, {x}, [=, indices = SavedTensor(e.indices)](const Tensor& g) -> TensorList {
    Tensor gc = g.contiguous(), gx = empty(in, on_device_of(g, g.dtype()));
    dispatch_float(g.dtype(), op, [&](auto zero) {
      using T = decltype(zero);
      if (g.device().is_cuda()) {
        Tensor ic = indices.get().contiguous();
        cuda::scatter_to_index(g.dtype(), gc.raw_data(), static_cast<const int64_t*>(ic.raw_data()), gx.raw_data(),
                               outer, R, inner, g.device().index);
        return;
      }
      cpu::scatter_to_index_kernel<T>(gc.data_ptr<T>(), indices.get().contiguous().data_ptr<int64_t>(),
                                      gx.data_ptr<T>(), outer, R, inner);
    });
    return {gx};
  });
  return {values, e.indices};
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { return sum_scaled(x, dims, keepdim, false, "sum"); }
Tensor sum(const Tensor& x) { return sum(x, {}, false); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { return sum_scaled(x, dims, keepdim, true, "mean"); }
Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  const char* op = "var";
  cpu::ReducePlan p = plan_reduce(x, dims, op);
  Tensor out = empty(keepdim ? p.keepdim_shape : p.out_shape, on_device_of(x, x.dtype()));
  Tensor mean_k = empty(p.keepdim_shape, on_device_of(x, x.dtype()));  // (outer, inner) layout too
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::reduce_var(x.dtype(), p.x.raw_data(), out.raw_data(), mean_k.raw_data(), p.outer, p.R, p.inner, correction,
                       x.device().index);
      return;
    }
    cpu::var_kernel<T>(p.x.data_ptr<T>(), out.data_ptr<T>(), mean_k.data_ptr<T>(), p.outer, p.R, p.inner, correction);
  });
  if (!needs_grad({x})) return out;
  // d var / d x = 2 (x - mean) / (R - correction): saves x and the (small) mean.
  double scale = 2.0 / static_cast<double>(std::max<int64_t>(p.R - correction, 0));
  return record(out, op, {x}, [scale, ks = p.keepdim_shape, x = SavedTensor(x),
                               mean_k = SavedTensor(mean_k)](const Tensor& g) -> TensorList {
    return {mul(sub(x.get(), mean_k.get()), mul(g.reshape(ks), scale))};
  });
}

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  const char* op = "logsumexp";
  cpu::ReducePlan p = plan_reduce(x, dims, op);
  Tensor out = empty(keepdim ? p.keepdim_shape : p.out_shape, on_device_of(x, x.dtype()));
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (x.device().is_cuda()) {
      cuda::reduce_logsumexp(x.dtype(), p.x.raw_data(), out.raw_data(), p.outer, p.R, p.inner, x.device().index);
      return;
    }
    cpu::logsumexp_kernel<T>(p.x.data_ptr<T>(), out.data_ptr<T>(), p.outer, p.R, p.inner);
  });
  if (!needs_grad({x})) return out;
  // d lse / d x = exp(x - lse) = softmax(x) over dims: saves x and the (small) output.
  return record(out, op, {x}, [ks = p.keepdim_shape, x = SavedTensor(x), out = SavedTensor(out)](const Tensor& g) -> TensorList {
    return {mul(exp(sub(x.get(), out.get().reshape(ks))), g.reshape(ks))};
  });
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { return extremum_values<true>(x, dims, keepdim, "amax"); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { return extremum_values<false>(x, dims, keepdim, "amin"); }
Tensor max(const Tensor& x) { return extremum_values<true>(x, {}, false, "max"); }
Tensor min(const Tensor& x) { return extremum_values<false>(x, {}, false, "min"); }

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { return extremum_dim<true>(x, dim, keepdim, "max"); }
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { return extremum_dim<false>(x, dim, keepdim, "min"); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum<true>(x, {dim}, keepdim, false, true, "argmax").indices;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum<false>(x, {dim}, keepdim, false, true, "argmin").indices;
}

}  // namespace relgrad
