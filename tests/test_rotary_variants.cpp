// The rotary family (layers/rotary_variants.h) and the RoPE scalings (layers/rotary.h): the scalings'
// frequencies equal Hugging Face's (values written out below from transformers' modeling_rope_utils,
// computed in float64 by PyTorch); xPos, p-RoPE and PoPE equal explicit float64 loops written from
// their papers for every alignment and shape; gradients pass gradcheck, alone and inside
// MultiHeadAttention; fused equals composite; cached decoding equals the full pass; the measured
// response is the mean logit per offset; bad knobs are config errors naming their keys. The scaling
// knobs in configs and on the command line: tests/test_rope_scaling.cpp.
#include <cmath>

#include "layers/attention.h"
#include "layers/models.h"
#include "layers/rotary_variants.h"
#include "layers/schemes.h"
#include "attention_testing.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

const double kTwoPi = 2.0 * std::acos(-1.0);

std::vector<AttentionGeometry> geometries(int64_t heads, int64_t head_dim, bool causal) {
  std::vector<AttentionGeometry> out;
  for (auto [t2, t1] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {3, 6}, {6, 3}, {1, 5}})
    for (int a = 0; a < 4; ++a) {
      AttentionGeometry g = AttentionGeometry::make(2, heads, head_dim, t2, t1, causal);
      if (a < 3) {
        g.alignment = a == 0 ? Alignment::Left : a == 1 ? Alignment::Right : Alignment::Scaled;
      } else {
        std::vector<int64_t> p;
        for (int64_t i = 0; i < t2; ++i) p.push_back((i * 5 + 2) % (t1 + 9) - 4);  // unordered, some < 0
        g.query_positions = from_vector<int64_t>(p, {t2});
      }
      out.push_back(g);
    }
  return out;
}

// The dot product of interleaved pairs of q (at position m) and k (at n), each pair k turning by
// position / timescale[k] and scaled by amp(k, position, key side): the rotary family's definition.
template <class Amp>
double rotary_dot(const Ref& q, const Ref& k, int64_t b, int64_t h, int64_t i, int64_t j, double m, double n,
                  const std::vector<double>& timescale, Amp amp) {
  double dot = 0;
  for (size_t p = 0; p < timescale.size(); ++p) {
    const int64_t d0 = static_cast<int64_t>(2 * p), d1 = d0 + 1;
    const double am = std::isinf(timescale[p]) ? 0.0 : m / timescale[p];
    const double an = std::isinf(timescale[p]) ? 0.0 : n / timescale[p];
    const double q0 = q.at({b, h, i, d0}), q1 = q.at({b, h, i, d1}), k0 = k.at({b, h, j, d0}), k1 = k.at({b, h, j, d1});
    const double rq0 = q0 * std::cos(am) - q1 * std::sin(am), rq1 = q1 * std::cos(am) + q0 * std::sin(am);
    const double rk0 = k0 * std::cos(an) - k1 * std::sin(an), rk1 = k1 * std::cos(an) + k0 * std::sin(an);
    dot += amp(p, m, false) * amp(p, n, true) * (rq0 * rk0 + rq1 * rk1);
  }
  return dot;
}

// The scheme's content logits q'·k'ᵀ against `expected(b, h, i, j, π(i))` for every geometry.
template <class Expected>
void check_content_logits(const PositionalScheme& s, int64_t H, int64_t D, bool causal, Expected expected) {
  for (const AttentionGeometry& g : geometries(H, D, causal)) {
    INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment));
    Tensor q = uniform({2, H, g.t2, D}, -1, 1, kFloat64, 1), k = uniform({2, H, g.t1, D}, -1, 1, kFloat64, 2);
    auto qk = s.content_qk(q, k, g);
    Tensor logits = matmul(qk.first, qk.second.transpose(-1, -2));
    Ref rq(q), rk(k), e({2, H, g.t2, g.t1});
    std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < g.t2; ++i)
          for (int64_t j = 0; j < g.t1; ++j) e.at({b, h, i, j}) = expected(rq, rk, b, h, i, j, double(pi[i]));
    CHECK_CLOSE(logits, e.tensor(), 1e-11, 1e-12);
  }
}

