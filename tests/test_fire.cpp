// FIRE (layers/fire.h): the bias equals a float64 loop written here from the paper's formula (not from
// the implementation) for every alignment and shape, thresholds below and above the positions and at
// them (ties); every parameter passes gradcheck, alone and inside MultiHeadAttention; the fused core
// serves a call exactly when every π(i) < L and then equals the composite one (output and every
// gradient); cached decoding equals the full pass; the probe's response is the bias at the batch's mean
// normaliser; the config refuses bad knobs naming the key and keeps defaults for older configs; on a
// GPU (skipped without one) output, cached decoding and every gradient equal the CPU's.
#include <algorithm>
#include <cmath>

#include "attention_testing.h"
#include "cli_testing.h"
#include "layers/attention.h"
#include "layers/fire.h"
#include "layers/models.h"
#include "layers/schemes.h"
#include "op_harness.h"
#include "train/config/config.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

const int64_t kShapes[][2] = {{4, 4}, {3, 6}, {6, 3}, {1, 5}, {5, 1}, {7, 7}};

std::vector<AttentionGeometry> geometries(int64_t heads, bool causal) {
  std::vector<AttentionGeometry> out;
  for (const auto& s : kShapes)
    for (int a = 0; a < 4; ++a) {
      AttentionGeometry g = AttentionGeometry::make(2, heads, 4, s[0], s[1], causal);
      if (a < 3) {
        g.alignment = a == 0 ? Alignment::Left : a == 1 ? Alignment::Right : Alignment::Scaled;
      } else {  // explicit, far, unordered and negative positions
        std::vector<int64_t> p;
        for (int64_t i = 0; i < s[0]; ++i) p.push_back((i * 7 + 3) % (s[1] + 40) - 20);
        g.query_positions = from_vector<int64_t>(p, {s[0]});
      }
      out.push_back(g);
    }
  return out;
}

std::vector<double> values(const Tensor& t) { return t.detach().to(kFloat64).to_vector<double>(); }

// The paper's listing in doubles: f_θ( log(|c·(i − j)| + 1) / (log(|c·max(i, L)| + 1) + ε) ), head h,
// with i = π(i), i − j = −δ, L = |L_multiplier·L0|.
double fire_value(const FIRE& s, int64_t h, int64_t pi, int64_t delta) {
  const double c = values(s.c)[0], L = std::fabs(values(s.L_multiplier)[0] * static_cast<double>(s.threshold));
  const double x = std::log(std::fabs(c * static_cast<double>(-delta)) + 1) /
                   (std::log(std::fabs(c * std::max(static_cast<double>(pi), L)) + 1) + 1e-6);
  const std::vector<double> w1 = values(s.mlp->in->weight), b1 = values(s.mlp->in->bias);
  const std::vector<double> w2 = values(s.mlp->out->weight), b2 = values(s.mlp->out->bias);
  double out = b2[static_cast<size_t>(h)];
  for (int64_t k = 0; k < s.width; ++k) out += w2[h * s.width + k] * std::max(0.0, w1[k] * x + b1[k]);
  return out;
}

std::vector<Tensor*> all_parameters(FIRE& s) {
  return {&s.mlp->in->weight, &s.mlp->in->bias, &s.mlp->out->weight, &s.mlp->out->bias, &s.c, &s.L_multiplier};
}

void set_scalars(FIRE& s, double c, double multiplier) {
  NoGradGuard no_grad;
  s.c.copy_(full({1}, c, s.c.dtype()));
  s.L_multiplier.copy_(full({1}, multiplier, s.c.dtype()));
}

}  // namespace

TEST_CASE("FIRE: parameters, names and the paper's initialisation") {
  Generator gen(1);
  FIRE s(3, 5, 64, &gen);
  std::vector<std::string> names;
  for (const auto& [name, p] : s.named_parameters()) names.push_back(name);
  // A module's own parameters before its children's, as PyTorch's named_parameters (and the paper's module).
  CHECK(names == std::vector<std::string>{"c", "L_multiplier", "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"});
  CHECK(s.mlp->in->weight.shape() == Shape{5, 1});
  CHECK(s.mlp->out->weight.shape() == Shape{3, 5});
  CHECK(values(s.c) == std::vector<double>{static_cast<double>(0.1f)});
  CHECK(values(s.L_multiplier) == std::vector<double>{1.0});
  CHECK(values(s.threshold_length()) == std::vector<double>{64.0});
  size_t n = 0;
  for (const auto& [name, p] : s.named_parameters()) n += static_cast<size_t>(p.numel());
  PositionalConfig p;
  p.fire_width = 5;
  CHECK(FIRE::parameters(p, 3, 4) == static_cast<double>(n));
}

