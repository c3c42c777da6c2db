#include "layers/relative_bias.h"

#include <cmath>
#include <cstdlib>

#include "layers/schemes.h"

namespace relgrad {

namespace {

// π(i) as a host vector, checked against the geometry.
std::vector<int64_t> host_positions(const Tensor& positions, int64_t t2, const char* op) {
  RG_CHECK_T(DTypeError, positions.dtype() == kInt64, op, "query positions must be int64, got ",
             dtype_name(positions.dtype()));
  RG_CHECK_T(ShapeError, positions.dim() == 1 && positions.size(0) == t2, op, "query positions must have shape (",
             t2, "), got ", shape_str(positions.shape()));
  return positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
}

void check_heads(const AttentionGeometry& g, int64_t heads, const char* op) {
  RG_CHECK_T(ShapeError, g.heads == heads, op, "built for ", heads, " heads, the attention has ", g.heads);
}

}  // namespace

int64_t t5_relative_bucket(int64_t delta, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t ret = 0, n = 0, nb = num_buckets;
  if (bidirectional) {
    nb = num_buckets / 2;
    if (delta > 0) ret += nb;  // future → upper half
    n = delta < 0 ? -delta : delta;
  } else {
    n = delta < 0 ? -delta : 0;  // the future collapses onto δ = 0
  }
  const int64_t max_exact = nb / 2;
  if (n < max_exact) return ret + n;  // branch before the log: log(0) would be −inf
  // Truncation of a non-negative value = floor, as torch's .to(long) and mtf.to_int32.
  const double frac = std::log(static_cast<double>(n) / max_exact) /
                      std::log(static_cast<double>(max_distance) / max_exact) * (nb - max_exact);
  const int64_t large = frac >= static_cast<double>(nb) ? nb - 1 : max_exact + static_cast<int64_t>(frac);
  return ret + (large < nb - 1 ? large : nb - 1);
}

T5RelativeBias::T5RelativeBias(int64_t heads, int64_t buckets, int64_t max_dist, bool bidir, Generator* init)
    : num_heads(heads), num_buckets(buckets), max_distance(max_dist), bidirectional(bidir) {
  const char* op = "T5RelativeBias";
  RG_CHECK(num_heads > 0, op, "num_heads must be positive, got ", num_heads);
  // Each half (or the whole table when causal) needs at least one exact bucket, and max_distance
  // must lie beyond the exact range or the log scale divides by log(1) = 0.
  const int64_t half = bidirectional ? num_buckets / 2 : num_buckets;
  RG_CHECK(half >= 2, op, "num_buckets must be at least ", bidirectional ? 4 : 2, " (", bidirectional ? "bidirectional" : "causal",
           "), got ", num_buckets);
  RG_CHECK(max_distance > half / 2, op, "max_distance must exceed the ", half / 2, " exact buckets, got ", max_distance);
  NoGradGuard no_grad;
  table = register_parameter("table", randn({num_heads, num_buckets}, kFloat32, init));
}

Tensor T5RelativeBias::bucket_index(int64_t t2, int64_t t1, const Tensor& positions) const {
  std::vector<int64_t> pi = host_positions(positions, t2, "T5RelativeBias");
  std::vector<int64_t> c(static_cast<size_t>(t2 * t1));
  for (int64_t i = 0; i < t2; ++i)
    for (int64_t j = 0; j < t1; ++j)
      c[i * t1 + j] = t5_relative_bucket(j - pi[i], bidirectional, num_buckets, max_distance);
  return from_vector<int64_t>(c, {t2, t1});
}

Tensor T5RelativeBias::logit_bias(const AttentionGeometry& g) const {
  const char* op = "T5RelativeBias";
  check_heads(g, num_heads, op);
  // Causal buckets put every future key into the δ = 0 bucket: only sound when those keys are masked.
  RG_CHECK(bidirectional || g.causal, op,
           "the causal (bidirectional=false) table cannot tell future keys from the present one; use it with a "
           "causal mask or build T5RelativeBias with bidirectional=true");
  // The bucket of every (query, key), (t2, t1), on the table's device: cached by geometry and settings.
  const CacheKey key = geometry_key(g, {int64_t(bidirectional), num_buckets, max_distance}, kInt64, table.device());
  Tensor c = bucket_maps.get(key, [&] {
    return bucket_index(g.t2, g.t1, g.positions()).to(table.device());
  });
  // The table broadcast over queries (stride 0, no copy): P (H, t2, nb); its gradient comes back
  // through relative_scatter, one row per query, summed into the table by expand's backward.
  Tensor p = table.unsqueeze(1).expand({num_heads, g.t2, num_buckets});
  return relative_gather(p, c, num_buckets).unsqueeze(0);  // (1, H, t2, t1)
}

std::vector<double> alibi_slopes(int64_t n) {
  RG_CHECK(n > 0, "ALiBi", "num_heads must be positive, got ", n);
  auto power_of_2 = [](int64_t m) {  // 2^(−8/m), squared, cubed, ...: exact for the exponents used
    std::vector<double> s;
    for (int64_t k = 1; k <= m; ++k) s.push_back(std::exp2(-8.0 * static_cast<double>(k) / static_cast<double>(m)));
    return s;
  };
  int64_t c = 1;
  while (c * 2 <= n) c *= 2;
  std::vector<double> slopes = power_of_2(c);
  if (c == n) return slopes;
  std::vector<double> extra = alibi_slopes(2 * c);
  for (int64_t k = 0; k < n - c; ++k) slopes.push_back(extra[static_cast<size_t>(2 * k)]);
  return slopes;
}

ALiBi::ALiBi(int64_t heads, bool bidir) : num_heads(heads), bidirectional(bidir) {
  RG_CHECK(num_heads > 0, "ALiBi", "num_heads must be positive, got ", num_heads);
  slopes = register_buffer("slopes", from_vector<double>(alibi_slopes(num_heads), {num_heads}).to(kFloat32));
}

Tensor ALiBi::logit_bias(const AttentionGeometry& g) const {
  const char* op = "ALiBi";
  check_heads(g, num_heads, op);
  RG_CHECK(bidirectional || g.causal, op,
           "the causal variant needs a causal mask (AttentionOptions::causal); for attention that sees later "
           "keys build ALiBi(num_heads, /*bidirectional=*/true)");
  // The distance part, (1, 1, t2, t1), on the slopes' device: cached by geometry.
  const CacheKey key = geometry_key(g, {int64_t(bidirectional)}, slopes.dtype(), slopes.device());
  Tensor d = distance_tables.get(key, [&] {
    std::vector<int64_t> pi = host_positions(g.positions(), g.t2, op);
    std::vector<double> dist(static_cast<size_t>(g.t2 * g.t1));
    for (int64_t i = 0; i < g.t2; ++i)
      for (int64_t j = 0; j < g.t1; ++j) dist[i * g.t1 + j] = distance(j - pi[i]);
    return from_vector<double>(dist, {1, 1, g.t2, g.t1}).to(slopes.dtype()).to(slopes.device());
  });
  return neg(slopes.reshape({1, num_heads, 1, 1}) * d);  // (1, H, t2, t1)
}

bool T5RelativeBias::fuse(FusedCall& call, const AttentionGeometry& g) const {
  if (g.heads != num_heads || !(bidirectional || g.causal)) return false;  // the composite path reports it
  std::vector<int64_t> rows(static_cast<size_t>(call.width));
  for (int64_t w = 0; w < call.width; ++w)
    rows[w] = t5_relative_bucket(call.min_delta + w, bidirectional, num_buckets, max_distance);
  call.options.bias_table = table;  // (H, num_buckets)
  call.options.bias_rows = from_vector(rows, {call.width});
  return true;
}

std::vector<std::vector<double>> T5RelativeBias::response(const ResponseInput& in, int64_t reach) const {
  const int64_t H = in.geometry.heads;
  std::vector<double> t = host_values(table);  // (H, num_buckets)
  std::vector<std::vector<double>> out(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = -reach; d <= reach; ++d)
      out[h].push_back(t[h * num_buckets + t5_relative_bucket(d, bidirectional, num_buckets, max_distance)]);
  return out;
}

bool ALiBi::fuse(FusedCall& call, const AttentionGeometry& g) const {
  if (g.heads != num_heads || !(bidirectional || g.causal)) return false;
  // The bias per distance, −m_h · dist(δ), with the identity lookup; the distances (1, W) cached.
  std::vector<int64_t> rows(static_cast<size_t>(call.width));
  for (int64_t w = 0; w < call.width; ++w) rows[w] = w;
  const CacheKey key{{call.min_delta, call.width, int64_t(bidirectional)}, slopes.dtype(), slopes.device()};
  Tensor d = fused_distance_tables.get(key, [&] {
    std::vector<double> dist(static_cast<size_t>(call.width));
    for (int64_t w = 0; w < call.width; ++w) dist[w] = distance(call.min_delta + w);
    return from_vector<double>(dist, {1, call.width}).to(slopes.dtype()).to(slopes.device());
  });
  call.options.bias_table = neg(slopes.reshape({num_heads, 1}) * d);  // (H, W)
  call.options.bias_rows = from_vector(rows, {call.width});
  return true;
}

std::vector<std::vector<double>> ALiBi::response(const ResponseInput& in, int64_t reach) const {
  const int64_t H = in.geometry.heads;
  std::vector<double> m = host_values(slopes);
  std::vector<std::vector<double>> out(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = -reach; d <= reach; ++d) out[h].push_back(-m[h] * distance(d));
  return out;
}

// ---- the registry's checks and counts (layers/schemes.cpp) ----

std::string T5RelativeBias::check(const SchemeCheck& c) {
  const PositionalConfig& p = c.config;
  const int64_t half = c.causal ? p.num_buckets : p.num_buckets / 2;
  if (half < 2)
    return c.key + "num_buckets must be at least " + (c.causal ? "2" : "4") + " (t5, " +
           (c.causal ? "causal" : "bidirectional") + "), got " + std::to_string(p.num_buckets);
  if (p.max_distance <= half / 2)
    return c.key + "max_distance must be more than the " + std::to_string(half / 2) + " exact buckets of " + c.key +
           "num_buckets = " + std::to_string(p.num_buckets) + ", got " + std::to_string(p.max_distance);
  return "";
}

double T5RelativeBias::parameters(const PositionalConfig& p, double n_heads, double) {
  return static_cast<double>(p.num_buckets) * n_heads;
}

int64_t t5_exact_reach(bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  auto bucket = [&](int64_t d) { return t5_relative_bucket(-d, bidirectional, num_buckets, max_distance); };
  int64_t d = 0;
  while (d < max_distance + num_buckets && bucket(d + 1) != bucket(d) && bucket(d + 1) != bucket(d + 2)) ++d;
  return d;
}

std::vector<int64_t> t5_bucket_members(int64_t delta, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance) {
  const int64_t b = t5_relative_bucket(delta, bidirectional, num_buckets, max_distance);
  const int64_t sign = delta < 0 ? -1 : 1, limit = std::abs(delta) + 2 * max_distance + num_buckets;
  int64_t lo = std::abs(delta), hi = std::abs(delta);  // buckets are monotone in |δ| within a sign
  while (lo > 0 && t5_relative_bucket(sign * (lo - 1), bidirectional, num_buckets, max_distance) == b) --lo;
  while (hi < limit && t5_relative_bucket(sign * (hi + 1), bidirectional, num_buckets, max_distance) == b)
    ++hi;
  std::vector<int64_t> members;
  for (int64_t d = lo; d <= hi; ++d) members.push_back(sign * d);
  std::sort(members.begin(), members.end());
  return members;
}

// ---- the registry entries (layers/schemes.h) ----

// Causal places (decoder self-attention) get the causal variants: T5's unidirectional buckets (all of
// them for the past, as T5's decoder), ALiBi's causal bias.
SchemeEntry t5_scheme() {
  SchemeEntry e{"t5", {"num_buckets", "max_distance"}, [](const SchemeContext& c) {
                  return std::make_shared<T5RelativeBias>(c.n_heads, c.config.num_buckets, c.config.max_distance,
                                                          !c.causal, c.init);
                }};
  e.shared_by_stack = true;
  e.check = T5RelativeBias::check;
  e.parameters = T5RelativeBias::parameters;
  e.knobs = {SchemeKnob::member("num_buckets", "buckets", &PositionalConfig::num_buckets),
             SchemeKnob::member("max_distance", "distance of the last bucket", &PositionalConfig::max_distance)};
  // Log buckets up to the window (music-bench); C/2 buckets up to C/2 (context-bench); length-bench keeps
  // T5's defaults, 32 buckets up to 128.
  e.fit = [](PositionalConfig& p, const SchemeFit& f) {
    if (f.rule == FitRule::Window) p.max_distance = f.window;
    if (f.rule == FitRule::HalfWindow) p.num_buckets = f.window / 2, p.max_distance = f.window / 2;
  };
  e.table_reach = [](const PositionalConfig& p) { return TableReach{p.max_distance, "max_distance"}; };
  // δ* has a bucket of its own within T5's exact range; past it a log bucket shares it.
  e.predict = [](const PositionalConfig& p, int64_t expected, bool bidirectional) -> LimitPrediction {
    const int64_t exact = t5_exact_reach(bidirectional, p.num_buckets, p.max_distance);
    const int64_t bucket = t5_relative_bucket(expected, bidirectional, p.num_buckets, p.max_distance);
    if (std::abs(expected) <= exact)
      return {true, "bucket " + std::to_string(bucket) + " holds δ* alone (exact up to |δ| ≤ " +
                        std::to_string(exact) + ")"};
    const std::vector<int64_t> members = t5_bucket_members(expected, bidirectional, p.num_buckets, p.max_distance);
    return {false, "bucket " + std::to_string(bucket) + " holds " + offsets_text(members) +
                       " (exact only up to |δ| ≤ " + std::to_string(exact) + ")"};
  };
  e.summary = "relative bias, T5 buckets";
  return e;
}

SchemeEntry alibi_scheme() {
  SchemeEntry e{"alibi", {}, [](const SchemeContext& c) { return std::make_shared<ALiBi>(c.n_heads, !c.causal); }};
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "relative bias, ALiBi";
  return e;
}

}  // namespace relgrad
