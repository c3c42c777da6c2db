#include "layers/distance_bias.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "layers/schemes.h"

namespace relgrad {

namespace {

double abs_distance(int64_t d) { return static_cast<double>(std::llabs(d)); }
// log |δ| where δ ≠ 0; 0 at δ = 0 (masked out by nonzero_distance: 0^r = 0 for r > 0).
double log_abs_distance(int64_t d) { return d == 0 ? 0.0 : std::log(abs_distance(d)); }
double nonzero_distance(int64_t d) { return d == 0 ? 0.0 : 1.0; }
// x-transformers' input: x = i − j = −δ, and its signed log sign(x)·log(|x| + 1).
double query_minus_key(int64_t d) { return static_cast<double>(-d); }
double signed_log_distance(int64_t d) { return (d > 0 ? -1.0 : d < 0 ? 1.0 : 0.0) * std::log1p(abs_distance(d)); }

// r (H) used at its projection onto [lo, hi] with r's own gradient: r + (clamp(r) − r), the shift a
// constant. Inside the bounds the shift is exactly 0.
Tensor project(const Tensor& r, double lo, double hi) {
  Tensor v = r.detach();
  Tensor c = masked_fill(v, lt(v, lo), lo);
  if (std::isfinite(hi)) c = masked_fill(c, gt(c, hi), hi);
  return r + (c - v);
}

}  // namespace

// ---- the family: one table per distance range ----

DistanceBias::DistanceBias(int64_t heads) : num_heads(heads) {
  RG_CHECK(num_heads > 0, "DistanceBias", "num_heads must be positive, got ", num_heads);
}

Tensor DistanceBias::distances(int64_t first, int64_t width, int64_t tag, double (*f)(int64_t)) const {
  const Tensor& a = anchor();
  const CacheKey key{{first, width, tag}, a.dtype(), a.device()};
  return distance_tables_.get(key, [&] {
    std::vector<double> v(static_cast<size_t>(width));
    for (int64_t w = 0; w < width; ++w) v[w] = f(first + w);
    return from_vector<double>(v, {1, width}).to(a.dtype()).to(a.device());
  });
}

Tensor DistanceBias::logit_bias(const AttentionGeometry& g) const {
  const std::string scheme = name();
  const char* op = scheme.c_str();
  RG_CHECK_T(ShapeError, g.heads == num_heads, op, "built for ", num_heads, " heads, the attention has ", g.heads);
  // δ(i, j) − first for every (query, key), (t2, t1), with first = min δ: cached by geometry.
  const Map m = maps_.get(geometry_key(g, {}, kInt64, anchor().device()), [&] {
    Tensor positions = g.positions();
    RG_CHECK_T(ShapeError, positions.dim() == 1 && positions.size(0) == g.t2, op, "query positions must have shape (",
               g.t2, "), got ", shape_str(positions.shape()));
    std::vector<int64_t> pi = positions.to(Device::cpu()).to(kInt64).contiguous().to_vector<int64_t>();
    Map out;
    if (g.t2 == 0 || g.t1 == 0) {
      out.index = zeros({g.t2, g.t1}, kInt64).to(anchor().device());
      out.width = 1;
      return out;
    }
    const auto [lo, hi] = std::minmax_element(pi.begin(), pi.end());
    out.first = -*hi;
    out.width = g.t1 - 1 - *lo - out.first + 1;
    std::vector<int64_t> c(static_cast<size_t>(g.t2 * g.t1));
    for (int64_t i = 0; i < g.t2; ++i)
      for (int64_t j = 0; j < g.t1; ++j) c[i * g.t1 + j] = j - pi[i] - out.first;
    out.index = from_vector<int64_t>(c, {g.t2, g.t1}).to(anchor().device());
    return out;
  });
  // The table (H, W) broadcast over queries (no copy), gathered per (i, j); its gradient comes back
  // through relative_scatter and expand's sum.
  Tensor p = bias_table(m.first, m.width).unsqueeze(1).expand({num_heads, g.t2, m.width});
  return relative_gather(p, m.index, m.width).unsqueeze(0);  // (1, H, t2, t1)
}

bool DistanceBias::fuse(FusedCall& call, const AttentionGeometry& g) const {
  if (g.heads != num_heads) return false;  // the composite path reports it
  std::vector<int64_t> rows(static_cast<size_t>(call.width));
  for (int64_t w = 0; w < call.width; ++w) rows[w] = w;
  call.options.bias_table = bias_table(call.min_delta, call.width).contiguous();  // (H, W)
  call.options.bias_rows = from_vector(rows, {call.width});
  return true;
}

std::vector<std::vector<double>> DistanceBias::response(const ResponseInput&, int64_t reach) const {
  NoGradGuard no_grad;
  std::vector<double> t = host_values(bias_table(-reach, 2 * reach + 1));  // (H, 2·reach + 1)
  std::vector<std::vector<double>> out(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h)
    out[h].assign(t.begin() + h * (2 * reach + 1), t.begin() + (h + 1) * (2 * reach + 1));
  return out;
}

// ---- KERPLE ----

Kerple::Kerple(int64_t heads, KerpleVariant v, Generator* init) : DistanceBias(heads), variant(v) {
  NoGradGuard no_grad;
  // The released code's draws: the factor outside the kernel and the one inside, log: 2·U, U;
  // power: U, 2·U (the exponent's range (0, 2]).
  const bool is_log = variant == KerpleVariant::Log;
  r1 = register_parameter("r1", rand({num_heads}, kFloat32, init) * (is_log ? 2.0 : 1.0));
  r2 = register_parameter("r2", rand({num_heads}, kFloat32, init) * (is_log ? 1.0 : 2.0));
}

Tensor Kerple::bias_table(int64_t first, int64_t width) const {
  const int64_t H = num_heads;
  const bool is_log = variant == KerpleVariant::Log;
  Tensor a = project(r1, kEps, INFINITY).reshape({H, 1});
  Tensor b = project(r2, kEps, is_log ? INFINITY : 2.0).reshape({H, 1});
  if (is_log) return neg(a * relgrad::log(1.0 + b * distances(first, width, 0, abs_distance)));  // (H, W)
  // |δ|^r2 = exp(r2·log|δ|) for δ ≠ 0 and 0 at δ = 0 (where the log is replaced by 0 and the product
  // masked, so no 0·∞ reaches the gradient).
  Tensor powered = exp(b * distances(first, width, 1, log_abs_distance)) * distances(first, width, 2, nonzero_distance);
  return neg(a * powered);  // (H, W)
}

double Kerple::parameters(const PositionalConfig&, double n_heads, double) { return 2.0 * n_heads; }

// ---- Sandwich ----

Sandwich::Sandwich(int64_t heads, int64_t d) : DistanceBias(heads), dim(d) {
  RG_CHECK(dim > 0 && dim % 2 == 0, "Sandwich", "dim (d') must be even and positive, got ", dim);
  std::vector<double> r(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) r[h] = 8.0 * static_cast<double>(h + 1) / static_cast<double>(num_heads);
  ratios = register_buffer("ratios", from_vector<double>(r, {num_heads}).to(kFloat32));
}

Tensor Sandwich::bias_table(int64_t first, int64_t width) const {
  // The inner product minus d'/2, (1, W), in float64 on the host (cached), then divided by each
  // head's ratio (no parameter: nothing to differentiate).
  const Tensor& a = anchor();
  const CacheKey key{{first, width, 3, dim}, a.dtype(), a.device()};
  Tensor s = sums_.get(key, [&] {
    std::vector<double> v(static_cast<size_t>(width));
    for (int64_t w = 0; w < width; ++w) {
      const double d = static_cast<double>(first + w);
      double sum = 0;
      for (int64_t k = 1; k <= dim / 2; ++k)
        sum += std::cos(d / std::pow(10000.0, 2.0 * static_cast<double>(k) / static_cast<double>(dim)));
      v[w] = sum - static_cast<double>(dim) / 2.0;
    }
    return from_vector<double>(v, {1, width}).to(a.dtype()).to(a.device());
  });
  return s / ratios.reshape({num_heads, 1});  // (H, W)
}

std::string Sandwich::check(const SchemeCheck& c) {
  const int64_t d = c.config.sandwich_dim;
  if (d <= 0 || d % 2 != 0)
    return c.key + "sandwich_dim must be even and positive (" + c.scheme_key() + "), got " + std::to_string(d);
  return "";
}

// ---- DynamicPositionBias ----

DynamicBias::DynamicBias(int64_t heads, int64_t w, int64_t d, bool log_dist, Generator* init)
    : DistanceBias(heads), width(w), depth(d), log_distance(log_dist) {
  RG_CHECK(width > 0, "DynamicBias", "width must be positive, got ", width);
  RG_CHECK(depth >= 1, "DynamicBias", "depth must be at least 1, got ", depth);
  auto list = register_module("mlp", std::make_shared<LinearList>());
  for (int64_t l = 0; l <= depth; ++l) {
    const int64_t in = l == 0 ? 1 : width, out = l == depth ? num_heads : width;
    mlp.push_back(list->add(std::make_shared<Linear>(in, out, true, init)));
  }
}

Tensor DynamicBias::bias_table(int64_t first, int64_t w) const {
  // x (W, 1) → the MLP → (W, H) → (H, W).
  Tensor x = log_distance ? distances(first, w, 4, signed_log_distance) : distances(first, w, 5, query_minus_key);
  Tensor h = x.reshape({w, 1});
  for (int64_t l = 0; l < depth; ++l) h = silu(mlp[l]->forward(h));
  return mlp.back()->forward(h).transpose(0, 1);  // (H, W)
}

std::string DynamicBias::check(const SchemeCheck& c) {
  if (c.config.dynamic_bias_depth < 1)
    return c.key + "dynamic_bias_depth must be at least 1 (" + c.scheme_key() + "), got " +
           std::to_string(c.config.dynamic_bias_depth);
  if (c.d_model < 4)
    return "model.d_model must be at least 4 for " + c.scheme_key() + " (its MLP is d_model/4 wide), got " +
           std::to_string(c.d_model);
  return "";
}

double DynamicBias::parameters(const PositionalConfig& p, double n_heads, double head_dim) {
  // width = ⌊d_model/4⌋ = ⌊H·D/4⌋: 2·width (first layer), (depth − 1)·(width² + width), (width + 1)·H.
  const double w = std::max(1.0, std::floor(n_heads * head_dim / 4.0));
  return 2 * w + static_cast<double>(p.dynamic_bias_depth - 1) * (w * w + w) + (w + 1) * n_heads;
}

// ---- the registry entries (layers/schemes.h): |δ| serves every place (the paper's causal form on the
// keys a causal mask leaves), so no causal or self restriction ----

SchemeEntry kerple_scheme() {
  SchemeEntry e{"kerple", {"kerple_variant"}, [](const SchemeContext& c) {
                  return std::make_shared<Kerple>(c.n_heads, c.config.kerple_variant, c.init);
                }};
  e.parameters = Kerple::parameters;
  e.knobs = {SchemeKnob::choice("kerple_variant", "log: −r1·log(1 + r2·|δ|), power: −r1·|δ|^r2", kKerpleVariantNames,
                                &PositionalConfig::kerple_variant)};
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "relative bias, KERPLE kernel";
  return e;
}

SchemeEntry sandwich_scheme() {
  SchemeEntry e{"sandwich", {"sandwich_dim"}, [](const SchemeContext& c) {
                  return std::make_shared<Sandwich>(c.n_heads, c.config.sandwich_dim);
                }};
  e.check = Sandwich::check;
  e.knobs = {SchemeKnob::member("sandwich_dim", "d', the sinusoids' width (even)", &PositionalConfig::sandwich_dim)};
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "relative bias, Sandwich";
  return e;
}

// The MLP's width ⌊d_model/4⌋, rounded down as x-transformers' `dim // 4` (d_model 10 → 2; the
// entry's check refuses d_model < 4); docs/checkpoint-format.md 2.2.
SchemeEntry dynamic_bias_scheme() {
  SchemeEntry e{"dynamic_bias", {"dynamic_bias_depth", "dynamic_bias_log_distance"}, [](const SchemeContext& c) {
                  return std::make_shared<DynamicBias>(c.n_heads, c.d_model / 4, c.config.dynamic_bias_depth,
                                                       c.config.dynamic_bias_log_distance, c.init);
                }};
  e.check = DynamicBias::check;
  e.parameters = DynamicBias::parameters;
  e.knobs = {SchemeKnob::member("dynamic_bias_depth", "hidden layers of the MLP", &PositionalConfig::dynamic_bias_depth),
             SchemeKnob::member("dynamic_bias_log_distance", "the MLP reads sign(x)·log(|x| + 1)",
                                &PositionalConfig::dynamic_bias_log_distance)};
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "relative bias from an MLP of the distance";
  return e;
}

}  // namespace relgrad