std::vector<double> rope_timescales(int64_t D, double base, int64_t rotated) {
  std::vector<double> t;
  for (int64_t k = 0; k < D / 2; ++k)
    t.push_back(k < rotated ? std::pow(base, 2.0 * k / D) : std::numeric_limits<double>::infinity());
  return t;
}

void check_inverse_frequencies(const RotaryFrequencies& f, const std::vector<double>& hf_inv_freq) {
  REQUIRE(f.timescale.size() == hf_inv_freq.size());
  for (size_t k = 0; k < hf_inv_freq.size(); ++k) {
    INFO("pair ", k);
    CHECK(1.0 / f.timescale[k] == doctest::Approx(hf_inv_freq[k]).epsilon(1e-14));
  }
}

}  // namespace

// ---- the RoPE scalings ----

TEST_CASE("RoPE scaling: inverse frequencies and temperature equal Hugging Face's (D = 16, base 10000)") {
  // transformers' _compute_linear_scaling_rope_parameters, factor 4: inv_freq / 4.
  RotaryFrequencies lin = rotary_frequencies(16, 10000, {RopeScalingKind::Linear, 4.0, 0});
  check_inverse_frequencies(lin, {0.25, 0.07905694150420949, 0.025, 0.007905694150420948, 0.0025,
                                  0.0007905694150420947, 0.00025, 7.905694150420948e-05});
  CHECK(lin.mscale == 1.0);
  // _compute_dynamic_ntk_parameters, factor 2 at seq_len 96 of max_position_embeddings 64: its base
  // grows by (2·96/64 − 1)^(D/(D−2)) = 2^(16/14), the static NTK-aware base of factor 2.
  RotaryFrequencies ntk = rotary_frequencies(16, 10000, {RopeScalingKind::Ntk, 2.0, 0});
  check_inverse_frequencies(ntk, {1.0, 0.2864149709787598, 0.08203353560076379, 0.023495632718377818,
                                  0.006729500963161781, 0.0019274298230655173, 0.0005520447568369062,
                                  0.00015811388300841897});
  // _compute_yarn_parameters (β_fast 32, β_slow 1): factor 4 from 64 (ramp over pairs 0 … 3) and
  // factor 8 from 2048 (ramp over pairs 2 … 6); attention_factor 0.1 ln s + 1.
  RotaryFrequencies y4 = rotary_frequencies(16, 10000, {RopeScalingKind::Yarn, 4.0, 64});
  check_inverse_frequencies(y4, {1.0, 0.23717082451262847, 0.05, 0.007905694150420948, 0.0025,
                                 0.0007905694150420947, 0.00025, 7.905694150420948e-05});
  CHECK(y4.mscale == doctest::Approx(1.138629436111989).epsilon(1e-15));
  RotaryFrequencies y8 = rotary_frequencies(16, 10000, {RopeScalingKind::Yarn, 8.0, 2048});
  check_inverse_frequencies(y8, {1.0, 0.31622776601683794, 0.1, 0.02470529422006546, 0.005625,
                                 0.0010870329456828802, 0.000125, 3.952847075210474e-05});
  CHECK(y8.mscale == doctest::Approx(1.2079441541679836).epsilon(1e-15));
  // None, and every scaling at factor 1, is RoPE itself (YaRN's temperature is 1 there).
  for (RopeScalingKind kind : {RopeScalingKind::None, RopeScalingKind::Linear, RopeScalingKind::Ntk, RopeScalingKind::Yarn}) {
    RotaryFrequencies f = rotary_frequencies(16, 10000, {kind, 1.0, 64});
    CHECK(f.mscale == 1.0);
    for (int64_t k = 0; k < 8; ++k) CHECK(f.timescale[k] == doctest::Approx(std::pow(10000.0, k / 8.0)).epsilon(1e-14));
  }
}

