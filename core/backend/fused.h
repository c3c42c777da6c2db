// The backend seam for the fused elementwise chains of a transformer block (kernels:
// core/cpu/fused.h, cuda/fused.h), over rows (R, N). Every tensor argument is contiguous; optional
// ones may be undefined.
#pragma once
#include "core/base/activation.h"
#include "core/tensor.h"

namespace relgrad::backend {

// x (R·N elements, any shape (..., N)), b (N) → y = act(x + b), x's shape.
Tensor bias_activation_forward(const Tensor& x, const Tensor& b, Activation act, int64_t R, int64_t N);
// gy, x (x's shape), b (N) → dx (x's shape) and, when need_b, db (N) = the sum of dx over rows.
struct BiasActivationGrads {
  Tensor dx, db;
};
BiasActivationGrads bias_activation_backward(const Tensor& gy, const Tensor& x, const Tensor& b, Activation act,
                                             bool need_b, int64_t R, int64_t N);

// residual, branch (one shape, R·N elements) → sum = residual + branch, y = norm(sum) (both that
// shape), and per row the mean (R) (undefined when rms) and rstd (R): what norm_backward
// (core/backend/norm.h) takes with `sum` as its x. weight and bias (N) optional.
struct ResidualNormForward {
  Tensor sum, y, mean, rstd;
};
ResidualNormForward residual_norm_forward(const Tensor& residual, const Tensor& branch, const Tensor& weight,
                                          const Tensor& bias, bool rms, int64_t R, int64_t N, double eps);

}  // namespace relgrad::backend
