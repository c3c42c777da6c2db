#include "layers/rotary.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>
#include <sstream>
#include <vector>

#include "layers/schemes.h"

namespace relgrad {

RoPE::RoPE(int64_t head_dim_, double base_, Pairing pairing_) : head_dim(head_dim_), base(base_), pairing(pairing_) {
  RG_CHECK_T(ShapeError, head_dim > 0 && head_dim % 2 == 0, "RoPE", "head_dim must be positive and even, got ",
             head_dim);
  RG_CHECK(base > 1.0, "RoPE", "base must be > 1, got ", base);
}

Tensor RoPE::rotate(const Tensor& x, const Tensor& positions) const {
  const char* op = "RoPE";
  RG_CHECK_T(ShapeError, x.dim() >= 2 && x.size(-1) == head_dim, op, "expected x of shape (..., T, ", head_dim,
             "), got ", shape_str(x.shape()));
  const int64_t T = x.size(-2), half = head_dim / 2;
  RG_CHECK_T(DTypeError, positions.dtype() == kInt64, op, "positions must be int64, got ", dtype_name(positions.dtype()));
  RG_CHECK_T(ShapeError, positions.dim() == 1 && positions.size(0) == T, op, "positions must have shape (", T,
             "), got ", shape_str(positions.shape()));
  std::vector<int64_t> pos = positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  // cos/sin tables (T, D/2), computed in float64 on the host, cached on x's device by positions.
  CacheKey key{{head_dim, key_bits(base)}, x.dtype(), x.device()};
  key.values.insert(key.values.end(), pos.begin(), pos.end());
  const auto [cos_t, sin_t] = rotary_tables.get(key, [&] {
    // inv_freq as HF: 1 / base^(2k/D).
    std::vector<double> c(static_cast<size_t>(T * half)), s(c.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < half; ++k) {
        const double angle = static_cast<double>(pos[t]) / std::pow(base, 2.0 * k / head_dim);
        c[t * half + k] = std::cos(angle);
        s[t * half + k] = std::sin(angle);
      }
    return std::pair<Tensor, Tensor>(from_vector<double>(c, {T, half}).to(x.dtype()).to(x.device()),
                                     from_vector<double>(s, {T, half}).to(x.dtype()).to(x.device()));
  });
  Shape pairs = x.shape();
  if (pairing == Pairing::Interleaved) {
    pairs.back() = half;
    pairs.push_back(2);
    Tensor xp = x.reshape(pairs);                       // (..., T, D/2, 2)
    Tensor x0 = xp.select(-1, 0), x1 = xp.select(-1, 1);  // (..., T, D/2)
    Tensor r0 = x0 * cos_t - x1 * sin_t, r1 = x1 * cos_t + x0 * sin_t;
    return stack({r0, r1}, -1).reshape(x.shape());     // (..., T, D)
  }
  Tensor x0 = x.narrow(-1, 0, half), x1 = x.narrow(-1, half, half);  // (..., T, D/2) each
  return cat({x0 * cos_t - x1 * sin_t, x1 * cos_t + x0 * sin_t}, -1);
}

Tensor RoPE::content_query(const Tensor& q, const AttentionGeometry& g) const {
  RG_CHECK_T(ShapeError, q.size(-1) == head_dim, "RoPE", "built for head_dim ", head_dim, ", the attention has q ",
             shape_str(q.shape()));
  return rotate(q, mapped(g.positions()));
}

Tensor RoPE::content_key(const Tensor& k, const Tensor& key_positions) const {
  RG_CHECK_T(ShapeError, k.size(-1) == head_dim, "RoPE", "built for head_dim ", head_dim, ", the attention has k ",
             shape_str(k.shape()));
  return rotate(k, mapped(key_positions));
}

Tensor RoPE::mapped(const Tensor& positions) const {
  if (!position_map.defined()) return positions;
  const std::vector<int64_t> map = position_map.to(Device::cpu()).contiguous().to_vector<int64_t>();
  std::vector<int64_t> pos = positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  for (size_t t = 0; t < pos.size(); ++t) {
    RG_CHECK_T(IndexError, pos[t] >= 0 && pos[t] < static_cast<int64_t>(map.size()), "RoPE",
               "randomised positions: index ", pos[t], " is outside the position map of ", map.size(),
               " entries");
    pos[t] = map[static_cast<size_t>(pos[t])];
  }
  return from_vector<int64_t>(pos, {static_cast<int64_t>(pos.size())});
}

bool RoPE::fuse(FusedCall& call, const AttentionGeometry& g) const {
  std::tie(call.q, call.k) = content_qk(call.q, call.k, g);
  return true;
}

std::vector<std::vector<double>> RoPE::response(const ResponseInput& in, int64_t reach) const {
  const int64_t B = in.q.size(0), H = in.q.size(1), t2 = in.q.size(2), D = in.q.size(3), t1 = in.k.size(2);
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, in.causal);
  g.query_positions = from_vector<int64_t>(in.positions, {t2});
  auto [qc, kc] = content_qk(in.q, in.k, g);
  std::vector<double> logits = host_values(matmul(qc, kc.transpose(-1, -2)));  // (B, H, t2, t1)
  const double scale = logit_scale(D);
  std::vector<std::vector<double>> out(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> sum(static_cast<size_t>(2 * reach + 1), 0.0);
    std::vector<int64_t> count(sum.size(), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < t2; ++i) {
        if (!in.query_valid[b * t2 + i]) continue;
        for (int64_t j = 0; j < t1; ++j) {
          const int64_t delta = j - in.positions[i];
          if (!in.key_valid[b * t1 + j] || (in.causal && delta > 0) || std::abs(delta) > reach) continue;
          sum[delta + reach] += logits[((b * H + h) * t2 + i) * t1 + j] * scale;
          ++count[delta + reach];
        }
      }
    for (size_t n = 0; n < sum.size(); ++n)
      out[h].push_back(count[n] > 0 ? sum[n] / static_cast<double>(count[n]) : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

// ---- the registry's check (layers/schemes.cpp) ----

std::string RoPE::check(const SchemeCheck& c) {
  if (c.head_dim != 0 && c.head_dim % 2 != 0)
    return c.scheme_key() + " needs an even head size, but model.d_model / model.n_heads = " +
           std::to_string(c.d_model) + " / " + std::to_string(c.n_heads) + " = " + std::to_string(c.head_dim);
  if (!(c.config.rope_base > 1.0)) {
    std::ostringstream base;
    base << c.config.rope_base;
    return c.key + "rope_base must be > 1, got " + base.str();
  }
  return "";
}

}  // namespace relgrad
