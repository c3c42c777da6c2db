// The backend seam for layer_norm / rms_norm (kernels: core/cpu/norm.h, cuda/norm.h) over rows
// (R, N). Every tensor argument is contiguous; optional ones may be undefined.
#pragma once
#include "core/tensor.h"

namespace relgrad::backend {

// y (x's shape), and per row the mean (R) (undefined when rms) and rstd (R); weight and bias (N) optional.
struct NormForward {
  Tensor y, mean, rstd;
};
NormForward norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, bool rms, int64_t R, int64_t N,
                         double eps);
// dx (x_shape), dweight and dbias (ns), each only when asked for (else undefined), from g (R, N) and
// what the forward saved.
struct NormGrads {
  Tensor dx, dw, db;
};
NormGrads norm_backward(const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                        const Shape& x_shape, const Shape& ns, bool need_x, bool need_w, bool need_b, int64_t R,
                        int64_t N);

}  // namespace relgrad::backend
