#include "layers/absolute_position.h"

#include <cmath>
#include <vector>

namespace relgrad {

Tensor sinusoidal_positions(int64_t first, int64_t count, int64_t d_model, TensorOptions options) {
  RG_CHECK_T(ShapeError, first >= 0 && count >= 0 && d_model > 0, "sinusoidal_positions",
             "need first >= 0, count >= 0 and d_model > 0, got ", first, ", ", count, " and ", d_model);
  std::vector<double> pe(static_cast<size_t>(count * d_model));
  for (int64_t c = 0; c < d_model; ++c) {
    // 10000^(−2i/C) with 2i = c rounded down to even: columns 2i and 2i + 1 share a frequency.
    const double inv_freq = std::pow(10000.0, -static_cast<double>(c - c % 2) / static_cast<double>(d_model));
    for (int64_t t = 0; t < count; ++t) {
      const double angle = static_cast<double>(first + t) * inv_freq;
      pe[static_cast<size_t>(t * d_model + c)] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  return from_vector<double>(pe, {count, d_model}).to(options.dtype_).to(options.device_);  // (count, C)
}

AbsolutePosition::AbsolutePosition(const std::string& k, int64_t C, int64_t max_rows, const char* op_name,
                                   Generator* generator)
    : kind(k), d_model(C), max_positions(max_rows), op(op_name) {
  RG_CHECK(kind == "sinusoidal" || kind == "learned", op, "unknown absolute_position '", kind,
           "' for AbsolutePosition (expected sinusoidal or learned)");
  RG_CHECK_T(ShapeError, C > 0, op, "AbsolutePosition needs d_model > 0, got ", C);
  if (kind != "learned") return;
  RG_CHECK_T(ShapeError, max_rows > 0, op, "absolute_position learned needs max_positions >= 1, got ",
             max_rows);
  Tensor w;
  {
    NoGradGuard no_grad;
    w = randn({max_rows, C}, kFloat32, generator);  // (max_positions, C), N(0, 1) as Embedding
  }
  weight = register_parameter("weight", w);
}

Tensor AbsolutePosition::forward(const Tensor& x, int64_t first) const {
  RG_CHECK_T(ShapeError, x.defined() && x.dim() == 3 && x.size(2) == d_model, op,
             "absolute positions need embeddings (B, T, ", d_model, "), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t T = x.size(1);
  if (kind == "sinusoidal")
    return x + sinusoidal_positions(first, T, d_model, TensorOptions(x.dtype()).device(x.device()));
  RG_CHECK_T(IndexError, first + T <= max_positions, op,
             "pos_embed (absolute_position learned): a sequence of length ", first + T,
             first > 0 ? " (cached and new tokens)" : "", " is longer than max_positions ", max_positions);
  return x + weight.narrow(0, first, T);  // (B, T, C) + (T, C)
}

}  // namespace relgrad
