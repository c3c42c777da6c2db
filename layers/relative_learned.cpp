#include "layers/relative_learned.h"

#include <cmath>
#include <cstdlib>

#include "layers/schemes.h"

namespace relgrad {

namespace {

// N(0, D^−1/2) (t2t get_relative_embeddings_left): (rows, D) shared or (H, rows, D) per head.
Tensor init_table(int64_t num_heads, int64_t rows, int64_t head_dim, Generator* generator) {
  NoGradGuard no_grad;
  Shape shape = num_heads > 0 ? Shape{num_heads, rows, head_dim} : Shape{rows, head_dim};
  return mul(randn(shape, {}, generator), 1.0 / std::sqrt(static_cast<double>(head_dim)));
}

void check_sizes(const char* scheme, int64_t head_dim, int64_t num_heads) {
  RG_CHECK_T(ShapeError, head_dim > 0, scheme, "head_dim must be > 0, got ", head_dim);
  RG_CHECK_T(ShapeError, num_heads >= 0, scheme, "num_heads must be >= 0 (0 = one table shared by all heads), got ",
             num_heads);
}

// x (B,H,t2,X) against a table (R,D) or (H,R,D): the last dim must be D (X = D for q), and a
// per-head table needs H heads. `what` names x in the message.
void check_against_table(const char* scheme, const char* what, const Tensor& x, int64_t last, const Tensor& table,
                         int64_t num_heads) {
  RG_CHECK_T(ShapeError, x.dim() == 4 && x.size(-1) == last, scheme, what, " must be (B, H, t2, ", last,
             ") to match the table ", shape_str(table.shape()), ", got ", shape_str(x.shape()));
  RG_CHECK_T(ShapeError, num_heads == 0 || x.size(1) == num_heads, scheme, what, " ", shape_str(x.shape()), " has ",
             x.size(1), " heads but the per-head table ", shape_str(table.shape()), " has ", num_heads);
}

// The key term shared by all three schemes: q (B,H,t2,D), table (R,D) or (H,R,D) → (B,H,t2,t1).
Tensor table_scores(const char* scheme, const Tensor& q, const Tensor& table, int64_t num_heads,
                    const AttentionGeometry& g, const RelativeIndexOptions& options) {
  check_against_table(scheme, "q", q, table.size(-1), table, num_heads);
  RG_CHECK_T(ShapeError, q.size(2) == g.t2, scheme, "q ", shape_str(q.shape()), " has ", q.size(2),
             " queries but the geometry says t2 = ", g.t2);
  // The map (t2, t1), −1 = no entry, on q's device, trimmed to the rows some pair reads: rows outside
  // get no score and, through the narrow view, no gradient — exactly as when they are multiplied and
  // never gathered. Cached: built once per geometry, not at every call.
  const RelativeMap m = cached_relative_map(g, options, q.device(), /*trim=*/true);
  Tensor used = m.first_row > 0 || m.rows < options.table_size() ? table.narrow(-2, m.first_row, m.rows) : table;
  // (B,H,t2,D) @ (H?,D,R') → (B,H,t2,R'); each query reads a band of the rows (about half of them):
  // the product skips the rest where that pays.
  Tensor P = m.window && window_products_skip(q, *m.window)
                 ? window_scores(q, used.transpose(-1, -2), m.window)
                 : matmul(q, used.transpose(-1, -2));
  return relative_gather(P, m.index, m.rows);          // (B,H,t2,t1)
}

// The fields every scheme takes from the geometry: π(i) and causality.
RelativeIndexOptions geometry_options(const AttentionGeometry& g, int64_t max_past, int64_t max_future,
                                      OutOfRange policy) {
  RelativeIndexOptions o;
  o.max_past = max_past;
  o.max_future = max_future;
  o.alignment = g.alignment;
  // π(i) is read on the host (relative_index builds the map there, once per key): a copy when given on a GPU.
  o.query_positions = g.query_positions.defined() ? g.query_positions.to(Device::cpu()) : Tensor();
  o.out_of_range = policy;
  o.causal = g.causal;  // future pairs are masked: no entry, so a causal layer never trains future rows
  return o;
}

}  // namespace

// ---- SeedRelativeEmbedding ----

SeedRelativeEmbedding::SeedRelativeEmbedding(int64_t head_dim_, int64_t max_length_, int64_t num_heads_,
                                             OutOfRange policy_, Generator* generator)
    : head_dim(head_dim_), max_length(max_length_), num_heads(num_heads_), policy(policy_) {
  check_sizes("SeedRelativeEmbedding", head_dim, num_heads);
  RG_CHECK_T(ShapeError, max_length > 0, "SeedRelativeEmbedding", "max_length (t3) must be > 0, got ", max_length);
  table = register_parameter("table", init_table(num_heads, table_rows(), head_dim, generator));
}

RelativeIndexOptions SeedRelativeEmbedding::index_options(const AttentionGeometry& g) const {
  return geometry_options(g, max_length - 1, max_length - 1, policy);
}

Tensor SeedRelativeEmbedding::score_term(const Tensor& q, const AttentionGeometry& g) const {
  return table_scores("SeedRelativeEmbedding", q, table, num_heads, g, index_options(g));
}

bool SeedRelativeEmbedding::fuse(FusedCall& call, const AttentionGeometry& g) const {
  call.options.rel_table = table;
  call.options.rel_rows = fused_table_rows(index_options(g), call, g.t1, "SeedRelativeEmbedding");
  return true;
}

std::vector<std::vector<double>> SeedRelativeEmbedding::response(const ResponseInput& in, int64_t reach) const {
  return table_response(in, table, num_heads, index_options(in.geometry), logit_scale(in.geometry.head_dim), reach);
}

void SeedRelativeEmbedding::load_seed_table(const Tensor& seed_table) {
  const char* op = "SeedRelativeEmbedding";
  const int64_t R = table_rows();
  Shape want = num_heads > 0 ? Shape{num_heads, head_dim, R} : Shape{head_dim, R};
  RG_CHECK_T(ShapeError, seed_table.shape() == want, op, "load_seed_table expects the seed's layout ",
             shape_str(want), " (D × (2·t3 − 1), future first), got ", shape_str(seed_table.shape()));
  NoGradGuard no_grad;
  // Column c ↔ δ = t3 − 1 − c, row r ↔ δ = r − (t3 − 1): row r = column R − 1 − r.
  Tensor reversed = arange(static_cast<double>(R - 1), -1.0, -1.0, kInt64).to(seed_table.device());
  Tensor flipped = index_select(seed_table, -1, reversed);  // (H?, D, R), past first
  table.copy_(flipped.transpose(-1, -2));                  // (H?, R, D), copied across devices if need be
}

// ---- HuangRelativeEmbedding ----

HuangRelativeEmbedding::HuangRelativeEmbedding(int64_t head_dim_, int64_t max_length_, int64_t num_heads_,
                                               OutOfRange policy_, Generator* generator)
    : head_dim(head_dim_), max_length(max_length_), num_heads(num_heads_), policy(policy_) {
  check_sizes("HuangRelativeEmbedding", head_dim, num_heads);
  RG_CHECK_T(ShapeError, max_length > 0, "HuangRelativeEmbedding", "max_length (t3) must be > 0, got ", max_length);
  table = register_parameter("table", init_table(num_heads, table_rows(), head_dim, generator));
}

RelativeIndexOptions HuangRelativeEmbedding::index_options(const AttentionGeometry& g) const {
  // Only the past half: δ ∈ [−(t3 − 1), 0]; the future is masked by the causal flag.
  return geometry_options(g, max_length - 1, 0, policy);
}

Tensor HuangRelativeEmbedding::score_term(const Tensor& q, const AttentionGeometry& g) const {
  RG_CHECK(g.causal, "HuangRelativeEmbedding",
           "needs causal attention (its table has no future rows); use SeedRelativeEmbedding or "
           "ShawRelativeEmbedding for bidirectional or cross-attention");
  return table_scores("HuangRelativeEmbedding", q, table, num_heads, g, index_options(g));
}

bool HuangRelativeEmbedding::fuse(FusedCall& call, const AttentionGeometry& g) const {
  if (!g.causal) return false;  // the composite path reports the error
  call.options.rel_table = table;
  call.options.rel_rows = fused_table_rows(index_options(g), call, g.t1, "HuangRelativeEmbedding");
  return true;
}

std::vector<std::vector<double>> HuangRelativeEmbedding::response(const ResponseInput& in, int64_t reach) const {
  return table_response(in, table, num_heads, index_options(in.geometry), logit_scale(in.geometry.head_dim), reach);
}

// ---- ShawRelativeEmbedding ----

ShawRelativeEmbedding::ShawRelativeEmbedding(int64_t head_dim_, int64_t clip_, int64_t num_heads_, bool values_,
                                             Generator* generator)
    : head_dim(head_dim_), clip(clip_), num_heads(num_heads_), values(values_) {
  check_sizes("ShawRelativeEmbedding", head_dim, num_heads);
  RG_CHECK_T(ShapeError, clip >= 0, "ShawRelativeEmbedding", "clip distance k must be >= 0, got ", clip);
  key_table = register_parameter("key_table", init_table(num_heads, table_rows(), head_dim, generator));
  if (values) value_table = register_parameter("value_table", init_table(num_heads, table_rows(), head_dim, generator));
}

RelativeIndexOptions ShawRelativeEmbedding::index_options(const AttentionGeometry& g) const {
  return geometry_options(g, clip, clip, OutOfRange::Clip);
}

Tensor ShawRelativeEmbedding::score_term(const Tensor& q, const AttentionGeometry& g) const {
  return table_scores("ShawRelativeEmbedding", q, key_table, num_heads, g, index_options(g));
}

Tensor ShawRelativeEmbedding::value_term(const Tensor& weights, const AttentionGeometry& g) const {
  if (!values) return Tensor();
  const char* op = "ShawRelativeEmbedding";
  check_against_table(op, "weights", weights, g.t1, value_table, num_heads);
  RG_CHECK_T(ShapeError, weights.size(2) == g.t2, op, "weights ", shape_str(weights.shape()), " have ",
             weights.size(2), " queries but the geometry says t2 = ", g.t2);
  const int64_t R = table_rows();
  const Tensor C = cached_relative_map(g, index_options(g), weights.device(), /*trim=*/false).index;  // (t2, t1)
  Tensor rel = relative_scatter(weights, C, R);              // (B,H,t2,R): weight on each relative row
  return matmul(rel, value_table);                          // (B,H,t2,R) @ (H?,R,D) → (B,H,t2,D)
}

bool ShawRelativeEmbedding::fuse(FusedCall& call, const AttentionGeometry& g) const {
  if (values) return false;  // the value term a^V is not fused
  call.options.rel_table = key_table;
  call.options.rel_rows = fused_table_rows(index_options(g), call, g.t1, "ShawRelativeEmbedding");
  return true;
}

std::vector<std::vector<double>> ShawRelativeEmbedding::response(const ResponseInput& in, int64_t reach) const {
  return table_response(in, key_table, num_heads, index_options(in.geometry), logit_scale(in.geometry.head_dim), reach);
}

// ---- the registry's checks and counts (layers/schemes.cpp) ----

std::string check_table_length(const SchemeCheck& c) {
  const PositionalConfig& p = c.config;
  if (p.max_length >= 1) return "";
  return c.key + "max_length must be >= 1 (" + p.scheme + ": the table covers |δ| ≤ max_length − 1), got " +
         std::to_string(p.max_length);
}

double SeedRelativeEmbedding::parameters(const PositionalConfig& p, double, double head_dim) {
  return (2.0 * static_cast<double>(p.max_length) - 1) * head_dim;
}

double HuangRelativeEmbedding::parameters(const PositionalConfig& p, double, double head_dim) {
  return static_cast<double>(p.max_length) * head_dim;
}

std::string ShawRelativeEmbedding::check(const SchemeCheck& c) {
  if (c.config.clip >= 0) return "";
  return c.key + "clip must be >= 0, got " + std::to_string(c.config.clip);
}

double ShawRelativeEmbedding::parameters(const PositionalConfig& p, double, double head_dim) {
  return (2.0 * static_cast<double>(p.clip) + 1) * head_dim;
}

// ---- the registry entries (layers/schemes.h) ----

namespace {

// seed's and huang's tables: |δ| ≤ T − 1 (T/2 − 1 at half a window), every farther offset reading the
// edge row under the length and context benches' rules (SchemeEntry::fit).
void fit_table(PositionalConfig& p, const SchemeFit& f) {
  p.max_length = f.rule == FitRule::HalfWindow ? f.window / 2 : f.window;
  if (f.rule != FitRule::Window) p.out_of_range = OutOfRange::Clip;
}

TableReach table_reach(const PositionalConfig& p) { return {p.max_length - 1, "max_length"}; }

// δ* has a row of its own inside the table; beyond it, no term.
LimitPrediction predict_table(const PositionalConfig& p, int64_t expected, bool) {
  const std::string reach = "(|δ| ≤ " + std::to_string(p.max_length - 1) + ")";
  if (std::abs(expected) <= p.max_length - 1)
    return {true, "row " + signed_offset_text(expected) + " of the table " + reach};
  return {false, "beyond the table " + reach + ": no term, as for every farther offset"};
}

SchemeEntry table_entry(std::string name, std::function<std::shared_ptr<PositionalScheme>(const SchemeContext&)> make,
                        bool causal_only, double (*parameters)(const PositionalConfig&, double, double)) {
  SchemeEntry e{std::move(name), {"max_length", "out_of_range", "per_head"}, std::move(make)};
  e.causal_only = causal_only;
  e.check = check_table_length;
  e.parameters = parameters;
  e.fit = fit_table;
  e.table_reach = table_reach;
  e.predict = predict_table;
  return e;
}

}  // namespace

SchemeEntry seed_scheme() {
  SchemeEntry e = table_entry(
      "seed",
      [](const SchemeContext& c) {
        return std::make_shared<SeedRelativeEmbedding>(c.head_dim, c.config.max_length, c.table_heads(),
                                                       c.config.out_of_range, c.init);
      },
      false, SeedRelativeEmbedding::parameters);
  // The family's table knobs (per_head, shaw's, is declared by shaw's entry).
  e.knobs = {SchemeKnob::member("max_length", "table covers |δ| ≤ max_length − 1", &PositionalConfig::max_length),
             SchemeKnob::choice("out_of_range", "δ beyond the table", kOutOfRangeNames, &PositionalConfig::out_of_range)};
  e.summary = "relative, the seed's diagonal method";
  return e;
}

SchemeEntry huang_scheme() {
  SchemeEntry e = table_entry(
      "huang",
      [](const SchemeContext& c) {
        return std::make_shared<HuangRelativeEmbedding>(c.head_dim, c.config.max_length, c.table_heads(),
                                                        c.config.out_of_range, c.init);
      },
      /*causal_only=*/true, HuangRelativeEmbedding::parameters);
  e.summary = "relative, Huang et al. (skewed Shaw keys)";
  return e;
}

SchemeEntry shaw_scheme() {
  SchemeEntry e{"shaw", {"clip", "shaw_values", "per_head"}, [](const SchemeContext& c) {
                  return std::make_shared<ShawRelativeEmbedding>(c.head_dim, c.config.clip, c.table_heads(),
                                                                 c.config.shaw_values, c.init);
                }};
  e.check = ShawRelativeEmbedding::check;
  e.parameters = ShawRelativeEmbedding::parameters;
  e.knobs = {SchemeKnob::member("clip", "distances clipped to [−clip, clip]", &PositionalConfig::clip),
             SchemeKnob::member("shaw_values", "also the value term", &PositionalConfig::shaw_values),
             SchemeKnob::member("per_head", "one table per head", &PositionalConfig::per_head)};
  // k = T − 1 covers a window (T/2 at half a window).
  e.fit = [](PositionalConfig& p, const SchemeFit& f) {
    p.clip = f.rule == FitRule::HalfWindow ? f.window / 2 : f.window - 1;
  };
  e.table_reach = [](const PositionalConfig& p) { return TableReach{p.clip, "clip"}; };
  // δ* inside the clip has a row of its own; every farther offset reads the edge row.
  e.predict = [](const PositionalConfig& p, int64_t expected, bool) -> LimitPrediction {
    const std::string clip = "(clip " + std::to_string(p.clip) + ")";
    if (std::abs(expected) < p.clip) return {true, "row " + signed_offset_text(expected) + " of its own " + clip};
    const int64_t edge = expected < 0 ? -p.clip : p.clip;
    return {false, "every δ " + std::string(expected < 0 ? "≤ " : "≥ ") + signed_offset_text(edge) +
                       " reads the edge row " + clip};
  };
  e.summary = "relative, Shaw et al. (keys and values)";
  return e;
}

}  // namespace relgrad
