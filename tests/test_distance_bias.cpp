// The distance-bias family (layers/distance_bias.h): KERPLE (log and power), Sandwich and the dynamic
// position bias. Each bias equals a float64 loop written here from the papers' formulas (not from the
// implementation) for every alignment and shape; gradients pass gradcheck, alone and inside
// MultiHeadAttention; the fused core equals the composite one (output and every gradient); cached
// decoding equals the full pass; the probe's response is the bias per distance; the config refuses bad
// knobs naming the key.
#include <cmath>

#include "attention_testing.h"
#include "cli_testing.h"
#include "layers/attention.h"
#include "layers/distance_bias.h"
#include "layers/models.h"
#include "layers/schemes.h"
#include "op_harness.h"
#include "train/config/config.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

const int64_t kShapes[][2] = {{4, 4}, {3, 6}, {6, 3}, {1, 5}, {5, 1}, {7, 7}};

// Every way of placing queries on the key axis; the last is explicit, far and unordered positions.
std::vector<AttentionGeometry> geometries(int64_t heads, bool causal) {
  std::vector<AttentionGeometry> out;
  for (const auto& s : kShapes)
    for (int a = 0; a < 4; ++a) {
      AttentionGeometry g = AttentionGeometry::make(2, heads, 4, s[0], s[1], causal);
      if (a < 3) {
        g.alignment = a == 0 ? Alignment::Left : a == 1 ? Alignment::Right : Alignment::Scaled;
      } else {
        std::vector<int64_t> p;
        for (int64_t i = 0; i < s[0]; ++i) p.push_back((i * 7 + 3) % (s[1] + 40) - 20);
        g.query_positions = from_vector<int64_t>(p, {s[0]});
      }
      out.push_back(g);
    }
  return out;
}

// The bias of `scheme` against `value(h, δ)` at every (h, i, j), and the gradient of its parameters.
template <class Value>
void check_bias(const DistanceBias& scheme, const Value& value, std::vector<Tensor*> params) {
  for (bool causal : {false, true})
    for (const AttentionGeometry& g : geometries(scheme.num_heads, causal)) {
      INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment), " explicit ", g.query_positions.defined());
      Tensor bias = scheme.logit_bias(g);
      REQUIRE(bias.shape() == Shape{1, scheme.num_heads, g.t2, g.t1});
      std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
      Ref expected({1, scheme.num_heads, g.t2, g.t1});
      for (int64_t h = 0; h < scheme.num_heads; ++h)
        for (int64_t i = 0; i < g.t2; ++i)
          for (int64_t j = 0; j < g.t1; ++j) expected.at({0, h, i, j}) = value(h, j - pi[i]);
      CHECK_CLOSE(bias, expected.tensor(), 1e-12, 1e-12);
      if (!params.empty() && g.t2 > 1 && !causal)
        gradcheck_with_params(params, {}, [&](const TensorList&) { return scheme.logit_bias(g); });
    }
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }

// The dynamic bias by hand from its Linear weights: x = i − j = −δ (or its signed log), the MLP in doubles.
double dynamic_value(const DynamicBias& s, int64_t h, int64_t delta) {
  double x = static_cast<double>(-delta);
  if (s.log_distance) x = (x > 0 ? 1 : x < 0 ? -1 : 0) * std::log(std::fabs(x) + 1);
  std::vector<double> act = {x};
  for (size_t l = 0; l < s.mlp.size(); ++l) {
    const Linear& lin = *s.mlp[l];
    std::vector<double> w = lin.weight.detach().to(kFloat64).to_vector<double>(), b = lin.bias.detach().to(kFloat64).to_vector<double>();
    std::vector<double> next(static_cast<size_t>(lin.out_features));
    for (int64_t o = 0; o < lin.out_features; ++o) {
      double z = b[o];
      for (int64_t k = 0; k < lin.in_features; ++k) z += w[o * lin.in_features + k] * act[k];
      next[o] = l + 1 < s.mlp.size() ? silu(z) : z;
    }
    act = next;
  }
  return act[static_cast<size_t>(h)];
}

double sandwich_value(int64_t dim, int64_t H, int64_t h, int64_t delta) {
  double s = 0;
  for (int64_t k = 1; k <= dim / 2; ++k) s += std::cos(static_cast<double>(delta) / std::pow(10000.0, 2.0 * k / dim));
  // the ratio as its float32 buffer holds it (8/3 is not a float32 number)
  return (s - dim / 2.0) / static_cast<double>(static_cast<float>(8.0 * (h + 1) / H));
}

