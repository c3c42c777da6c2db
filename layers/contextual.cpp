#include "layers/contextual.h"

#include <cmath>
#include <limits>

#include "layers/schemes.h"

namespace relgrad {

Tensor log_sigmoid(const Tensor& z) {
  return neg(relu(neg(z))) - log(1.0 + exp(neg(abs(z))));  // min(z, 0) − log(1 + e^−|z|)
}

Tensor triangle_ones(int64_t t, bool upper, bool strict, DType dtype, Device device) {
  std::vector<double> m(static_cast<size_t>(t * t));
  for (int64_t l = 0; l < t; ++l)
    for (int64_t j = 0; j < t; ++j) m[l * t + j] = (l == j ? !strict : upper ? l < j : l > j) ? 1.0 : 0.0;
  return from_vector<double>(m, {t, t}).to(dtype).to(device);
}

Tensor cached_triangle_ones(LruCache<CacheKey, Tensor>& cache, int64_t t, bool upper, bool strict, DType dtype,
                            Device device) {
  return cache.get(CacheKey{{t, int64_t(upper), int64_t(strict)}, dtype, device},
                   [&] { return triangle_ones(t, upper, strict, dtype, device); });
}

namespace {

// The hidden pairs of a recorded forward, bool (B, 1, t2, t1): later keys under causal attention, padding.
Tensor response_mask(const ResponseInput& in) {
  const int64_t B = in.q.size(0), t2 = in.q.size(2), t1 = in.k.size(2);
  std::vector<bool> m(static_cast<size_t>(B * t2 * t1));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < t2; ++i)
      for (int64_t j = 0; j < t1; ++j)
        m[(b * t2 + i) * t1 + j] = (in.causal && j > in.positions[i]) || !in.key_valid[b * t1 + j];
  return from_vector<bool>(m, {B, 1, t2, t1}, kBool).to(in.q.device());
}

void check_qk(const Tensor& q, const Tensor& k, int64_t head_dim, const char* op) {
  RG_CHECK_T(ShapeError, q.dim() == 4 && k.dim() == 4 && q.size(3) == head_dim && k.size(3) == head_dim &&
                             q.size(0) == k.size(0) && q.size(1) == k.size(1),
             op, "expects q (B, H, t2, ", head_dim, ") and k (B, H, t1, ", head_dim, "), got ", shape_str(q.shape()),
             " and ", shape_str(k.shape()));
}

}  // namespace

// ---- CoPE ----

CoPE::CoPE(int64_t head_dim_, int64_t npos_) : head_dim(head_dim_), npos(npos_) {
  RG_CHECK(head_dim > 0, "CoPE", "head_dim must be positive, got ", head_dim);
  RG_CHECK(npos >= 1, "CoPE", "npos (the embedded positions) must be at least 1, got ", npos);
  table = register_parameter("table", zeros({npos, head_dim}, kFloat32));  // the paper starts at zero
}

Tensor CoPE::positions(const Tensor& q, const Tensor& k, const Tensor& mask) const {
  check_qk(q, k, head_dim, "CoPE");
  const int64_t t1 = k.size(2);
  Tensor gates = sigmoid(matmul(q, k.transpose(-1, -2)) * logit_scale(head_dim));  // (B, H, t2, t1)
  if (mask.defined()) gates = masked_fill(gates, mask, 0.0);                         // hidden keys count 0
  // p_ij = Σ_{t ≥ j} g_it (hidden keys after π(i) add 0): the row times M[t, j] = [t ≥ j].
  return matmul(gates, cached_triangle_ones(triangles, t1, false, false, q.dtype(), q.device()));
}

Tensor CoPE::content_bias(const Tensor& q, const Tensor& k, const Tensor& mask, const AttentionGeometry& g) const {
  const char* op = "CoPE";
  RG_CHECK(g.causal, op, "CoPE counts the keys up to the query's position, so it needs causal attention");
  Tensor p = positions(q, k, mask);
  p = masked_fill(p, gt(p, static_cast<double>(npos - 1)), static_cast<double>(npos - 1));  // the clamp
  // ⌊p⌋ and ⌈p⌉ are constant pieces: found on the host, the weight p − ⌊p⌋ keeps p's gradient.
  std::vector<double> pv = host_values(p);
  std::vector<int64_t> lo(pv.size()), hi(pv.size());
  std::vector<double> lo_value(pv.size());
  for (size_t n = 0; n < pv.size(); ++n) {
    lo_value[n] = std::floor(pv[n]);
    lo[n] = static_cast<int64_t>(lo_value[n]);
    hi[n] = static_cast<int64_t>(std::ceil(pv[n]));
  }
  const Shape shape = p.shape();
  Tensor w = p - from_vector<double>(lo_value, shape).to(p.dtype()).to(p.device());
  Tensor per_position = matmul(q, table.transpose(0, 1));  // (B, H, t2, npos): q·e[n]
  Tensor at_lo = gather(per_position, -1, from_vector<int64_t>(lo, shape).to(p.device()));
  Tensor at_hi = gather(per_position, -1, from_vector<int64_t>(hi, shape).to(p.device()));
  return at_hi * w + at_lo * (1.0 - w);  // (B, H, t2, t1)
}

