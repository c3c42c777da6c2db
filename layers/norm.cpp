#include "layers/norm.h"

namespace relgrad {

namespace {
void check_normalized_shape(const Shape& shape, const char* layer) {
  RG_CHECK_T(ShapeError, !shape.empty(), layer, "normalized_shape must not be empty");
  for (int64_t s : shape)
    RG_CHECK_T(ShapeError, s > 0, layer, "normalized_shape must be positive, got ", shape_str(shape));
}

// x's trailing dims must equal normalized_shape; the message shows the expected (..., *shape).
void check_input(const Tensor& x, const Shape& shape, const char* layer) {
  RG_CHECK(x.defined(), layer, "x is an undefined tensor");
  const int64_t n = static_cast<int64_t>(shape.size());
  bool ok = x.dim() >= n;
  for (int64_t k = 0; ok && k < n; ++k) ok = x.size(x.dim() - n + k) == shape[k];
  std::string expected = shape_str(shape);  // "(a,b)" → "(..., a,b)"
  RG_CHECK_T(ShapeError, ok, layer, "expected input (..., ", expected.substr(1), ", got ", shape_str(x.shape()));
}
}  // namespace

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, bool with_bias) : normalized_shape(std::move(shape)), eps(eps_) {
  check_normalized_shape(normalized_shape, "LayerNorm");
  RG_CHECK(eps > 0, "LayerNorm", "eps must be positive, got ", eps);
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    if (with_bias) bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  check_input(x, normalized_shape, "LayerNorm");
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

RMSNorm::RMSNorm(Shape shape, double eps_, bool affine) : normalized_shape(std::move(shape)), eps(eps_) {
  check_normalized_shape(normalized_shape, "RMSNorm");
  RG_CHECK(eps == -1 || eps > 0, "RMSNorm", "eps must be positive (or -1 for the dtype's epsilon), got ", eps);
  if (affine) weight = register_parameter("weight", ones(normalized_shape));
}

Tensor RMSNorm::forward(const Tensor& x) const {
  check_input(x, normalized_shape, "RMSNorm");
  return rms_norm(x, normalized_shape, weight, eps);
}

}  // namespace relgrad
