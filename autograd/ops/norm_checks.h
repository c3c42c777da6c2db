// The argument checks of layer_norm, rms_norm and their fused residual forms (autograd/ops/norm.cpp,
// autograd/ops/fused.cpp), so all four word a failure the same way.
#pragma once
#include "core/tensor.h"

namespace relgrad {

// Returns N, the number of elements in one normalised row.
inline int64_t check_norm_args(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias,
                               const char* op) {
  RG_CHECK(x.defined(), op, "called with an undefined input tensor");
  dispatch_float(x.dtype(), op, [](auto) {});
  RG_CHECK_T(ShapeError, !ns.empty(), op, "normalized_shape must have at least one dim, got () for input ",
             shape_str(x.shape()));
  const int64_t nd = static_cast<int64_t>(ns.size());
  RG_CHECK_T(ShapeError, x.dim() >= nd && Shape(x.shape().end() - nd, x.shape().end()) == ns, op, "normalized_shape ",
             shape_str(ns), " does not match the last dims of input ", shape_str(x.shape()),
             " (expected an input of shape (*,", shape_str(ns).substr(1), ")");
  auto check_param = [&](const Tensor& p, const char* what) {
    if (!p.defined()) return;
    RG_CHECK_T(ShapeError, p.shape() == ns, op, what, " of shape ", shape_str(p.shape()),
               " does not match normalized_shape ", shape_str(ns), " (input ", shape_str(x.shape()), ")");
    RG_CHECK_T(DTypeError, p.dtype() == x.dtype(), op, what, " is ", dtype_name(p.dtype()), " but input is ",
               dtype_name(x.dtype()));
    RG_CHECK_T(DeviceError, p.device() == x.device(), op, what, " is on ", p.device().str(), " but input is on ",
               x.device().str());
  };
  check_param(weight, "weight");
  check_param(bias, "bias");
  return shape_numel(ns);
}

}  // namespace relgrad
