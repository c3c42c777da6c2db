// Randomised positions (Ruoss et al. 2023; TransformerConfig::random_positions_max, layers/models.h):
// AbsolutePosition::forward_at against the sinusoid formula and the learned table's rows read one by
// one; RoPE's position map against rotation at the mapped positions; float64 gradchecks; DecoderLM in
// eval mode unchanged by the option; in training mode the drawn positions sorted, distinct and in
// range, the output equal to the model run at those explicit positions, each position equally often
// over many draws; every error.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "layers/absolute_position.h"
#include "layers/models.h"
#include "layers/rotary.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

Tensor positions(const std::vector<int64_t>& p) {
  return from_vector<int64_t>(p, {static_cast<int64_t>(p.size())});
}

Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  return randint(0, V, {B, T}, kInt64, &g);
}

// V = 11, C = 8, H = 2, two layers, no dropout.
TransformerConfig small_config(const std::string& absolute, const std::string& scheme, int64_t random_max) {
  TransformerConfig c;
  c.vocab_size = 11;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.dropout = 0.0;
  c.decoder_self = PositionalConfig{scheme};
  c.absolute_position = absolute_position_from_name(absolute, "small_config");
  c.max_positions = 40;
  c.random_positions_max = random_max;
  return c;
}

double vaswani_pe(int64_t pos, int64_t column, int64_t d_model) {
  const double angle =
      static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(column / 2) / d_model);
  return column % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

struct Variant {
  const char* absolute;
  const char* scheme;
};
const Variant kVariants[] = {
    {"learned", "none"}, {"sinusoidal", "none"}, {"none", "rope"}, {"learned", "rope"}};

}  // namespace

TEST_CASE("random positions: AbsolutePosition::forward_at adds the rows of the given positions") {
  Generator init(5);
  for (const char* kind : {"sinusoidal", "learned"}) {
    INFO(kind);
    AbsolutePosition pe(absolute_position_from_name(kind, "test"), 6, 30, "test", &init);
    pe.to(kFloat64);
    const Tensor x = uniform({2, 4, 6}, -1, 1, kFloat64, 3);
    const std::vector<int64_t> pos = {2, 7, 8, 29};
    const std::vector<double> out = values(pe.forward_at(x, positions(pos)));
    const std::vector<double> xs = values(x);
    const std::vector<double> table = pe.kind == AbsolutePositionKind::Learned ? values(pe.weight) : std::vector<double>();
    double worst = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t c = 0; c < 6; ++c) {
          const double term =
              pe.kind == AbsolutePositionKind::Learned ? table[static_cast<size_t>(pos[t] * 6 + c)] : vaswani_pe(pos[t], c, 6);
          const size_t k = static_cast<size_t>((b * 4 + t) * 6 + c);
          worst = std::max(worst, std::fabs(out[k] - (xs[k] + term)));
        }
    CHECK(worst < 1e-12);
    // 0 … T − 1 is forward() itself; first … first + T − 1 is forward(x, first).
    CHECK(bitwise_equal(pe.forward_at(x, positions({0, 1, 2, 3})), pe.forward(x)));
    CHECK_CLOSE(pe.forward_at(x, positions({5, 6, 7, 8})), pe.forward(x, 5), 1e-12, 0);
    std::vector<Tensor*> params;
    if (pe.kind == AbsolutePositionKind::Learned) params.push_back(&pe.weight);
    gradcheck_with_params(params, {x.clone().requires_grad_()},
                          [&](const TensorList& in) { return pe.forward_at(in[0], positions(pos)); });
  }
}

TEST_CASE("random positions: RoPE with a position map rotates at the mapped positions, gradcheck") {
  RoPE rope(4);
  const Tensor q = uniform({1, 2, 3, 4}, -1, 1, kFloat64, 7), k = uniform({1, 2, 3, 4}, -1, 1, kFloat64, 8);
  AttentionGeometry g = AttentionGeometry::make(1, 2, 4, 3, 3, true);
  rope.position_map = positions({4, 9, 17});
  CHECK(bitwise_equal(rope.content_query(q, g), rope.rotate(q, positions({4, 9, 17}))));
  CHECK(bitwise_equal(rope.content_key(k, positions({0, 1, 2})), rope.rotate(k, positions({4, 9, 17}))));
  // The logits then depend on the mapped offsets only: shifting every mapped position changes nothing.
  auto logits = [&](const std::vector<int64_t>& map) {
    rope.position_map = positions(map);
    auto [qc, kc] = rope.content_qk(q, k, g);
    return matmul(qc, kc.transpose(-1, -2));
  };
  CHECK_CLOSE(logits({4, 9, 17}), logits({10, 15, 23}), 1e-12, 1e-12);
  CHECK(compare(logits({4, 9, 17}), logits({0, 1, 2}), 1e-6, 0) != "");
  rope.position_map = positions({4, 9, 17});
  GradcheckResult r = gradcheck([&](const TensorList& in) { return rope.content_query(in[0], g); },
                                {q.clone().requires_grad_()});
  CHECK_MESSAGE(r.ok, r.message);
  rope.position_map = positions({4, 9});
  check_throws_with([&] { rope.content_key(k, positions({0, 1, 2})); }, "outside the position map");
}

