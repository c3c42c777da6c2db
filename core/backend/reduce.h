// The backend seam for reductions (kernels: core/cpu/reduce.h, cuda/reduce.h). Each entry reads the
// (outer, R, inner) layout of a ReducePlan, whose contiguous tensor p.x is on the input's device,
// and allocates its outputs there with the given shape (the keepdim or the reduced shape).
#pragma once
#include "core/cpu/reduce.h"
#include "core/tensor.h"

namespace relgrad::backend {

using cpu::plan_reduce;
using cpu::ReducePlan;

// out (outer, inner) = scale · Σ_r x (outer, r, inner).
Tensor reduce_sum(const ReducePlan& p, const Shape& shape, double scale, const char* op);
// var (outer, inner) with the given correction, and the mean (p.keepdim_shape) the backward needs.
struct VarResult {
  Tensor var, mean;
};
VarResult reduce_var(const ReducePlan& p, const Shape& shape, int64_t correction, const char* op);
// out (outer, inner) = log Σ_r exp x (outer, r, inner).
Tensor reduce_logsumexp(const ReducePlan& p, const Shape& shape, const char* op);
// The max (is_max) or min over R: values and/or the int64 index of the first extremum; float and
// int64 inputs (bool is refused).
struct ExtremumResult {
  Tensor values, indices;
};
ExtremumResult reduce_extremum(bool is_max, const ReducePlan& p, const Shape& shape, bool want_values,
                               bool want_indices, const char* op);
// gx (in_shape, contiguous (outer, R, inner)) = g (outer, inner) at indices (outer, inner), 0 elsewhere.
Tensor scatter_to_index(const Tensor& g, const Tensor& indices, const Shape& in_shape, int64_t outer, int64_t R,
                        int64_t inner, const char* op);

}  // namespace relgrad::backend
