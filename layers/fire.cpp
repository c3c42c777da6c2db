#include "layers/fire.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "layers/schemes.h"

namespace relgrad {

FireMlp::FireMlp(int64_t width, int64_t heads, Generator* init) {
  in = register_module("0", std::make_shared<Linear>(1, width, true, init));
  out = register_module("2", std::make_shared<Linear>(width, heads, true, init));
}

Tensor FireMlp::forward(const Tensor& x) const { return out->forward(relu(in->forward(x))); }

FIRE::FIRE(int64_t heads, int64_t w, int64_t L0, Generator* init) : num_heads(heads), width(w), threshold(L0) {
  RG_CHECK(num_heads > 0, "FIRE", "num_heads must be positive, got ", num_heads);
  RG_CHECK(width > 0, "FIRE", "width must be positive, got ", width);
  RG_CHECK(threshold > 0, "FIRE", "threshold (L0) must be positive, got ", threshold);
  // state_dict order: c, L_multiplier, then mlp.* (own parameters before a child's, as PyTorch's); the
  // paper's init_L is the config's L0 here, not a tensor.
  mlp = register_module("mlp", std::make_shared<FireMlp>(width, num_heads, init));
  NoGradGuard no_grad;
  c = register_parameter("c", full({1}, kInitC, kFloat32));
  L_multiplier = register_parameter("L_multiplier", full({1}, kInitMultiplier, kFloat32));
}

Tensor FIRE::threshold_length() const { return abs(L_multiplier * static_cast<double>(threshold)); }

Tensor FIRE::bias(const Tensor& distance, const Tensor& position) const {
  const int64_t R = distance.size(0), W = distance.size(1);
  Tensor scale = abs(c);  // |c·x| = |c|·x for x ≥ 0 (both |δ| and max(π(i), L) are)
  Tensor L = threshold_length();
  // max(π(i), L) as torch.maximum: all of the gradient to the larger, half to each at a tie. The share
  // s of L is a constant (R, 1); s·L + (1 − s)·π is exactly L, π or (at a tie) both.
  Tensor Ld = L.detach();
  Tensor share = lt(position, Ld).to(Ld.dtype()) + eq(position, Ld).to(Ld.dtype()) * 0.5;
  Tensor normaliser_position = share * L + (1.0 - share) * position;                      // (R, 1)
  Tensor normaliser = relgrad::log(scale * normaliser_position + 1.0) + kEps;             // (R, 1)
  Tensor x = relgrad::log(scale * distance + 1.0) / normaliser;                           // (R, W)
  return mlp->forward(x.reshape({R * W, 1})).transpose(0, 1).reshape({num_heads, R, W});  // (H, R, W)
}

FIRE::Map FIRE::pair_map(const AttentionGeometry& g) const {
  Tensor positions = g.positions();
  RG_CHECK_T(ShapeError, positions.dim() == 1 && positions.size(0) == g.t2, "fire", "query positions must have shape (",
             g.t2, "), got ", shape_str(positions.shape()));
  std::vector<int64_t> pi = positions.to(Device::cpu()).to(kInt64).contiguous().to_vector<int64_t>();
  std::vector<int64_t> key(static_cast<size_t>(g.t1));
  for (int64_t j = 0; j < g.t1; ++j) key[j] = j;
  if (position_map.defined()) {  // index p → position_map[p], on both sides
    const std::vector<int64_t> map = position_map.to(Device::cpu()).contiguous().to_vector<int64_t>();
    auto mapped = [&](int64_t p) {
      RG_CHECK_T(IndexError, p >= 0 && p < static_cast<int64_t>(map.size()), "fire", "randomised positions: index ",
                 p, " is outside the position map of ", map.size(), " entries");
      return map[static_cast<size_t>(p)];
    };
    for (int64_t& p : pi) p = mapped(p);
    for (int64_t& p : key) p = mapped(p);
  }
  std::vector<double> d(static_cast<size_t>(g.t2 * g.t1)), p(pi.begin(), pi.end());
  for (int64_t i = 0; i < g.t2; ++i)
    for (int64_t j = 0; j < g.t1; ++j) d[i * g.t1 + j] = static_cast<double>(std::llabs(key[j] - pi[i]));
  return Map{from_vector<double>(d, {g.t2, g.t1}).to(c.dtype()).to(c.device()),
             from_vector<double>(p, {g.t2, 1}).to(c.dtype()).to(c.device())};
}

Tensor FIRE::logit_bias(const AttentionGeometry& g) const {
  RG_CHECK_T(ShapeError, g.heads == num_heads, "fire", "built for ", num_heads, " heads, the attention has ", g.heads);
  // A map changes with every training forward (a fresh draw): built each call, never cached.
  const Map m = position_map.defined() ? pair_map(g)
                                       : maps_.get(geometry_key(g, {}, c.dtype(), c.device()), [&] { return pair_map(g); });
  return bias(m.distance, m.position).unsqueeze(0);  // (1, H, t2, t1)
}

bool FIRE::fuse(FusedCall& call, const AttentionGeometry& g) const {
  if (g.heads != num_heads) return false;  // the composite path reports it
  if (position_map.defined()) return false;  // mapped positions: the bias is not a function of δ alone
  // One normaliser for the call when every π(i) < L: then b depends on δ alone. (At π(i) = L the value
  // is the same but the gradient of L is halved there, as the composite's max does: not fused.)
  const int64_t top = call.positions.empty() ? 0 : *std::max_element(call.positions.begin(), call.positions.end());
  double L = 0;
  {
    NoGradGuard no_grad;
    L = threshold_length().to(Device::cpu()).item();  // one scalar read per call
  }
  if (!(static_cast<double>(top) < L)) return false;
  const CacheKey key{{call.min_delta, call.width, top}, c.dtype(), c.device()};
  const Map m = tables_.get(key, [&] {
    std::vector<double> d(static_cast<size_t>(call.width));
    for (int64_t w = 0; w < call.width; ++w) d[w] = static_cast<double>(std::llabs(call.min_delta + w));
    return Map{from_vector<double>(d, {1, call.width}).to(c.dtype()).to(c.device()),
               full({1, 1}, static_cast<double>(top), c.dtype()).to(c.device())};
  });
  std::vector<int64_t> rows(static_cast<size_t>(call.width));
  for (int64_t w = 0; w < call.width; ++w) rows[w] = w;
  call.options.bias_table = bias(m.distance, m.position).reshape({num_heads, call.width}).contiguous();  // (H, W)
  call.options.bias_rows = from_vector(rows, {call.width});
  return true;
}

std::vector<std::vector<double>> FIRE::response(const ResponseInput& in, int64_t reach) const {
  NoGradGuard no_grad;
  const double scale = std::fabs(host_values(c)[0]), L = host_values(threshold_length())[0];
  auto psi = [&](double x) { return std::log(scale * x + 1.0); };
  // The mean normaliser over the queries that count (all of them when no padding is marked).
  const size_t t2 = in.positions.size();
  double sum = 0;
  int64_t n = 0;
  const size_t count = t2 == 0 ? 0 : in.query_valid.empty() ? t2 : in.query_valid.size();
  for (size_t k = 0; k < count; ++k) {
    if (!in.query_valid.empty() && !in.query_valid[k]) continue;
    sum += psi(std::max(static_cast<double>(in.positions[k % t2]), L)) + kEps;
    ++n;
  }
  const double normaliser = n > 0 ? sum / static_cast<double>(n) : psi(L) + kEps;
  const int64_t W = 2 * reach + 1;
  std::vector<double> x(static_cast<size_t>(W));
  for (int64_t w = 0; w < W; ++w) x[w] = psi(static_cast<double>(std::llabs(w - reach))) / normaliser;
  Tensor b = mlp->forward(from_vector<double>(x, {W, 1}).to(c.dtype()).to(c.device()));  // (W, H)
  std::vector<double> t = host_values(b.transpose(0, 1).contiguous());
  std::vector<std::vector<double>> out(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) out[h].assign(t.begin() + h * W, t.begin() + (h + 1) * W);
  return out;
}

std::string FIRE::check(const SchemeCheck& c) {
  if (c.config.fire_width < 1)
    return c.key + "fire_width must be at least 1 (" + c.scheme_key() + "), got " + std::to_string(c.config.fire_width);
  if (c.config.fire_threshold < 1)
    return c.key + "fire_threshold must be at least 1 (" + c.scheme_key() + "), got " +
           std::to_string(c.config.fire_threshold);
  return "";
}

double FIRE::parameters(const PositionalConfig& p, double n_heads, double) {
  const double w = static_cast<double>(p.fire_width);
  return 2 * w + (w + 1) * n_heads + 2;  // Linear(1, w), Linear(w, H), c, L_multiplier
}

// ---- the registry entry (layers/schemes.h): the MLP of ψ(|δ|)/ψ(max(π(i), L)) serves every place (the
// paper's causal i − j ≥ 0 on the keys a causal mask leaves; even in δ elsewhere, cross through π(i)) ----

SchemeEntry fire_scheme() {
  SchemeEntry e{"fire", {"fire_width", "fire_threshold"}, [](const SchemeContext& c) {
                  return std::make_shared<FIRE>(c.n_heads, c.config.fire_width, c.config.fire_threshold, c.init);
                }};
  e.check = FIRE::check;
  e.parameters = FIRE::parameters;
  e.knobs = {SchemeKnob::member("fire_width", "width of the MLP f_θ", &PositionalConfig::fire_width),
             SchemeKnob::member("fire_threshold", "L0: the normaliser reads max(π(i), |L_multiplier·L0|)",
                                &PositionalConfig::fire_threshold)};
  // L0 at the training length (length and context benches), so longer inputs are normalised into the
  // range the MLP was trained on: the paper's interpolation.
  e.fit = [](PositionalConfig& p, const SchemeFit& f) {
    if (f.rule != FitRule::Window) p.fire_threshold = f.window;
  };
  e.random_positions = true;
  e.summary = "relative bias, FIRE";
  return e;
}

}  // namespace relgrad
