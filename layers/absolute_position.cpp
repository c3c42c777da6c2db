#include "layers/absolute_position.h"

#include <cmath>
#include <vector>

namespace relgrad {

Tensor sinusoidal_rows(const std::vector<int64_t>& positions, int64_t d_model, TensorOptions options) {
  const int64_t count = static_cast<int64_t>(positions.size());
  RG_CHECK_T(ShapeError, d_model > 0, "sinusoidal_positions", "need d_model > 0, got ", d_model);
  std::vector<double> pe(static_cast<size_t>(count * d_model));
  for (int64_t t = 0; t < count; ++t)
    RG_CHECK_T(IndexError, positions[t] >= 0, "sinusoidal_positions", "position ", t, " is ", positions[t],
               ", must be >= 0");
  for (int64_t c = 0; c < d_model; ++c) {
    // 10000^(−2i/C) with 2i = c rounded down to even: columns 2i and 2i + 1 share a frequency.
    const double inv_freq = std::pow(10000.0, -static_cast<double>(c - c % 2) / static_cast<double>(d_model));
    for (int64_t t = 0; t < count; ++t) {
      const double angle = static_cast<double>(positions[t]) * inv_freq;
      pe[static_cast<size_t>(t * d_model + c)] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  return from_vector<double>(pe, {count, d_model}).to(options.dtype_).to(options.device_);  // (count, C)
}

Tensor sinusoidal_positions(int64_t first, int64_t count, int64_t d_model, TensorOptions options) {
  RG_CHECK_T(ShapeError, first >= 0 && count >= 0 && d_model > 0, "sinusoidal_positions",
             "need first >= 0, count >= 0 and d_model > 0, got ", first, ", ", count, " and ", d_model);
  std::vector<int64_t> positions(static_cast<size_t>(count));
  for (int64_t t = 0; t < count; ++t) positions[static_cast<size_t>(t)] = first + t;
  return sinusoidal_rows(positions, d_model, options);  // (count, C)
}

AbsolutePosition::AbsolutePosition(AbsolutePositionKind k, int64_t C, int64_t max_rows, const char* op_name,
                                   Generator* generator)
    : kind(k), d_model(C), max_positions(max_rows), op(op_name) {
  RG_CHECK(kind != AbsolutePositionKind::None, op,
           "absolute_position none builds no AbsolutePosition (expected sinusoidal or learned)");
  RG_CHECK_T(ShapeError, C > 0, op, "AbsolutePosition needs d_model > 0, got ", C);
  if (kind != AbsolutePositionKind::Learned) return;
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
  if (kind == AbsolutePositionKind::Sinusoidal) {  // the rows, cached on x's device by (first, T, dtype)
    const Tensor rows = sinusoid_rows.get(CacheKey{{first, T}, x.dtype(), x.device()}, [&] {
      return sinusoidal_positions(first, T, d_model, TensorOptions(x.dtype()).device(x.device()));
    });
    return x + rows;
  }
  RG_CHECK_T(IndexError, first + T <= max_positions, op,
             "pos_embed (absolute_position learned): a sequence of length ", first + T,
             first > 0 ? " (cached and new tokens)" : "", " is longer than max_positions ", max_positions);
  return x + weight.narrow(0, first, T);  // (B, T, C) + (T, C)
}

Tensor AbsolutePosition::forward_at(const Tensor& x, const Tensor& positions) const {
  RG_CHECK_T(ShapeError, x.defined() && x.dim() == 3 && x.size(2) == d_model, op,
             "absolute positions need embeddings (B, T, ", d_model, "), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t T = x.size(1);
  const bool ok = positions.defined() && positions.dtype() == kInt64 && positions.dim() == 1 &&
                  positions.size(0) == T;
  RG_CHECK_T(ShapeError, ok, op, "explicit absolute positions must be int64 (", T, "), got ",
             positions.defined() ? std::string(dtype_name(positions.dtype())) + " " + shape_str(positions.shape())
                                 : std::string("undefined"));
  const std::vector<int64_t> pos = positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  const TensorOptions like_x = TensorOptions(x.dtype()).device(x.device());
  if (kind == AbsolutePositionKind::Sinusoidal) return x + sinusoidal_rows(pos, d_model, like_x);
  for (int64_t t = 0; t < T; ++t)
    RG_CHECK_T(IndexError, pos[t] >= 0 && pos[t] < max_positions, op,
               "pos_embed (absolute_position learned): position ", pos[t], " of token ", t,
               " is outside the table's rows 0 … ", max_positions - 1);
  return x + index_select(weight, 0, positions.to(weight.device()));  // (B, T, C) + (T, C)
}

}  // namespace relgrad