TEST_CASE("FIRE: the bias equals the paper's formula for every alignment and shape, with gradcheck of every parameter") {
  // L below, between and above the positions; L = 3 exactly (multiplier 1, L0 3) puts ties at π(i) = 3,
  // where the gradient of L is halved as torch.maximum's (and a central difference's); c < 0 uses |c|.
  const struct { int64_t L0; double c, multiplier; } cases[] = {{512, 0.1, 1.0}, {3, 0.1, 1.0}, {4, -0.7, 0.9}, {2, 2.5, -1.3}};
  for (const auto& k : cases) {
    INFO("L0 ", k.L0, " c ", k.c, " multiplier ", k.multiplier);
    Generator gen(3);
    FIRE s(2, 4, k.L0, &gen);
    s.to(kFloat64);
    set_scalars(s, k.c, k.multiplier);
    std::vector<Tensor*> params = all_parameters(s);
    for (bool causal : {false, true})
      for (const AttentionGeometry& g : geometries(2, causal)) {
        INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment), " explicit ", g.query_positions.defined());
        Tensor bias = s.logit_bias(g);
        REQUIRE(bias.shape() == Shape{1, 2, g.t2, g.t1});
        std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
        Ref expected({1, 2, g.t2, g.t1});
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < g.t2; ++i)
            for (int64_t j = 0; j < g.t1; ++j) expected.at({0, h, i, j}) = fire_value(s, h, pi[i], j - pi[i]);
        CHECK_CLOSE(bias, expected.tensor(), 1e-12, 1e-12);
        if (g.t2 > 1 && !causal) gradcheck_with_params(params, {}, [&](const TensorList&) { return s.logit_bias(g); });
      }
  }
}

TEST_CASE("FIRE: the threshold's gradient is nonzero where a query sits below L, zero where every query is above") {
  Generator gen(2);
  FIRE s(2, 4, 3, &gen);
  s.to(kFloat64);
  set_scalars(s, 0.5, 0.9);  // L = 2.7
  for (bool below : {true, false}) {
    AttentionGeometry g = AttentionGeometry::make(1, 2, 4, 2, 8, false);
    g.query_positions = from_vector<int64_t>(below ? std::vector<int64_t>{1, 5} : std::vector<int64_t>{3, 6}, {2});
    s.zero_grad();
    s.logit_bias(g).sum().backward();
    CHECK((values(s.L_multiplier.grad())[0] != 0.0) == below);
    CHECK(values(s.c.grad())[0] != 0.0);
  }
}

TEST_CASE("FIRE: gradcheck inside MultiHeadAttention, self causal and bidirectional, cross with padding") {
  for (int64_t L0 : {2, 512})
    for (int mode = 0; mode < 3; ++mode) {
      INFO("L0 ", L0, " mode ", mode);
      Generator g(7);
      auto s = std::make_shared<FIRE>(2, 3, L0, &g);
      s->to(kFloat64);
      set_scalars(*s, 0.3, 1.1);  // L = 2.2 or 563.2: no tie
      gradcheck_attention(s, /*causal=*/mode == 0, /*cross=*/mode == 2, mode == 2 ? Alignment::Right : Alignment::Left,
                          all_parameters(*s));
    }
}

TEST_CASE("FIRE: the fused core serves a call when every π(i) < L and equals the composite one, output and every gradient") {
  const int64_t C = 16, H = 2, B = 2;
  for (int64_t L0 : {512, 20})
    for (int mode = 0; mode < 3; ++mode) {  // 0 causal self, 1 bidirectional self + padding, 2 cross right-aligned
      INFO("L0 ", L0, " mode ", mode);
      Generator init(3);
      auto s = std::make_shared<FIRE>(H, 8, L0, &init);
      auto m = std::make_shared<MultiHeadAttention>(C, H, s, 0.0, true, &init);
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
      CHECK(m->last_call_fused == (L0 == 512));  // π(i) reaches 36 (self) or 22 (cross): past L = 20
      REQUIRE(ref.size() == got.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("tensor ", i);
        CHECK_CLOSE(got[i], ref[i], 1e-12, 1e-10);
      }
    }
}

