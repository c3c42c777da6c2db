// Reductions over any set of dims with keepdim: sum, mean (more in this family below).
// Backward of a reduction broadcasts the output gradient back over the reduced dims.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/cpu/reduce.h"

namespace relgrad {

namespace {

void check_cpu(const Tensor& x, const char* op) {
  RG_CHECK_T(DeviceError, x.device().is_cpu(), op, "not implemented for ", x.device().str(),
             " tensors yet (shape ", shape_str(x.shape()), ")");
}

// sum or mean (scale = 1/R) over dims.
Tensor sum_scaled(const Tensor& x, const Shape& dims, bool keepdim, bool mean_, const char* op) {
  check_cpu(x, op);
  cpu::ReducePlan p = cpu::plan_reduce(x, dims, op);
  Tensor out = empty(keepdim ? p.keepdim_shape : p.out_shape, TensorOptions(x.dtype()));
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    double scale = mean_ ? 1.0 / static_cast<double>(p.R) : 1.0;
    cpu::sum_kernel<T>(p.x.data_ptr<T>(), out.data_ptr<T>(), p.outer, p.R, p.inner, scale);
  });
  if (!needs_grad({x})) return out;
  return record(out, op, {x}, [in_shape = x.shape(), ks = p.keepdim_shape, R = p.R, mean_](const Tensor& g) -> TensorList {
    Tensor gk = g.reshape(ks).expand(in_shape);
    return {mean_ ? mul(gk, 1.0 / static_cast<double>(R)) : contiguous(gk)};
  });
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { return sum_scaled(x, dims, keepdim, false, "sum"); }
Tensor sum(const Tensor& x) { return sum(x, {}, false); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { return sum_scaled(x, dims, keepdim, true, "mean"); }
Tensor mean(const Tensor& x) { return mean(x, {}, false); }

}  // namespace relgrad