std::shared_ptr<PositionalScheme> make(const std::string& name, int64_t C, int64_t H, Generator* g) {
  if (name == "kerple_log") return std::make_shared<Kerple>(H, KerpleVariant::Log, g);
  if (name == "kerple_power") return std::make_shared<Kerple>(H, KerpleVariant::Power, g);
  if (name == "sandwich") return std::make_shared<Sandwich>(H, 16);
  return std::make_shared<DynamicBias>(H, C / 4, 2, name == "dynamic_bias_log", g);
}
const char* kVariants[] = {"kerple_log", "kerple_power", "sandwich", "dynamic_bias", "dynamic_bias_log"};

}  // namespace

TEST_CASE("Kerple: the bias equals −r1·log(1 + r2·|δ|) and −r1·|δ|^r2 for every alignment and shape, with gradcheck") {
  for (KerpleVariant v : {KerpleVariant::Log, KerpleVariant::Power}) {
    INFO("variant ", kKerpleVariantNames.name(v));
    Generator gen(3);
    Kerple k(3, v, &gen);
    k.to(kFloat64);
    std::vector<double> r1 = k.r1.detach().to_vector<double>(), r2 = k.r2.detach().to_vector<double>();
    for (int64_t h = 0; h < 3; ++h) {  // the draws: inside the bounds, in the released code's ranges
      CHECK(r1[h] > Kerple::kEps);
      CHECK(r2[h] > Kerple::kEps);
      CHECK(r1[h] < (v == KerpleVariant::Log ? 2.0 : 1.0));
      CHECK(r2[h] < (v == KerpleVariant::Log ? 1.0 : 2.0));
    }
    check_bias(k, [&](int64_t h, int64_t d) {
      const double a = std::fabs(static_cast<double>(d));
      return v == KerpleVariant::Log ? -r1[h] * std::log(1 + r2[h] * a) : -r1[h] * std::pow(a, r2[h]);
    }, {&k.r1, &k.r2});
  }
}

TEST_CASE("Kerple: parameters past a bound act at the bound (the paper's projection) and keep their gradient") {
  Kerple k(2, KerpleVariant::Power);
  k.to(kFloat64);
  {
    NoGradGuard no_grad;
    k.r1.copy_(from_vector<double>({-0.5, 0.3}, {2}));
    k.r2.copy_(from_vector<double>({3.0, 0.001}, {2}));
  }
  Tensor t = k.bias_table(-2, 5);  // δ = −2 … 2
  std::vector<double> got = t.detach().to_vector<double>();
  const double a[2] = {Kerple::kEps, 0.3}, p[2] = {2.0, Kerple::kEps};
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t w = 0; w < 5; ++w)
      CHECK(got[h * 5 + w] == doctest::Approx(-a[h] * std::pow(std::fabs(w - 2.0), p[h])).epsilon(1e-14));
  t.sum().backward();
  // d/dr1 of −r1·Σ|δ|^r2 (straight through the projection): −Σ|δ|^r2 at the projected r2.
  std::vector<double> g1 = k.r1.grad().to_vector<double>();
  CHECK(g1[0] == doctest::Approx(-2 * (4.0 + 1.0)).epsilon(1e-12));
  CHECK(g1[1] != 0.0);
  std::vector<double> g2 = k.r2.grad().to_vector<double>();
  CHECK(g2[0] != 0.0);
  CHECK(g2[1] != 0.0);
}