TEST_CASE("FIRE: cached decoding gives the logits of the full pass, self and cross, composite and fused") {
  for (int64_t L0 : {512, 4})  // 4: the decoded queries pass L, so the normaliser changes per step
    for (AttentionCore core : {AttentionCore::Composite, AttentionCore::Fused}) {
      INFO("L0 ", L0, " core ", kAttentionCoreNames.name(core));
      TransformerConfig c;
      c.vocab_size = 11;
      c.d_model = 8;
      c.n_heads = 2;
      c.d_ff = 16;
      c.n_encoder_layers = 1;
      c.n_decoder_layers = 2;
      c.dropout = 0.1;
      c.attention_core = core;
      c.encoder_self.scheme = c.decoder_self.scheme = c.cross.scheme = "fire";
      c.encoder_self.fire_threshold = c.decoder_self.fire_threshold = c.cross.fire_threshold = L0;
      c.decoder_self.fire_width = 6;
      check_cached_decoding(c);
    }
}

TEST_CASE("FIRE: the probe's response is the bias at the batch's mean normaliser") {
  Generator g(4);
  FIRE s(2, 5, 3, &g);
  s.to(kFloat64);
  set_scalars(s, 0.4, 1.0);  // L = 3
  ResponseInput in;
  in.positions = {0, 2, 5, 9};
  in.query_valid = {true, true, true, false, true, true, false, false};  // (B = 2, t2 = 4): 9 is padding
  in.geometry = AttentionGeometry::make(2, 2, 4, 4, 10, false);
  const std::vector<std::vector<double>> r = s.response(in, 4);
  REQUIRE(r.size() == 2);
  // Normalisers ψ(max(π, 3)) + ε of the valid queries 0, 2, 5, 0, 2 (ψ(x) = log(0.4·x + 1)).
  auto psi = [](double x) { return std::log(0.4 * x + 1); };
  const double mean = (3 * psi(3) + psi(3) + psi(5)) / 5 + 1e-6;
  const std::vector<double> w1 = values(s.mlp->in->weight), b1 = values(s.mlp->in->bias);
  const std::vector<double> w2 = values(s.mlp->out->weight), b2 = values(s.mlp->out->bias);
  for (int64_t h = 0; h < 2; ++h) {
    REQUIRE(r[h].size() == 9);
    for (int64_t w = 0; w < 9; ++w) {
      const double x = psi(std::fabs(w - 4.0)) / mean;
      double b = b2[h];
      for (int64_t k = 0; k < 5; ++k) b += w2[h * 5 + k] * std::max(0.0, w1[k] * x + b1[k]);
      CHECK(r[h][w] == doctest::Approx(b).epsilon(1e-13));
    }
  }
  // Every query below L: the response is the bias itself at each distance (one normaliser ψ(L) + ε).
  in.positions = {0, 1, 2, 2};
  const std::vector<std::vector<double>> low = s.response(in, 4);
  AttentionGeometry one = AttentionGeometry::make(1, 2, 4, 1, 9, false);
  one.query_positions = from_vector<int64_t>({2}, {1});
  std::vector<double> b = values(s.logit_bias(one));  // keys 0 … 8 at δ = −2 … 6
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t w = 2; w < 9; ++w) CHECK(low[h][w] == doctest::Approx(b[h * 9 + w - 2]).epsilon(1e-13));
}