std::vector<std::vector<double>> CoPE::response(const ResponseInput& in, int64_t reach) const {
  AttentionGeometry g = in.geometry;
  g.causal = in.causal;
  return mean_by_delta(in, content_bias(in.q, in.k, response_mask(in), g), reach);
}

std::string CoPE::check(const SchemeCheck& c) {
  if (c.config.cope_positions < 1)
    return c.key + "cope_positions must be at least 1, got " + std::to_string(c.config.cope_positions);
  return "";
}

double CoPE::parameters(const PositionalConfig& p, double, double head_dim) {
  return static_cast<double>(p.cope_positions) * head_dim;
}

// ---- FoX ----

ForgettingAttention::ForgettingAttention(int64_t embed_dim_, int64_t num_heads_, Generator* init)
    : embed_dim(embed_dim_), num_heads(num_heads_) {
  RG_CHECK_T(ShapeError, embed_dim > 0 && num_heads > 0, "ForgettingAttention", "embed_dim ", embed_dim,
             " and num_heads ", num_heads, " must be positive");
  forget_gate = register_module("forget_gate", std::make_shared<Linear>(embed_dim, num_heads, true, init));
  // The gate bias starts at 5 (f = σ(5) ≈ 0.993: almost nothing forgotten at first), as x-transformers'
  // DataDependentAlibi (bias_init = 5). With nn.Linear's U(±1/√C) the gates start near ½ and a query
  // sees little beyond its last few keys: a 2-layer model then stays at chance on D2's periodic task
  // (period 4), where bias 5 learns it as fast as no positional term does.
  NoGradGuard no_grad;
  forget_gate->bias.fill_(kForgetGateBiasInit);
}

Tensor ForgettingAttention::key_state(const Tensor& x) const {
  RG_CHECK_T(ShapeError, x.dim() == 3 && x.size(2) == embed_dim, "ForgettingAttention",
             "the gates read the layer input (B, t, ", embed_dim, "), got ", shape_str(x.shape()));
  return log_sigmoid(forget_gate->forward(x)).permute({0, 2, 1}).unsqueeze(-1);  // (B, H, t, 1)
}

Tensor ForgettingAttention::content_bias(const Tensor&, const Tensor&, const Tensor&,
                                         const AttentionGeometry& g) const {
  const char* op = "ForgettingAttention";
  RG_CHECK(g.causal, op, "the forget gates sum the keys between key and query, so FoX needs causal attention");
  const Tensor& s = g.key_state;
  RG_CHECK_T(ShapeError, s.defined() && s.dim() == 4 && s.size(0) == g.batch && s.size(1) == num_heads &&
                             s.size(2) == g.t1 && s.size(3) == 1,
             op, "needs the log forget gates of all ", g.t1, " keys as the geometry's key_state (", g.batch, ", ",
             num_heads, ", ", g.t1, ", 1), got ", s.defined() ? shape_str(s.shape()) : std::string("none"));
  std::vector<int64_t> pi = g.positions().to(Device::cpu()).contiguous().to_vector<int64_t>();
  for (size_t i = 0; i < pi.size(); ++i)
    RG_CHECK_T(IndexError, pi[i] >= 0 && pi[i] < g.t1, op, "query ", i, " sits at position ", pi[i],
               ", outside the ", g.t1, " keys whose gates it sums");
  // c_j = Σ_{l ≤ j} log f_l: (B, H, 1, t1) times M[l, j] = [l ≤ j].
  Tensor c = matmul(s.transpose(-1, -2), cached_triangle_ones(triangles, g.t1, true, false, s.dtype(), s.device()));
  Tensor c_query = index_select(c, -1, from_vector<int64_t>(pi, {g.t2}).to(s.device()));  // (B, H, 1, t2)
  return c_query.transpose(-1, -2) - c;  // (B, H, t2, t1): Σ_{l = j+1 … π(i)} log f_l
}