TEST_CASE("Sandwich: the bias equals (Σ cos(δ/10000^(2k/d')) − d'/2)/(8h/H): even, 0 at δ = 0, no parameters") {
  for (int64_t dim : {2, 16, 128}) {
    INFO("d' ", dim);
    Sandwich s(3, dim);
    s.to(kFloat64);
    check_bias(s, [&](int64_t h, int64_t d) { return sandwich_value(dim, 3, h, d); }, {});
    std::vector<double> t = s.bias_table(-5, 11).to_vector<double>();
    for (int64_t h = 0; h < 3; ++h) {
      CHECK(t[h * 11 + 5] == 0.0);
      for (int64_t w = 0; w < 11; ++w) {
        CHECK(t[h * 11 + w] == doctest::Approx(t[h * 11 + 10 - w]).epsilon(1e-15));
        CHECK(t[h * 11 + w] <= 0.0);
      }
    }
  }
  Sandwich s(4);
  CHECK(s.parameters().empty());
  CHECK(s.ratios.to_vector<float>() == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("DynamicBias: the bias equals the MLP of −δ (and of its signed log) by hand, with gradcheck of every weight") {
  for (int64_t depth : {1, 2, 3})
    for (bool log_distance : {false, true}) {
      INFO("depth ", depth, " log_distance ", log_distance);
      Generator gen(5);
      DynamicBias s(2, 3, depth, log_distance, &gen);
      s.to(kFloat64);
      CHECK(s.named_parameters().size() == static_cast<size_t>(2 * (depth + 1)));
      CHECK(s.named_parameters().front().first == "mlp.0.weight");
      std::vector<Tensor*> params;
      for (auto& l : s.mlp) params.insert(params.end(), {&l->weight, &l->bias});
      check_bias(s, [&](int64_t h, int64_t d) { return dynamic_value(s, h, d); }, params);
    }
}

TEST_CASE("distance biases: gradcheck inside MultiHeadAttention, self causal and cross with padding") {
  for (const char* v : kVariants) {
    INFO(v);
    Generator g(7);
    for (bool cross : {false, true}) {
      auto s = make(v, 8, 2, &g);
      std::vector<Tensor*> params;
      if (auto* k = dynamic_cast<Kerple*>(s.get())) params = {&k->r1, &k->r2};
      gradcheck_attention(s, /*causal=*/!cross, cross, Alignment::Left, params);
    }
  }
}

TEST_CASE("distance biases: the fused core equals the composite one, output and every gradient (float64)") {
  const int64_t C = 16, H = 2, B = 2;
  for (const char* v : kVariants)
    for (int mode = 0; mode < 3; ++mode) {  // 0 causal self, 1 bidirectional self + padding, 2 cross right-aligned
      INFO(v, " mode ", mode);
      Generator init(3);
      auto m = std::make_shared<MultiHeadAttention>(C, H, make(v, C, H, &init), 0.0, true, &init);
      m->to(kFloat64);
      const int64_t t2 = 37, t1 = mode == 2 ? 23 : 37;
      Tensor x = uniform({B, t2, C}, -1, 1, kFloat64, 5);
      Tensor mem = mode == 2 ? uniform({B, t1, C}, -1, 1, kFloat64, 6) : x;
      AttentionOptions o;
      o.causal = mode == 0;
      if (mode == 2) o.alignment = Alignment::Right;
      if (mode >= 1) {
        std::vector<bool> pad(static_cast<size_t>(B * t1), false);
        for (int64_t j = 0; j < t1; ++j) pad[t1 + j] = j >= t1 - 4;
        o.key_padding_mask = from_vector<bool>(pad, {B, t1});
      }
      m->core = AttentionCore::Composite;
      TensorList ref = layer_run(*m, x, mem, o);
      CHECK_FALSE(m->last_call_fused);
      m->core = AttentionCore::Fused;
      TensorList got = layer_run(*m, x, mem, o);
      CHECK(m->last_call_fused);
      REQUIRE(ref.size() == got.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("tensor ", i);
        CHECK_CLOSE(got[i], ref[i], 1e-12, 1e-10);
      }
    }
}

TEST_CASE("distance biases: cached decoding gives the logits of the full pass, self and cross, composite and fused") {
  for (const char* scheme : {"kerple", "sandwich", "dynamic_bias"})
    for (AttentionCore core : {AttentionCore::Composite, AttentionCore::Fused}) {
      INFO(scheme, " core ", kAttentionCoreNames.name(core));
      TransformerConfig c;
      c.vocab_size = 11;
      c.d_model = 8;
      c.n_heads = 2;
      c.d_ff = 16;
      c.n_encoder_layers = 1;
      c.n_decoder_layers = 2;
      c.dropout = 0.1;
      c.attention_core = core;
      c.encoder_self.scheme = c.decoder_self.scheme = c.cross.scheme = scheme;
      c.decoder_self.kerple_variant = KerpleVariant::Power;
      c.decoder_self.sandwich_dim = 8;
      c.cross.dynamic_bias_log_distance = true;
      check_cached_decoding(c);
    }
}

TEST_CASE("distance biases: the probe's response is the bias at each distance") {
  Generator g(4);
  for (const char* v : kVariants) {
    INFO(v);
    auto s = std::dynamic_pointer_cast<DistanceBias>(make(v, 8, 2, &g));
    s->to(kFloat64);
    ResponseInput in;
    in.geometry = AttentionGeometry::make(1, 2, 4, 3, 3, false);
    std::vector<std::vector<double>> r = s->response(in, 4);
    REQUIRE(r.size() == 2);
    AttentionGeometry one = AttentionGeometry::make(1, 2, 4, 1, 9, false);
    one.query_positions = from_vector<int64_t>({4}, {1});  // keys 0 … 8 at δ = −4 … 4
    std::vector<double> b = s->logit_bias(one).to_vector<double>();
    for (int64_t h = 0; h < 2; ++h) {
      REQUIRE(r[h].size() == 9);
      for (int64_t w = 0; w < 9; ++w) CHECK(r[h][w] == doctest::Approx(b[h * 9 + w]).epsilon(1e-14));
    }
  }
}

TEST_CASE("distance biases: bad knobs are config errors naming the key, bad layers clear errors") {
  auto dry = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--dry-run", "--model.type=decoder-only"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_relgrad(args);
  };
  CliResult r = dry({"--model.decoder_self.scheme=sandwich", "--model.decoder_self.sandwich_dim=7"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.sandwich_dim must be even and positive (model.decoder_self.scheme = "
                                "sandwich), got 7"), r.err);
  r = dry({"--model.decoder_self.scheme=dynamic_bias", "--model.decoder_self.dynamic_bias_depth=0"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.dynamic_bias_depth must be at least 1"), r.err);
  r = dry({"--model.decoder_self.scheme=kerple", "--model.decoder_self.kerple_variant=cubic"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.kerple_variant"), r.err);
  CHECK_MESSAGE(contains(r.err, "cubic"), r.err);
  for (const char* scheme : {"kerple", "sandwich", "dynamic_bias"}) {
    INFO(scheme);
    CHECK_CLI(dry({std::string("--model.decoder_self.scheme=") + scheme, "--model.decoder_self.kerple_variant=power"}), 0);
    const SchemeEntry* e = find_scheme(scheme);
    REQUIRE(e != nullptr);
    CHECK(placement(*e, false, true) == Placement::Allowed);
    CHECK(placement(*e, false, false) == Placement::Allowed);
  }
  check_throws_with([] { Sandwich(2, 5); }, "[Sandwich] dim (d') must be even and positive, got 5");
  check_throws_with([] { DynamicBias(2, 4, 0); }, "[DynamicBias] depth must be at least 1, got 0");
  check_throws_with([] { Kerple(0); }, "[DistanceBias] num_heads must be positive, got 0");
  auto mha = std::make_shared<MultiHeadAttention>(8, 2, std::make_shared<Kerple>(4), 0.0, true);
  Tensor x = zeros({1, 3, 8});
  check_throws_with([&] { mha->forward(x, x); }, "[kerple] built for 4 heads, the attention has 2");
}

TEST_CASE("distance biases: a config without the new keys (an older checkpoint's) has their defaults, they round-trip") {
  RunConfig c = RunConfig::defaults();
  load_config_json_text(c, R"({"model": {"decoder_self": {"scheme": "t5"}}})", "older");
  for (const PositionalConfig* p : {&c.model.encoder_self, &c.model.decoder_self, &c.model.cross}) {
    CHECK(p->kerple_variant == KerpleVariant::Log);
    CHECK(p->sandwich_dim == 128);
    CHECK(p->dynamic_bias_depth == 2);
    CHECK_FALSE(p->dynamic_bias_log_distance);
  }
  set_config_value(c, "model.decoder_self.kerple_variant", "power");
  set_config_value(c, "model.encoder_self.sandwich_dim", "16");
  set_config_value(c, "model.cross.dynamic_bias_depth", "3");
  set_config_value(c, "model.cross.dynamic_bias_log_distance", "true");
  RunConfig back = RunConfig::defaults();
  load_config_json_text(back, config_to_json(c), "round trip");
  CHECK(back.model.decoder_self.kerple_variant == KerpleVariant::Power);
  CHECK(back.model.encoder_self.sandwich_dim == 16);
  CHECK(back.model.cross.dynamic_bias_depth == 3);
  CHECK(back.model.cross.dynamic_bias_log_distance);
}