TEST_CASE("FIRE: bad knobs are config errors naming the key, bad layers clear errors") {
  auto dry = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--dry-run", "--model.type=decoder-only"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_relgrad(args);
  };
  CliResult r = dry({"--model.decoder_self.scheme=fire", "--model.decoder_self.fire_width=0"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.fire_width must be at least 1 (model.decoder_self.scheme = fire), got 0"),
                r.err);
  r = dry({"--model.decoder_self.scheme=fire", "--model.decoder_self.fire_threshold=-5"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "model.decoder_self.fire_threshold must be at least 1 (model.decoder_self.scheme = fire), "
                                "got -5"), r.err);
  CHECK_CLI(dry({"--model.decoder_self.scheme=fire", "--model.decoder_self.fire_width=8",
                 "--model.decoder_self.fire_threshold=64"}), 0);
  CHECK_CLI(dry({"--model.decoder_self.scheme=t5", "--model.decoder_self.fire_width=0"}), 0);  // read only by fire
  const SchemeEntry* e = find_scheme("fire");
  REQUIRE(e != nullptr);
  CHECK(placement(*e, false, true) == Placement::Allowed);
  CHECK(placement(*e, false, false) == Placement::Allowed);
  check_throws_with([] { FIRE(2, 0); }, "[FIRE] width must be positive, got 0");
  check_throws_with([] { FIRE(2, 4, 0); }, "[FIRE] threshold (L0) must be positive, got 0");
  check_throws_with([] { FIRE(0); }, "[FIRE] num_heads must be positive, got 0");
  auto mha = std::make_shared<MultiHeadAttention>(8, 2, std::make_shared<FIRE>(4), 0.0, true);
  Tensor x = zeros({1, 3, 8});
  check_throws_with([&] { mha->forward(x, x); }, "[fire] built for 4 heads, the attention has 2");
}

TEST_CASE("FIRE: a config without the new keys (an older checkpoint's) has their defaults, they round-trip") {
  RunConfig c = RunConfig::defaults();
  load_config_json_text(c, R"({"model": {"decoder_self": {"scheme": "t5"}}})", "older");
  for (const PositionalConfig* p : {&c.model.encoder_self, &c.model.decoder_self, &c.model.cross}) {
    CHECK(p->fire_width == 32);
    CHECK(p->fire_threshold == 512);
  }
  set_config_value(c, "model.decoder_self.fire_width", "16");
  set_config_value(c, "model.cross.fire_threshold", "128");
  RunConfig back = RunConfig::defaults();
  load_config_json_text(back, config_to_json(c), "round trip");
  CHECK(back.model.decoder_self.fire_width == 16);
  CHECK(back.model.cross.fire_threshold == 128);
  CHECK(back.model.encoder_self.fire_width == 32);
}

TEST_CASE("FIRE on CUDA: output, cached decoding and every gradient equal the CPU's, composite and fused") {
  if (!have_gpu()) return;
  const int64_t C = 8, H = 2, B = 2, t = 6;
  for (int64_t L0 : {512, 3})  // fused (every π(i) < L) and composite (queries past L)
    for (AttentionCore core : {AttentionCore::Composite, AttentionCore::Fused}) {
      INFO("L0 ", L0, " core ", kAttentionCoreNames.name(core));
      Generator init_cpu(19), init_gpu(19);
      MultiHeadAttention cpu(C, H, std::make_shared<FIRE>(H, 5, L0, &init_cpu), 0.0, true, &init_cpu);
      MultiHeadAttention gpu(C, H, std::make_shared<FIRE>(H, 5, L0, &init_gpu), 0.0, true, &init_gpu);
      cpu.to(kFloat64);
      gpu.to(kFloat64);
      gpu.to(Device::cuda());
      cpu.core = gpu.core = core;
      Tensor x = uniform({B, t, C}, -1, 1, kFloat64, 20);
      Tensor xg = x.to(Device::cuda());
      AttentionOptions o;
      o.causal = true;
      Tensor a = cpu.forward(x, x, o).output, b = gpu.forward(xg, xg, o).output;
      CHECK(gpu.last_call_fused == (core == AttentionCore::Fused && L0 == 512));
      CHECK_CLOSE(b.to(Device::cpu()), a, 1e-12, 1e-10);
      {
        NoGradGuard no_grad;
        KVCache cache;
        Tensor first = gpu.forward(xg.narrow(1, 0, 4), cache, o).output, rest = gpu.forward(xg.narrow(1, 4, 2), cache, o).output;
        CHECK_CLOSE(cat({first, rest}, 1).to(Device::cpu()), a, 1e-12, 1e-10);
      }
      Tensor probe = uniform({B, t, C}, -1, 1, kFloat64, 21);
      sum(a * probe).backward();
      sum(b * probe.to(Device::cuda())).backward();
      auto pa = cpu.named_parameters(), pb = gpu.named_parameters();
      REQUIRE(pa.size() == pb.size());
      for (size_t n = 0; n < pa.size(); ++n) {
        INFO("parameter ", pa[n].first);
        CHECK_CLOSE(pb[n].second.grad().to(Device::cpu()), pa[n].second.grad(), 1e-11, 1e-9);
      }
    }
}
