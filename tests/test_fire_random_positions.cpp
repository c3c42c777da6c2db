// FIRE at randomised positions (layers/fire.h position_map; TransformerConfig::random_positions_max,
// layers/models.h), as Zhou et al. 2024 combine FIRE with Ruoss et al.'s randomised positions: the
// bias with a map equals a float64 loop of the paper's formula at the mapped positions (thresholds below
// and above them), every parameter passes gradcheck with a map, the fused core declines a mapped call
// and a MultiHeadAttention then gives the composite's output; an index outside the map is an error.
// DecoderLM with decoder_self FIRE: eval mode unchanged by the option, the training forward equals the
// model at the drawn positions (maps cleared after it), positions 0 … T − 1 are forward() itself, a
// float64 gradcheck at explicit positions.
#include <cmath>
#include <set>

#include "attention_testing.h"
#include "layers/attention.h"
#include "layers/fire.h"
#include "layers/models.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

std::vector<double> values(const Tensor& t) { return t.detach().to(kFloat64).contiguous().to_vector<double>(); }

Tensor positions(const std::vector<int64_t>& p) { return from_vector<int64_t>(p, {static_cast<int64_t>(p.size())}); }

// f_θ( log(|c|·|p_j − p_i| + 1) / (log(|c|·max(p_i, L) + 1) + ε) ) for head h, from the paper's formula.
double fire_value(const FIRE& s, int64_t h, int64_t p_i, int64_t p_j) {
  const double c = std::fabs(values(s.c)[0]), L = std::fabs(values(s.L_multiplier)[0] * static_cast<double>(s.threshold));
  const double x = std::log(c * std::fabs(static_cast<double>(p_j - p_i)) + 1) /
                   (std::log(c * std::max(static_cast<double>(p_i), L) + 1) + 1e-6);
  const std::vector<double> w1 = values(s.mlp->in->weight), b1 = values(s.mlp->in->bias);
  const std::vector<double> w2 = values(s.mlp->out->weight), b2 = values(s.mlp->out->bias);
  double out = b2[static_cast<size_t>(h)];
  for (int64_t k = 0; k < s.width; ++k) out += w2[h * s.width + k] * std::max(0.0, w1[k] * x + b1[k]);
  return out;
}

void set_scalars(FIRE& s, double c, double multiplier) {
  NoGradGuard no_grad;
  s.c.copy_(full({1}, c, s.c.dtype()));
  s.L_multiplier.copy_(full({1}, multiplier, s.c.dtype()));
}

TransformerConfig fire_lm(int64_t random_max, int64_t L0) {
  TransformerConfig c;
  c.vocab_size = 11;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.dropout = 0.0;
  c.decoder_self = PositionalConfig{"fire"};
  c.decoder_self.fire_width = 6;
  c.decoder_self.fire_threshold = L0;
  c.random_positions_max = random_max;
  return c;
}

Tensor random_tokens(int64_t B, int64_t T, uint64_t seed) {
  Generator g(seed);
  return randint(0, 11, {B, T}, kInt64, &g);
}

}  // namespace

TEST_CASE("FIRE random positions: the bias at mapped positions equals the formula, gradcheck of every parameter") {
  const std::vector<int64_t> map = {2, 3, 9, 14, 15, 30};
  for (int64_t L0 : {4, 20, 512}) {  // L below every mapped position, among them, above them all
    INFO("L0 ", L0);
    Generator gen(3);
    FIRE s(2, 4, L0, &gen);
    s.to(kFloat64);
    set_scalars(s, 0.3, 1.1);  // L = 4.4, 22 or 563.2: no tie with a mapped position
    s.position_map = positions(map);
    for (bool causal : {true, false}) {
      AttentionGeometry g = AttentionGeometry::make(2, 2, 4, 6, 6, causal);
      const Tensor bias = s.logit_bias(g);
      REQUIRE(bias.shape() == Shape{1, 2, 6, 6});
      Ref expected({1, 2, 6, 6});
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < 6; ++i)
          for (int64_t j = 0; j < 6; ++j) expected.at({0, h, i, j}) = fire_value(s, h, map[i], map[j]);
      CHECK_CLOSE(bias, expected.tensor(), 1e-12, 1e-12);
      // Not the bias at 0 … 5: the map is read, and a new map is not served from a cache.
      s.position_map = Tensor();
      CHECK(compare(s.logit_bias(g), bias, 1e-6, 0) != "");
      const Tensor plain = s.logit_bias(g);
      s.position_map = positions({0, 1, 2, 3, 4, 5});  // the identity map: the bias without a map
      CHECK(bitwise_equal(s.logit_bias(g), plain));
      s.position_map = positions(map);
    }
    AttentionGeometry g = AttentionGeometry::make(1, 2, 4, 6, 6, false);
    gradcheck_with_params({&s.mlp->in->weight, &s.mlp->in->bias, &s.mlp->out->weight, &s.mlp->out->bias, &s.c,
                           &s.L_multiplier},
                          {}, [&](const TensorList&) { return s.logit_bias(g); });
  }
}