TEST_CASE("RoPE scaling: linear is RoPE at positions / s, YaRN's logits carry its temperature squared") {
  Tensor q = uniform({1, 2, 3, 8}, -1, 1, kFloat64, 5), k = uniform({1, 2, 3, 8}, -1, 1, kFloat64, 6);
  RoPE plain(8), linear(8, 10000, RoPE::Pairing::Interleaved, {RopeScalingKind::Linear, 4.0, 0});
  // positions 0, 4, 8 under s = 4 are positions 0, 1, 2 unscaled
  Tensor p4 = from_vector<int64_t>({0, 4, 8}, {3}), p1 = from_vector<int64_t>({0, 1, 2}, {3});
  CHECK_CLOSE(linear.rotate(q, p4), plain.rotate(q, p1), 1e-14, 0);
  RoPE yarn(8, 10000, RoPE::Pairing::Interleaved, {RopeScalingKind::Yarn, 4.0, 16});
  const double m = yarn.frequencies.mscale;
  const std::vector<int64_t> at = {3, 7, 30};
  Tensor pos = from_vector<int64_t>(at, {3});
  Tensor logits = matmul(yarn.rotate(q, pos), yarn.rotate(k, pos, true).transpose(-1, -2));
  Ref rq(q), rk(k), e({1, 2, 3, 3});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j)
        e.at({0, h, i, j}) = m * m * rotary_dot(rq, rk, 0, h, i, j, double(at[i]), double(at[j]),
                                                yarn.frequencies.timescale, [](size_t, double, bool) { return 1.0; });
  CHECK_CLOSE(logits, e.tensor(), 1e-12, 0);
}

// ---- xPos ----

TEST_CASE("xPos: logits equal the paper's ζ^((π(i) − j)/γ)-weighted rotations for every alignment — gradcheck") {
  const int64_t D = 8;
  XPos xpos(D, 500.0, 4.0);  // a small γ so that the decay shows within a few positions
  auto amp = [&](size_t k, double p, bool key) {
    const double zeta = (2.0 * double(k) / D + 0.4) / 1.4;
    return std::pow(zeta, (key ? -p : p) / 4.0);
  };
  check_content_logits(xpos, 2, D, true, [&](const Ref& q, const Ref& k, int64_t b, int64_t h, int64_t i, int64_t j, double pi) {
    return rotary_dot(q, k, b, h, i, j, pi, double(j), rope_timescales(D, 500.0, D / 2), amp);
  });
  // Shifting queries and keys together leaves the logits unchanged (ζ's powers cancel to ζ^(−δ/γ)).
  Tensor q = uniform({1, 2, 3, D}, -1, 1, kFloat64, 5), k = uniform({1, 2, 5, D}, -1, 1, kFloat64, 6);
  Tensor qp = from_vector<int64_t>({2, 3, 4}, {3}), kp = arange(5.0, kInt64);
  Tensor base = matmul(xpos.rotate(q, qp), xpos.rotate(k, kp, true).transpose(-1, -2));
  for (int64_t s : {1, 17}) {
    Tensor shift = from_vector<int64_t>({s}, {1});
    CHECK_CLOSE(matmul(xpos.rotate(q, qp + shift), xpos.rotate(k, kp + shift, true).transpose(-1, -2)), base, 1e-10, 1e-10);
  }
  gradcheck_attention(std::make_shared<XPos>(4, 10000.0, 8.0), true, false, Alignment::Left);
  gradcheck_attention(std::make_shared<XPos>(4, 10000.0, 8.0, RotaryScaling{RopeScalingKind::Yarn, 2.0, 4}), true,
                      false, Alignment::Left);
}

// ---- p-RoPE ----

