#include "layers/rotary.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>
#include <sstream>
#include <vector>

#include "layers/schemes.h"

namespace relgrad {

RotaryFrequencies rotary_frequencies(int64_t head_dim, double base, const RotaryScaling& scaling) {
  const int64_t half = head_dim / 2;
  const double s = scaling.factor, D = static_cast<double>(head_dim);
  RotaryFrequencies f;
  // NTK-aware: a larger base stretches the low frequencies most, the highest hardly at all.
  const double b = scaling.kind == RopeScalingKind::Ntk ? base * std::pow(s, D / (D - 2.0)) : base;
  for (int64_t k = 0; k < half; ++k) f.timescale.push_back(std::pow(b, 2.0 * k / D));
  if (scaling.kind == RopeScalingKind::Linear)
    for (double& t : f.timescale) t *= s;
  if (scaling.kind == RopeScalingKind::Yarn) {
    // The pair index whose wavelength 2π·timescale fits `rotations` times into the trained length L,
    // floored / ceiled and kept inside [0, D − 1] as HF's find_correction_range.
    const double L = static_cast<double>(scaling.original_length), two_pi = 2.0 * std::acos(-1.0);
    auto pair_of = [&](double rotations) { return D * std::log(L / (rotations * two_pi)) / (2.0 * std::log(base)); };
    const double low = std::max(std::floor(pair_of(32.0)), 0.0);  // β_fast
    double high = std::min(std::ceil(pair_of(1.0)), D - 1.0);      // β_slow
    if (low == high) high += 0.001;  // a one-step ramp, not a division by zero
    for (int64_t k = 0; k < half; ++k) {
      // ramp 0: the pair keeps its trained frequency (many turns in L); 1: interpolated by s.
      const double ramp = std::clamp((static_cast<double>(k) - low) / (high - low), 0.0, 1.0);
      const double theta = 1.0 / f.timescale[k];
      f.timescale[k] = 1.0 / (theta / s * ramp + theta * (1.0 - ramp));
    }
    f.mscale = s > 1.0 ? 0.1 * std::log(s) + 1.0 : 1.0;  // on q and k: logits × (0.1 ln s + 1)²
  }
  return f;
}

RoPE::RoPE(int64_t head_dim_, double base_, Pairing pairing_, RotaryScaling scaling_)
    : head_dim(head_dim_), base(base_), pairing(pairing_), scaling(scaling_), rotated_pairs(head_dim_ / 2) {
  const char* op = "RoPE";
  RG_CHECK_T(ShapeError, head_dim > 0 && head_dim % 2 == 0, op, "head_dim must be positive and even, got ",
             head_dim);
  RG_CHECK(base > 1.0, op, "base must be > 1, got ", base);
  RG_CHECK(scaling.kind == RopeScalingKind::None || (std::isfinite(scaling.factor) && scaling.factor >= 1.0), op,
           "the scaling factor must be >= 1, got ", scaling.factor);
  RG_CHECK(scaling.kind != RopeScalingKind::Yarn || scaling.original_length > 0, op,
           "yarn scaling needs the trained length (original_length > 0), got ", scaling.original_length);
  RG_CHECK(scaling.kind != RopeScalingKind::Ntk || head_dim > 2, op,
           "ntk scaling needs head_dim > 2 (its exponent is D / (D − 2)), got ", head_dim);
  set_rotated_pairs(head_dim / 2);
}

void RoPE::set_rotated_pairs(int64_t pairs) {
  RG_CHECK(pairs >= 0 && pairs <= head_dim / 2, "RoPE", "rotated pairs must be in [0, ", head_dim / 2, "], got ",
           pairs);
  rotated_pairs = pairs;
  frequencies = rotary_frequencies(head_dim, base, scaling);
  for (int64_t k = pairs; k < head_dim / 2; ++k) frequencies.timescale[k] = std::numeric_limits<double>::infinity();
  rotary_tables.clear();
}

Tensor RoPE::rotate(const Tensor& x, const Tensor& positions, bool key_side) const {
  const char* op = "RoPE";
  RG_CHECK_T(ShapeError, x.dim() >= 2 && x.size(-1) == head_dim, op, "expected x of shape (..., T, ", head_dim,
             "), got ", shape_str(x.shape()));
  const int64_t T = x.size(-2), half = head_dim / 2;
  RG_CHECK_T(DTypeError, positions.dtype() == kInt64, op, "positions must be int64, got ", dtype_name(positions.dtype()));
  RG_CHECK_T(ShapeError, positions.dim() == 1 && positions.size(0) == T, op, "positions must have shape (", T,
             "), got ", shape_str(positions.shape()));
  std::vector<int64_t> pos = positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  // cos/sin tables (T, D/2), computed in float64 on the host, cached on x's device by positions.
  const bool amplitude = xpos_scale_base > 0;
  CacheKey key{{head_dim, key_bits(base), int64_t(scaling.kind), key_bits(scaling.factor), scaling.original_length,
                rotated_pairs, key_bits(xpos_scale_base), int64_t(amplitude && key_side)},
               x.dtype(), x.device()};
  key.values.insert(key.values.end(), pos.begin(), pos.end());
  const auto [cos_t, sin_t] = rotary_tables.get(key, [&] {
    std::vector<double> c(static_cast<size_t>(T * half)), s(c.size());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < half; ++k) {
        const double angle = static_cast<double>(pos[t]) / frequencies.timescale[k];  // ∞: 0, unrotated
        double a = frequencies.mscale;
        if (amplitude) {  // xPos: ζ_k = (2k/D + 0.4) / 1.4, ζ_k^(p/γ) on q, ζ_k^(−p/γ) on k
          const double zeta = (2.0 * k / head_dim + 0.4) / 1.4;
          a *= std::pow(zeta, (key_side ? -1.0 : 1.0) * static_cast<double>(pos[t]) / xpos_scale_base);
        }
        c[t * half + k] = a * std::cos(angle);
        s[t * half + k] = a * std::sin(angle);
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
  return rotate(k, mapped(key_positions), /*key=*/true);
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
  return measured_content_response(*this, in, reach);
}

std::vector<std::vector<double>> measured_content_response(const PositionalScheme& scheme, const ResponseInput& in,
                                                           int64_t reach) {
  const int64_t B = in.q.size(0), H = in.q.size(1), t2 = in.q.size(2), D = in.q.size(3), t1 = in.k.size(2);
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, in.causal);
  g.query_positions = from_vector<int64_t>(in.positions, {t2});
  auto [qc, kc] = scheme.content_qk(in.q, in.k, g);
  return mean_by_delta(in, matmul(qc, kc.transpose(-1, -2)), reach, scheme.logit_scale(D));  // logits (B, H, t2, t1)
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
  return check_scaling(c);
}

std::string check_scaling(const SchemeCheck& c) {
  const PositionalConfig& p = c.config;
  if (p.rope_scaling == RopeScalingKind::None) return "";
  const std::string kind = kRopeScalingNames.name(p.rope_scaling);
  if (!(std::isfinite(p.rope_scaling_factor) && p.rope_scaling_factor >= 1.0)) {
    std::ostringstream f;
    f << p.rope_scaling_factor;
    return c.key + "rope_scaling_factor must be >= 1 (the new length over the trained one) with " + c.key +
           "rope_scaling = " + kind + ", got " + f.str();
  }
  if (p.rope_scaling == RopeScalingKind::Yarn && p.rope_original_length <= 0)
    return c.key + "rope_scaling = yarn needs " + c.key + "rope_original_length, the trained context (> 0), got " +
           std::to_string(p.rope_original_length);
  if (p.rope_scaling == RopeScalingKind::Ntk && c.head_dim != 0 && c.head_dim <= 2)
    return c.key + "rope_scaling = ntk needs a head size above 2 (its exponent is D / (D − 2)), but model.d_model / "
           "model.n_heads = " + std::to_string(c.head_dim);
  return "";
}

}  // namespace relgrad
