#include "layers/rotary_variants.h"

#include <cmath>
#include <sstream>

#include "layers/schemes.h"

namespace relgrad {

namespace {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

// ---- xPos ----

XPos::XPos(int64_t head_dim_, double base_, double scale_base, RotaryScaling scaling_)
    : RoPE(head_dim_, base_, Pairing::Interleaved, scaling_) {
  RG_CHECK(std::isfinite(scale_base) && scale_base > 0, "XPos", "scale_base must be > 0, got ", scale_base);
  xpos_scale_base = scale_base;
}

std::string XPos::check(const SchemeCheck& c) {
  if (!(std::isfinite(c.config.xpos_scale_base) && c.config.xpos_scale_base > 0))
    return c.key + "xpos_scale_base must be > 0, got " + number(c.config.xpos_scale_base);
  return RoPE::check(c);
}

// ---- p-RoPE ----

int64_t PRoPE::rotated_pairs_for(double fraction, int64_t head_dim) {
  return static_cast<int64_t>(std::floor(fraction * static_cast<double>(head_dim) / 2.0));
}

PRoPE::PRoPE(int64_t head_dim_, double base_, double fraction_, RotaryScaling scaling_)
    : RoPE(head_dim_, base_, Pairing::Interleaved, scaling_), fraction(fraction_) {
  RG_CHECK(fraction >= 0.0 && fraction <= 1.0, "PRoPE", "fraction must be in [0, 1], got ", fraction);
  set_rotated_pairs(rotated_pairs_for(fraction, head_dim));
}

std::string PRoPE::check(const SchemeCheck& c) {
  if (!(c.config.rope_fraction >= 0.0 && c.config.rope_fraction <= 1.0))
    return c.key + "rope_fraction must be in [0, 1] (the share of frequencies that rotate), got " +
           number(c.config.rope_fraction);
  return RoPE::check(c);
}

// ---- PoPE ----

PoPE::PoPE(int64_t heads, int64_t head_dim_, double base_) : num_heads(heads), head_dim(head_dim_), base(base_) {
  const char* op = "PoPE";
  RG_CHECK(num_heads > 0, op, "num_heads must be positive, got ", num_heads);
  RG_CHECK_T(ShapeError, head_dim > 0, op, "head_dim must be positive, got ", head_dim);
  RG_CHECK(base > 1.0, op, "base must be > 1, got ", base);
  // Zero offsets, as the paper's default and x-transformers' (the uniform [−2π, 0] start is an option there).
  phase_offset = register_parameter("phase_offset", zeros({num_heads, head_dim}));
}

Tensor PoPE::phases(const Tensor& positions, const Tensor& like) const {
  const char* op = "PoPE";
  RG_CHECK_T(DTypeError, positions.dtype() == kInt64, op, "positions must be int64, got ", dtype_name(positions.dtype()));
  RG_CHECK_T(ShapeError, positions.dim() == 1, op, "positions must be 1-d, got ", shape_str(positions.shape()));
  std::vector<int64_t> pos = positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  const int64_t T = static_cast<int64_t>(pos.size());
  CacheKey key{{head_dim, key_bits(base)}, like.dtype(), like.device()};
  key.values.insert(key.values.end(), pos.begin(), pos.end());
  return phase_tables.get(key, [&] {
    std::vector<double> a(static_cast<size_t>(T * head_dim));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < head_dim; ++c)
        a[t * head_dim + c] = static_cast<double>(pos[t]) / std::pow(base, static_cast<double>(c) / head_dim);
    return from_vector<double>(a, {T, head_dim}).to(like.dtype()).to(like.device());
  });
}

Tensor PoPE::polar(const Tensor& magnitude, const Tensor& phase) {
  Shape wide = magnitude.shape();
  wide.back() *= 2;
  return stack({magnitude * cos(phase), magnitude * sin(phase)}, -1).reshape(wide);  // (…, T, D, 2) → (…, T, 2D)
}

Tensor PoPE::content_query(const Tensor& q, const AttentionGeometry& g) const {
  RG_CHECK_T(ShapeError, q.dim() == 4 && q.size(1) == num_heads && q.size(3) == head_dim, "PoPE", "built for ",
             num_heads, " heads of size ", head_dim, ", the attention has q ", shape_str(q.shape()));
  return polar(softplus(q), phases(g.positions(), q));  // phases (t2, D) broadcast over B, H
}

Tensor PoPE::content_key(const Tensor& k, const Tensor& key_positions) const {
  RG_CHECK_T(ShapeError, k.dim() == 4 && k.size(1) == num_heads && k.size(3) == head_dim, "PoPE", "built for ",
             num_heads, " heads of size ", head_dim, ", the attention has k ", shape_str(k.shape()));
  // φ clamped to [−2π, 0] as x-transformers and PoPE-pytorch: no gradient where it is held at an end.
  const double two_pi = 2.0 * std::acos(-1.0);
  Tensor phi = masked_fill(phase_offset, gt(phase_offset, 0.0), 0.0);
  phi = masked_fill(phi, lt(phase_offset, -two_pi), -two_pi);
  if (phi.dtype() != k.dtype()) phi = to_dtype(phi, k.dtype());
  Tensor phase = phases(key_positions, k) + phi.unsqueeze(1);  // (T, D) + (H, 1, D) → (H, T, D)
  return polar(softplus(k), phase);
}

std::vector<std::vector<double>> PoPE::response(const ResponseInput& in, int64_t reach) const {
  return measured_content_response(*this, in, reach);
}

std::string PoPE::check(const SchemeCheck& c) {
  if (!(c.config.rope_base > 1.0)) return c.key + "rope_base must be > 1, got " + number(c.config.rope_base);
  return "";
}

double PoPE::parameters(const PositionalConfig&, double n_heads, double head_dim) { return n_heads * head_dim; }

// ---- the registry entries of the rotary family (layers/schemes.h) ----

namespace {

RotaryScaling rotary_scaling(const PositionalConfig& p) {
  return {p.rope_scaling, p.rope_scaling_factor, p.rope_original_length};
}

// rope, xpos and p_rope share the RoPE scalings (set at evaluation: relgrad eval / sample --model.…).
std::vector<std::string> scaled(std::vector<std::string> options) {
  for (const char* k : {"rope_scaling", "rope_scaling_factor", "rope_original_length"}) options.push_back(k);
  return options;
}

}  // namespace

SchemeEntry rope_scheme() {
  SchemeEntry e{"rope", scaled({"rope_base"}), [](const SchemeContext& c) {
                  return std::make_shared<RoPE>(c.head_dim, c.config.rope_base, RoPE::Pairing::Interleaved,
                                                rotary_scaling(c.config));
                }};
  e.check = RoPE::check;
  e.random_positions = true;
  // The family's knobs, declared once: rope_base (every rotary scheme), xpos's, p_rope's, the scalings.
  using P = PositionalConfig;
  e.knobs = {SchemeKnob::member("rope_base", "frequency base", &P::rope_base),
             SchemeKnob::member("xpos_scale_base", "γ of the decay ζ^(−δ/γ)", &P::xpos_scale_base),
             SchemeKnob::member("rope_fraction", "share of the frequencies that rotate (the highest)", &P::rope_fraction),
             SchemeKnob::choice("rope_scaling", "RoPE scaling past the trained length (eval, sample)", kRopeScalingNames,
                                &P::rope_scaling),
             SchemeKnob::member("rope_scaling_factor", "s ≥ 1: new length / trained length", &P::rope_scaling_factor),
             SchemeKnob::member("rope_original_length", "yarn: the trained context", &P::rope_original_length)};
  e.summary = "rotary (RoPE)";
  return e;
}

SchemeEntry xpos_scheme() {
  SchemeEntry e{"xpos", scaled({"rope_base", "xpos_scale_base"}), [](const SchemeContext& c) {
                  return std::make_shared<XPos>(c.head_dim, c.config.rope_base, c.config.xpos_scale_base,
                                                rotary_scaling(c.config));
                }};
  e.causal_only = true;
  e.check = XPos::check;
  // γ = T/2 at half a window: with the default 512 the decay would shrink no score by more than 8 % in it.
  e.fit = [](PositionalConfig& p, const SchemeFit& f) {
    if (f.rule == FitRule::HalfWindow) p.xpos_scale_base = static_cast<double>(f.window) / 2;
  };
  e.summary = "rotary with decay (xPos)";
  return e;
}

SchemeEntry p_rope_scheme() {
  SchemeEntry e{"p_rope", scaled({"rope_base", "rope_fraction"}), [](const SchemeContext& c) {
                  return std::make_shared<PRoPE>(c.head_dim, c.config.rope_base, c.config.rope_fraction,
                                                 rotary_scaling(c.config));
                }};
  e.check = PRoPE::check;
  e.summary = "rotary on part of each head (p-RoPE)";
  return e;
}

SchemeEntry pope_scheme() {
  SchemeEntry e{"pope", {"rope_base"}, [](const SchemeContext& c) {
                  return std::make_shared<PoPE>(c.n_heads, c.head_dim, c.config.rope_base);
                }};
  e.check = PoPE::check;
  e.parameters = PoPE::parameters;
  e.summary = "polar rotary (PoPE)";
  return e;
}

}  // namespace relgrad