TEST_CASE("p-RoPE: the highest ⌊p·D/2⌋ frequencies rotate, the rest do not — loops, gradcheck") {
  CHECK(PRoPE::rotated_pairs_for(0.75, 16) == 6);
  CHECK(PRoPE::rotated_pairs_for(0.75, 8) == 3);
  CHECK(PRoPE::rotated_pairs_for(0.5, 6) == 1);
  CHECK(PRoPE::rotated_pairs_for(1.0, 8) == 4);
  CHECK(PRoPE::rotated_pairs_for(0.0, 8) == 0);
  const int64_t D = 8;
  PRoPE prope(D, 500.0, 0.75);
  CHECK(prope.rotated_pairs == 3);
  for (bool causal : {false, true})
    check_content_logits(prope, 2, D, causal, [&](const Ref& q, const Ref& k, int64_t b, int64_t h, int64_t i, int64_t j, double pi) {
      return rotary_dot(q, k, b, h, i, j, pi, double(j), rope_timescales(D, 500.0, 3),
                        [](size_t, double, bool) { return 1.0; });
    });
  // p = 1 is RoPE; p = 0 rotates nothing (NoPE).
  Tensor q = uniform({1, 2, 3, D}, -1, 1, kFloat64, 5);
  Tensor pos = from_vector<int64_t>({1, 5, 9}, {3});
  CHECK_CLOSE(PRoPE(D, 500.0, 1.0).rotate(q, pos), RoPE(D, 500.0).rotate(q, pos), 0, 0);
  CHECK_CLOSE(PRoPE(D, 500.0, 0.0).rotate(q, pos), q, 0, 0);
  gradcheck_attention(std::make_shared<PRoPE>(4, 100.0, 0.5), true, false, Alignment::Left);
  gradcheck_attention(std::make_shared<PRoPE>(4, 100.0, 0.5, RotaryScaling{RopeScalingKind::Ntk, 3.0, 0}), false,
                      true, Alignment::Right);
}

// ---- PoPE ----

TEST_CASE("PoPE: logits equal Σ_c softplus(q_c)·softplus(k_c)·cos(θ_c(π(i) − j) − φ_hc) — gradcheck with φ") {
  const int64_t H = 2, D = 5;  // an odd head size: PoPE has no pairs
  PoPE pope(H, D, 100.0);
  pope.to(kFloat64);
  // Offsets inside [−2π, 0], and two outside (used clamped).
  std::vector<double> phi = {-0.3, -1.7, 0.0, -6.0, -2.5, 0.8, -7.5, -0.01, -3.3, -4.4};
  {
    NoGradGuard no_grad;
    pope.phase_offset.copy_(from_vector<double>(phi, {H, D}));
  }
  auto softplus_ref = [](double x) { return std::log1p(std::exp(x)); };
  for (bool causal : {false, true})
    check_content_logits(pope, H, D, causal, [&](const Ref& q, const Ref& k, int64_t b, int64_t h, int64_t i, int64_t j, double pi) {
      double dot = 0;
      for (int64_t c = 0; c < D; ++c) {
        const double theta = std::pow(100.0, -double(c) / D);
        const double f = std::min(0.0, std::max(-kTwoPi, phi[h * D + c]));
        dot += softplus_ref(q.at({b, h, i, c})) * softplus_ref(k.at({b, h, j, c})) * std::cos(theta * (pi - j) - f);
      }
      return dot;
    });
  CHECK(pope.content_query(zeros({1, H, 3, D}, kFloat64), AttentionGeometry::make(1, H, D, 3, 3, false)).shape() ==
        Shape{1, H, 3, 2 * D});
  // φ inside the interval, so its gradient is the plain one (held at an end it has none).
  {
    NoGradGuard no_grad;
    pope.phase_offset.copy_(uniform({H, D}, -6.0, -0.2, kFloat64, 3));
  }
  auto shared = std::make_shared<PoPE>(2, 4, 100.0);
  {
    NoGradGuard no_grad;
    shared->to(kFloat64);
    shared->phase_offset.copy_(uniform({2, 4}, -6.0, -0.2, kFloat64, 4));
  }
  gradcheck_attention(shared, true, false, Alignment::Left, {&shared->phase_offset});
  gradcheck_attention(shared, false, true, Alignment::Scaled, {&shared->phase_offset});
  // Held at an end (φ > 0 here), φ gets no gradient, as under torch's clamp.
  {
    NoGradGuard no_grad;
    shared->phase_offset.copy_(full({2, 4}, 0.5, kFloat64));
  }
  Tensor k = uniform({1, 2, 3, 4}, -1, 1, kFloat64, 9);
  sum(shared->content_key(k, arange(3.0, kInt64))).backward();
  CHECK_CLOSE(shared->phase_offset.grad(), zeros({2, 4}, kFloat64), 0, 0);
}