TEST_CASE("random positions: eval mode is unchanged by the option") {
  for (const Variant& v : kVariants) {
    INFO(v.absolute, " + ", v.scheme);
    Generator a(21), b(21);
    DecoderLM with(small_config(v.absolute, v.scheme, 32), &a),
        without(small_config(v.absolute, v.scheme, 0), &b);
    with.eval();
    without.eval();
    const Tensor tok = random_tokens(2, 9, 11, 4);
    CHECK(bitwise_equal(with(tok), without(tok)));
    CHECK_FALSE(with.last_positions.defined());
    // Cached decoding in training mode sits at t_cached … as without the option.
    with.train();
    without.train();
    std::vector<LayerCache> c1, c2;
    CHECK(bitwise_equal(with.forward(tok, Tensor(), &c1), without.forward(tok, Tensor(), &c2)));
  }
}

TEST_CASE(
    "random positions: training positions are sorted, distinct, in range, and the output is the model's at "
    "them") {
  for (const Variant& v : kVariants) {
    INFO(v.absolute, " + ", v.scheme);
    Generator init(13);
    DecoderLM lm(small_config(v.absolute, v.scheme, 32), &init);
    lm.to(kFloat64);
    const Tensor tok = random_tokens(2, 10, 11, 6);
    std::set<std::vector<int64_t>> draws;
    for (int rep = 0; rep < 5; ++rep) {
      lm.train();
      const Tensor out = lm(tok);
      REQUIRE(lm.last_positions.defined());
      const std::vector<int64_t> p = lm.last_positions.to_vector<int64_t>();
      REQUIRE(p.size() == 10);
      for (size_t t = 0; t < p.size(); ++t) {
        CHECK(p[t] >= 0);
        CHECK(p[t] < 32);
        if (t > 0) CHECK(p[t] > p[t - 1]);  // sorted and distinct
      }
      draws.insert(p);
      for (const auto& r : lm.positioned)  // cleared after the forward
        CHECK_FALSE(dynamic_cast<const RoPE&>(*r).position_map.defined());
      lm.eval();
      CHECK(bitwise_equal(out, lm.forward_at(tok, lm.last_positions)));
      // and not the output at 0 … T − 1 (unless the draw was exactly that)
      if (p.back() != 9) CHECK(compare(out, lm(tok), 1e-9, 0) != "");
    }
    CHECK(draws.size() >= 4);  // fresh positions each forward
  }
}

TEST_CASE("random positions: float64 gradcheck of DecoderLM at explicit positions (learned table, RoPE)") {
  Generator init(17);
  DecoderLM lm(small_config("learned", "rope", 32), &init);
  lm.to(kFloat64);
  lm.eval();
  const Tensor tok = random_tokens(1, 5, 11, 8);
  const Tensor pos = positions({1, 6, 7, 20, 31});
  gradcheck_with_params({&lm.pos_embed->weight, &lm.layers->items[0]->self_attn->q_proj->weight}, {},
                        [&](const TensorList&) { return lm.forward_at(tok, pos); });
}

TEST_CASE("random positions: every position below L is drawn about equally often") {
  Generator init(2);
  DecoderLM lm(small_config("sinusoidal", "none", 16), &init);
  manual_seed(99);
  std::vector<int64_t> count(16, 0);
  const int draws = 2000;
  for (int n = 0; n < draws; ++n)
    for (int64_t p : lm.draw_positions(4).to_vector<int64_t>()) ++count[static_cast<size_t>(p)];
  // Expected 2000 · 4 / 16 = 500 per position; the binomial standard deviation is about 19.
  for (int64_t c : count) {
    CHECK(c > 400);
    CHECK(c < 600);
  }
  CHECK(lm.draw_positions(16).to_vector<int64_t>() ==
        std::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST_CASE("random positions: errors") {
  Generator init(1);
  check_throws_with([&] { DecoderLM m(small_config("none", "t5", 16), &init); }, "needs a position term");
  TransformerConfig c = small_config("learned", "none", 64);
  check_throws_with([&] { DecoderLM m(c, &init); }, "reaches past the learned table's max_positions 40");
  c = small_config("sinusoidal", "none", -1);
  check_throws_with([&] { DecoderLM m(c, &init); }, "random_positions_max must be >= 0");
  c = small_config("sinusoidal", "rope", 8);
  check_throws_with([&] { EncoderDecoder m(c, &init); }, "random_positions_max is for a decoder-only model");
  DecoderLM lm(small_config("sinusoidal", "none", 8), &init);
  lm.train();
  check_throws_with([&] { lm(random_tokens(1, 9, 11, 1)); }, "does not fit random_positions_max 8");
  check_throws_with(
      [&] {
        lm.forward_at(random_tokens(1, 3, 11, 1), positions({0, 1}));
      },
      "explicit positions");
  AbsolutePosition pe(AbsolutePositionKind::Learned, 4, 5, "test", &init);
  check_throws_with([&] { pe.forward_at(zeros({1, 2, 4}), positions({0, 5})); }, "outside the table's rows");
}