std::vector<std::vector<double>> ForgettingAttention::response(const ResponseInput& in, int64_t reach) const {
  if (!in.geometry.key_state.defined()) return {};  // no gates recorded: no curve
  AttentionGeometry g = in.geometry;
  g.causal = true;
  g.query_positions = from_vector<int64_t>(in.positions, {static_cast<int64_t>(in.positions.size())});
  return mean_by_delta(in, content_bias(in.q, in.k, Tensor(), g), reach);
}

// ---- stick-breaking ----

std::pair<Tensor, Tensor> StickBreaking::log_weights(const Tensor& z, const Tensor& mask,
                                                     const AttentionGeometry& g) const {
  const char* op = "StickBreaking";
  RG_CHECK(g.causal, op, "stick-breaking breaks the stick from the query's position back, so it needs causal attention");
  // The query's own key and every later one: j ≥ π(i), (1, 1, t2, t1) on z's device, cached by geometry.
  Tensor own_and_later = own_key_masks.get(geometry_key(g, {}, kBool, z.device()), [&] {
    Tensor keys = arange(static_cast<double>(g.t1), kInt64).reshape({1, g.t1});
    return ge(keys, g.positions().reshape({g.t2, 1})).reshape({1, 1, g.t2, g.t1}).to(z.device());
  });
  Tensor hidden = mask.defined() ? where(own_and_later, own_and_later, mask.to(z.device())) : own_and_later;
  // Σ_{k > j} log(1 − β_ik) over the visible keys (hidden ones add 0): the row times M[k, j] = [k > j].
  Tensor log_rest = masked_fill(log_sigmoid(neg(z)), hidden, 0.0);
  Tensor later = cached_triangle_ones(triangles, g.t1, false, true, z.dtype(), z.device());  // M[k, j] = [k > j]
  Tensor log_a = log_sigmoid(z) + matmul(log_rest, later);
  return {log_a, hidden};
}

Tensor StickBreaking::attention_weights(const Tensor& logits, const Tensor& mask, double scale, const Tensor& bias,
                                        const AttentionGeometry& g) const {
  Tensor z = logits * scale;
  if (bias.defined()) z = z + bias;
  auto [log_a, hidden] = log_weights(z, mask, g);
  return masked_fill(exp(log_a), hidden, 0.0);  // (B, H, t2, t1)
}

std::vector<std::vector<double>> StickBreaking::response(const ResponseInput& in, int64_t reach) const {
  AttentionGeometry g = in.geometry;
  g.causal = in.causal;
  g.query_positions = from_vector<int64_t>(in.positions, {static_cast<int64_t>(in.positions.size())});
  Tensor z = matmul(in.q, in.k.transpose(-1, -2)) * logit_scale(in.q.size(3));
  auto [log_a, hidden] = log_weights(z, response_mask(in), g);
  std::vector<std::vector<double>> out = mean_by_delta(in, log_a - log_sigmoid(z), reach);
  for (auto& row : out) row[static_cast<size_t>(reach)] = std::numeric_limits<double>::quiet_NaN();  // δ = 0: own key
  return out;
}

double ForgettingAttention::parameters(const PositionalConfig&, double n_heads, double head_dim) {
  return n_heads * (n_heads * head_dim + 1);
}

// ---- the registry entries (layers/schemes.h): causal self-attention only, as their papers ----

SchemeEntry cope_scheme() {
  SchemeEntry e{"cope", {"cope_positions"}, [](const SchemeContext& c) {
                  return std::make_shared<CoPE>(c.head_dim, c.config.cope_positions);
                }};
  e.causal_only = e.self_only = true;
  e.check = CoPE::check;
  e.parameters = CoPE::parameters;
  e.knobs = {SchemeKnob::member("cope_positions", "embedded positions (npos_max)", &PositionalConfig::cope_positions)};
  // At most one position per key of a window (context-bench), or the bench's own count.
  e.fit = [](PositionalConfig& p, const SchemeFit& f) {
    if (f.positions > 0) p.cope_positions = f.positions;
    else if (f.rule == FitRule::HalfWindow) p.cope_positions = f.window;
  };
  e.summary = "contextual positions (CoPE)";
  return e;
}

SchemeEntry fox_scheme() {
  SchemeEntry e{"fox", {}, [](const SchemeContext& c) {
                  return std::make_shared<ForgettingAttention>(c.d_model, c.n_heads, c.init);
                }};
  e.causal_only = e.self_only = true;
  e.parameters = ForgettingAttention::parameters;
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "forgetting gates (FoX)";
  return e;
}

SchemeEntry stick_breaking_scheme() {
  SchemeEntry e{"stick_breaking", {}, [](const SchemeContext&) { return std::make_shared<StickBreaking>(); }};
  e.causal_only = e.self_only = true;
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "stick-breaking attention";
  return e;
}

}  // namespace relgrad