// ---- the fused core, cached decoding, the response ----

TEST_CASE("rotary family: fused equals composite in every place the registry allows (float64)") {
  struct Case { std::shared_ptr<PositionalScheme> scheme; int mode; };  // 0 causal self, 1 self + padding, 2 cross right
  const int64_t C = 16, H = 2, B = 2, D = C / H;
  std::vector<Case> cases = {{std::make_shared<XPos>(D, 10000.0, 16.0), 0},
                             {std::make_shared<XPos>(D, 10000.0, 16.0, RotaryScaling{RopeScalingKind::Yarn, 4.0, 8}), 0}};
  for (int mode = 0; mode < 3; ++mode) {
    cases.push_back({std::make_shared<PRoPE>(D, 10000.0, 0.75), mode});
    cases.push_back({std::make_shared<RoPE>(D, 10000.0, RoPE::Pairing::Interleaved, RotaryScaling{RopeScalingKind::Linear, 2.0, 0}), mode});
    cases.push_back({std::make_shared<PoPE>(H, D, 10000.0), mode});
  }
  for (const Case& c : cases) {
    INFO(c.scheme->name(), " mode ", c.mode);
    Generator init(3);
    auto m = std::make_shared<MultiHeadAttention>(C, H, c.scheme, 0.0, true, &init);
    m->to(kFloat64);
    const int64_t t2 = 40, t1 = c.mode == 2 ? 23 : 40;
    Tensor x = uniform({B, t2, C}, -1, 1, kFloat64, 5);
    Tensor mem = c.mode == 2 ? uniform({B, t1, C}, -1, 1, kFloat64, 6) : x;
    AttentionOptions o;
    o.causal = c.mode == 0;
    if (c.mode == 2) o.alignment = Alignment::Right;
    if (c.mode >= 1) {
      std::vector<bool> pad(static_cast<size_t>(B * t1), false);
      for (int64_t j = 0; j < t1; ++j) pad[t1 + j] = j >= t1 - 4;
      o.key_padding_mask = from_vector<bool>(pad, {B, t1});
    }
    m->core = AttentionCore::Composite;
    Tensor ref = m->forward(x, mem, o).output;
    m->core = AttentionCore::Fused;
    Tensor got = m->forward(x, mem, o).output;
    CHECK(m->last_call_fused == (c.scheme->name() != "pope"));  // PoPE's 2D-wide pair: composite
    CHECK_CLOSE(got, ref, 1e-12, 1e-10);
  }
}