TEST_CASE("FIRE random positions: the fused core declines a mapped call, and the layer equals the composite core") {
  Generator init(5);
  auto s = std::make_shared<FIRE>(2, 8, 512, &init);
  auto m = std::make_shared<MultiHeadAttention>(16, 2, s, 0.0, true, &init);
  m->to(kFloat64);
  const Tensor x = uniform({2, 9, 16}, -1, 1, kFloat64, 6);
  AttentionOptions o;
  o.causal = true;
  s->position_map = positions({1, 4, 5, 9, 12, 20, 21, 33, 40});
  m->core = AttentionCore::Composite;
  const TensorList ref = layer_run(*m, x, x, o);
  m->core = AttentionCore::Fused;
  const TensorList got = layer_run(*m, x, x, o);
  CHECK_FALSE(m->last_call_fused);
  REQUIRE(ref.size() == got.size());
  for (size_t i = 0; i < ref.size(); ++i) CHECK_CLOSE(got[i], ref[i], 0, 0);
  // Without the map the same call is fused (every π(i) < L = 512).
  s->position_map = Tensor();
  layer_run(*m, x, x, o);
  CHECK(m->last_call_fused);
}

TEST_CASE("FIRE random positions: an index outside the map is an error naming it") {
  Generator gen(1);
  FIRE s(2, 4, 8, &gen);
  s.position_map = positions({3, 7});
  check_throws_with([&] { s.logit_bias(AttentionGeometry::make(1, 2, 4, 3, 3, true)); },
                    "index 2 is outside the position map of 2 entries");
}

TEST_CASE("FIRE random positions: DecoderLM trains at drawn positions, eval unchanged, gradcheck at explicit ones") {
  Generator a(21), b(21);
  DecoderLM with(fire_lm(40, 6), &a), without(fire_lm(0, 6), &b);
  REQUIRE(with.positioned.size() == 2);  // one FIRE per layer
  with.to(kFloat64);
  without.to(kFloat64);
  const Tensor tok = random_tokens(2, 9, 4);
  with.eval();
  without.eval();
  CHECK(bitwise_equal(with(tok), without(tok)));
  CHECK(bitwise_equal(with.forward_at(tok, positions({0, 1, 2, 3, 4, 5, 6, 7, 8})), with(tok)));
  std::set<std::vector<int64_t>> draws;
  for (int rep = 0; rep < 5; ++rep) {
    with.train();
    const Tensor out = with(tok);
    const std::vector<int64_t> p = with.last_positions.to_vector<int64_t>();
    REQUIRE(p.size() == 9);
    for (size_t t = 0; t < p.size(); ++t) {
      CHECK(p[t] >= 0);
      CHECK(p[t] < 40);
      if (t > 0) CHECK(p[t] > p[t - 1]);
    }
    draws.insert(p);
    for (const auto& f : with.positioned)  // cleared after the forward
      CHECK_FALSE(dynamic_cast<const FIRE&>(*f).position_map.defined());
    with.eval();
    CHECK(bitwise_equal(out, with.forward_at(tok, with.last_positions)));
    if (p.back() != 8) CHECK(compare(out, with(tok), 1e-9, 0) != "");
  }
  CHECK(draws.size() >= 4);
  // Gaps change the bias (|δ| grows), and so does a shift past L (the normaliser reads the position).
  const Tensor near = with.forward_at(tok, positions({0, 1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK(compare(with.forward_at(tok, positions({0, 2, 4, 6, 8, 10, 12, 14, 16})), near, 1e-9, 0) != "");
  CHECK(compare(with.forward_at(tok, positions({20, 21, 22, 23, 24, 25, 26, 27, 28})), near, 1e-9, 0) != "");
  const Tensor one = random_tokens(1, 5, 8);
  FIRE& f = dynamic_cast<FIRE&>(*with.positioned[0]);
  gradcheck_with_params({&f.mlp->in->weight, &f.mlp->out->weight, &f.c, &f.L_multiplier,
                         &with.layers->items[0]->self_attn->q_proj->weight},
                        {}, [&](const TensorList&) { return with.forward_at(one, positions({1, 6, 7, 20, 31})); });
}

TEST_CASE("FIRE random positions: DecoderLM accepts FIRE as the position term to randomise") {
  Generator init(1);
  CHECK_NOTHROW(DecoderLM(fire_lm(16, 4), &init));
  TransformerConfig c = fire_lm(16, 4);
  c.decoder_self = PositionalConfig{"t5"};
  check_throws_with([&] { DecoderLM m(c, &init); }, "decoder_self rope or fire");
}
