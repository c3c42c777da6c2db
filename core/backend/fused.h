// The backend seam for the fused elementwise chains of a transformer block (kernels:
// core/cpu/fused.h, cuda/fused.h), over rows (R, N). Every tensor argument is contiguous; optional
// ones may be undefined.
#pragma once
#include "core/base/activation.h"
#include "core/tensor.h"

namespace relgrad::backend {

// x (R·N elements, any shape (..., N)), b (N) → y = act(x + b), x's shape. With `kept` (a backward to
// come), gelu on the CPU, x up to cpu::kKeepErfBytes, also sets *kept to erf((x + b) / √2), x's shape,
// which the backward then reads instead of computing it again (core/cpu/fused.h); otherwise *kept is
// left undefined.
Tensor bias_activation_forward(const Tensor& x, const Tensor& b, Activation act, int64_t R, int64_t N,
                               Tensor* kept = nullptr);
// gy, x (x's shape), b (N), kept (the forward's, or undefined) → dx (x's shape) and, when need_b,
// db (N) = the sum of dx over rows. The same bits with kept or without.
struct BiasActivationGrads {
  Tensor dx, db;
};
BiasActivationGrads bias_activation_backward(const Tensor& gy, const Tensor& x, const Tensor& b, Activation act,
                                             bool need_b, int64_t R, int64_t N, const Tensor& kept = Tensor());

// residual, branch (one shape, R·N elements) → sum = residual + branch, y = norm(sum) (both that
// shape), and per row the mean (R) (undefined when rms) and rstd (R): what norm_backward
// (core/backend/norm.h) takes with `sum` as its x. weight and bias (N) optional.
struct ResidualNormForward {
  Tensor sum, y, mean, rstd;
};
ResidualNormForward residual_norm_forward(const Tensor& residual, const Tensor& branch, const Tensor& weight,
                                          const Tensor& bias, bool rms, int64_t R, int64_t N, double eps);

}  // namespace relgrad::backend