TEST_CASE("rotary family: cached decoding gives the full pass's logits at every step (DecoderLM, EncoderDecoder)") {
  auto config = [](const std::string& self, const std::string& cross) {
    TransformerConfig c;
    c.vocab_size = 11;
    c.src_vocab_size = 13;
    c.d_model = 8;
    c.n_heads = 2;
    c.d_ff = 16;
    c.n_encoder_layers = 1;
    c.n_decoder_layers = 2;
    c.dropout = 0.1;
    c.decoder_self.scheme = self;
    c.decoder_self.xpos_scale_base = 8;
    c.cross.scheme = cross;
    return c;
  };
  struct Case { const char* self; const char* cross; RopeScalingKind scaling; };
  for (Case cs : {Case{"xpos", "none", RopeScalingKind::None}, Case{"xpos", "none", RopeScalingKind::Yarn},
                  Case{"p_rope", "p_rope", RopeScalingKind::None}, Case{"pope", "pope", RopeScalingKind::None},
                  Case{"rope", "rope", RopeScalingKind::Ntk}}) {
    INFO("decoder_self ", cs.self, ", cross ", cs.cross, ", scaling ", kRopeScalingNames.name(cs.scaling));
    TransformerConfig c = config(cs.self, cs.cross);
    for (PositionalConfig* p : {&c.decoder_self, &c.cross})
      p->rope_scaling = cs.scaling, p->rope_scaling_factor = 2.0, p->rope_original_length = 4;
    Generator init(7), data(8);
    Tensor tokens = randint(0, c.vocab_size, {2, 9}, kInt64, &data);
    NoGradGuard no_grad;
    // Decoder-only: the prompt of 3 at once, then one token at a time.
    DecoderLM lm(c, &init);
    lm.to(kFloat64);
    lm.eval();
    Tensor full = lm.forward(tokens);  // (B, 9, V)
    std::vector<LayerCache> cache;
    std::vector<Tensor> steps = {lm.forward(tokens.narrow(1, 0, 3).contiguous(), Tensor(), &cache)};
    for (int64_t n = 3; n < 9; ++n) steps.push_back(lm.forward(tokens.narrow(1, n, 1).contiguous(), Tensor(), &cache));
    CHECK_CLOSE(cat(steps, 1), full, 1e-10, 0);
    // Encoder-decoder: the cross scheme's keys cached once in content form (PoPE's are 2D wide).
    EncoderDecoder model(c, &init);
    model.to(kFloat64);
    model.eval();
    Tensor src = randint(0, 13, {2, 6}, kInt64, &data);
    Tensor src_mask = from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 6}).to(kBool);
    Tensor memory = model.encode(src, src_mask);
    Tensor whole = model.decode(tokens, memory, src_mask);
    std::vector<LayerCache> dc;
    std::vector<Tensor> parts = {model.decode(tokens.narrow(1, 0, 2).contiguous(), memory, src_mask, Tensor(), &dc)};
    for (int64_t n = 2; n < 9; ++n)
      parts.push_back(model.decode(tokens.narrow(1, n, 1).contiguous(), memory, src_mask, Tensor(), &dc));
    CHECK_CLOSE(cat(parts, 1), whole, 1e-10, 0);
  }
}

TEST_CASE("rotary family: the response is the mean scaled content logit at each offset") {
  const int64_t B = 1, H = 2, D = 4, t = 4;
  Tensor q = uniform({B, H, t, D}, -1, 1, kFloat64, 1), k = uniform({B, H, t, D}, -1, 1, kFloat64, 2);
  auto xpos = std::make_shared<XPos>(D, 100.0, 4.0);
  auto prope = std::make_shared<PRoPE>(D, 100.0, 0.5);
  auto pope = std::make_shared<PoPE>(H, D, 100.0);
  pope->to(kFloat64);
  for (std::shared_ptr<PositionalScheme> s : std::vector<std::shared_ptr<PositionalScheme>>{xpos, prope, pope}) {
    INFO(s->name());
    ResponseInput in;
    in.q = q, in.k = k;
    in.positions = {0, 1, 2, 3};
    in.query_valid.assign(t, true);
    in.key_valid.assign(t, true);
    in.causal = true;
    in.geometry = AttentionGeometry::make(B, H, D, t, t, true);
    auto r = s->response(in, 2);
    REQUIRE(r.size() == 2);
    AttentionGeometry g = in.geometry;
    auto qk = s->content_qk(q, k, g);
    Ref logits(matmul(qk.first, qk.second.transpose(-1, -2)));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = -2; d <= 2; ++d) {
        double sum = 0;
        int n = 0;
        for (int64_t i = 0; i < t; ++i)
          if (i + d >= 0 && i + d < t && d <= 0) sum += logits.at({0, h, i, i + d}) / 2.0, ++n;  // /√D
        if (n == 0) CHECK(std::isnan(r[h][d + 2]));
        else CHECK(r[h][d + 2] == doctest::Approx(sum / n).epsilon(1e-12));
      }
  }
}

// ---- the registry: places and knobs ----

