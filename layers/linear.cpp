#include "layers/linear.h"

#include <cmath>

namespace relgrad {

namespace {
Tensor uniform_init(const Shape& shape, double bound, Generator* generator) {
  NoGradGuard no_grad;
  return rand(shape, kFloat32, generator) * (2 * bound) - bound;
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator* generator) : in_features(in), out_features(out) {
  RG_CHECK_T(ShapeError, in > 0 && out > 0, "Linear", "in_features and out_features must be positive, got ", in,
             " and ", out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", uniform_init({out, in}, bound, generator));
  if (with_bias) bias = register_parameter("bias", uniform_init({out}, bound, generator));
}

Tensor Linear::forward(const Tensor& x) const {
  RG_CHECK_T(ShapeError, x.dim() >= 1 && x.size(-1) == in_features, "Linear", "expected input (..., ", in_features,
             "), got ", shape_str(x.shape()));
  // x Wᵀ + b as one GEMM accumulating onto the broadcast bias (addmm; its twin matmul + add is the
  // test oracle). The transposed weight is read in place.
  return bias.defined() ? addmm(bias, x, weight.transpose(0, 1)) : matmul(x, weight.transpose(0, 1));
}

}  // namespace relgrad
