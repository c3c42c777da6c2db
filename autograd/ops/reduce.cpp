// Reductions over any set of dims with keepdim: sum, mean, var, logsumexp, amax/amin, max/min (all
// elements, or along one dim with indices) and argmax/argmin. Forward calls the backend entry
// (core/backend/reduce.h) on the (outer, R, inner) layout that plan_reduce gives; backward
// broadcasts the output gradient back over the reduced dims (with ops, so it runs on either device).
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/reduce.h"

namespace relgrad {

namespace {

// The (outer, R, inner) plan serves both devices: its permuted copy (made when the reduced dims are
// not one block of a contiguous tensor) stays on the input's device.
using backend::plan_reduce;
using backend::ReducePlan;

// sum or mean (scale = 1/R) over dims.
Tensor sum_scaled(const Tensor& x, const Shape& dims, bool keepdim, bool mean_, const char* op) {
  RG_PROFILE_OP(op);
  ReducePlan p = plan_reduce(x, dims, op);
  const double scale = mean_ ? 1.0 / static_cast<double>(p.R) : 1.0;
  Tensor out = backend::reduce_sum(p, keepdim ? p.keepdim_shape : p.out_shape, scale, op);
  if (!needs_grad({x})) return out;
  return record(out, op, {x}, [in_shape = x.shape(), ks = p.keepdim_shape, R = p.R, mean_](const Tensor& g) -> TensorList {
    Tensor gk = g.reshape(ks).expand(in_shape);
    return {mean_ ? mul(gk, 1.0 / static_cast<double>(R)) : contiguous(gk)};
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
  RG_PROFILE_OP(op);
  ReducePlan p = plan_reduce(x, dims, op);
  RG_CHECK_T(IndexError, p.R > 0, op, "cannot reduce over a dimension of size 0: input shape ", shape_str(x.shape()),
             ", dims ", shape_str(p.dims));
  const Shape& shape = keepdim ? p.keepdim_shape : p.out_shape;
  backend::ExtremumResult r = backend::reduce_extremum(kMax, p, shape, want_values, want_indices, op);
  return {r.values, r.indices, p.keepdim_shape};
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
    return {backend::scatter_to_index(g, indices.get(), in, outer, R, inner, op)};
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
  RG_PROFILE_OP(op);
  ReducePlan p = plan_reduce(x, dims, op);
  backend::VarResult r = backend::reduce_var(p, keepdim ? p.keepdim_shape : p.out_shape, correction, op);
  Tensor out = r.var, mean_k = r.mean;  // mean_k: (outer, inner) layout too
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
  RG_PROFILE_OP(op);
  ReducePlan p = plan_reduce(x, dims, op);
  Tensor out = backend::reduce_logsumexp(p, keepdim ? p.keepdim_shape : p.out_shape, op);
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