TEST_CASE("rotary family: registry places and config checks name their keys") {
  const SchemeEntry* xpos = find_scheme("xpos");
  const SchemeEntry* prope = find_scheme("p_rope");
  const SchemeEntry* pope = find_scheme("pope");
  REQUIRE(xpos);
  REQUIRE(prope);
  REQUIRE(pope);
  CHECK(placement(*xpos, true, false) == Placement::Allowed);
  CHECK(placement(*xpos, false, false) == Placement::NeedsCausal);
  CHECK(placement(*prope, false, true) == Placement::Allowed);
  CHECK(placement(*pope, false, true) == Placement::Allowed);
  const std::string key = "model.decoder_self.";
  auto message = [&](const SchemeEntry& e, PositionalConfig p, int64_t head_dim = 4) {
    p.scheme = e.name;
    return e.check(SchemeCheck{p, key, true, 8, 8 / head_dim, head_dim});
  };
  PositionalConfig p;
  CHECK(message(*xpos, p) == "");
  CHECK(message(*prope, p) == "");
  CHECK(message(*pope, p) == "");
  p.xpos_scale_base = 0;
  CHECK(message(*xpos, p) == "model.decoder_self.xpos_scale_base must be > 0, got 0");
  p = PositionalConfig{};
  p.rope_fraction = 1.5;
  CHECK(message(*prope, p) ==
        "model.decoder_self.rope_fraction must be in [0, 1] (the share of frequencies that rotate), got 1.5");
  p = PositionalConfig{};
  p.rope_base = 1;
  CHECK(message(*pope, p) == "model.decoder_self.rope_base must be > 1, got 1");
  for (const char* name : {"rope", "xpos", "p_rope"}) {
    const SchemeEntry& e = *find_scheme(name);
    INFO(name);
    p = PositionalConfig{};
    p.rope_scaling = RopeScalingKind::Linear;
    p.rope_scaling_factor = 0.5;
    CHECK(message(e, p) == "model.decoder_self.rope_scaling_factor must be >= 1 (the new length over the trained "
                           "one) with model.decoder_self.rope_scaling = linear, got 0.5");
    p.rope_scaling = RopeScalingKind::Yarn;
    p.rope_scaling_factor = 4;
    CHECK(message(e, p) == "model.decoder_self.rope_scaling = yarn needs model.decoder_self.rope_original_length, "
                           "the trained context (> 0), got 0");
    p.rope_original_length = 64;
    CHECK(message(e, p) == "");
    p.rope_scaling = RopeScalingKind::Ntk;
    CHECK(message(e, p, 2) == "model.decoder_self.rope_scaling = ntk needs a head size above 2 (its exponent is D / "
                              "(D − 2)), but model.d_model / model.n_heads = 2");
  }
  // The constructors' own conditions, for code that builds the schemes directly.
  check_throws_with([] { XPos(4, 10000.0, 0.0); }, "[XPos] scale_base must be > 0, got 0");
  check_throws_with([] { PRoPE(4, 10000.0, -0.1); }, "[PRoPE] fraction must be in [0, 1], got -0.1");
  check_throws_with([] { PoPE(2, 4, 0.5); }, "[PoPE] base must be > 1, got 0.5");
  check_throws_with([] { RoPE(4, 10000.0, RoPE::Pairing::Interleaved, {RopeScalingKind::Yarn, 2.0, 0}); },
                    "[RoPE] yarn scaling needs the trained length");
  check_throws_with([] { RoPE(4, 10000.0, RoPE::Pairing::Interleaved, {RopeScalingKind::Linear, 0.5, 0}); },
                    "[RoPE] the scaling factor must be >= 1, got 0.5");
  CHECK(RoPE(4, 10000.0, RoPE::Pairing::Interleaved, {RopeScalingKind::None, 0.5, 0}).frequencies.mscale == 1.0);
  PoPE pope_layer(2, 4);
  check_throws_with([&] { pope_layer.content_key(zeros({1, 3, 2, 4}), arange(2.0, kInt64)); },
                    "[PoPE] built for 2 heads of size 4, the attention has k (1,3,2,4)");
}

