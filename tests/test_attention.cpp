// Module basics and MultiHeadAttention without a positional scheme: against a plain-loop reference,
// under gradcheck (self and cross, with masks), masked positions get zero weight and zero gradient,
// and bad inputs give clear errors.
#include <cmath>

#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Reference attention on split heads with loops: q (B,H,t2,D), k/v (B,H,t1,D), hidden (t2,t1) per b.
std::vector<double> reference_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const std::function<bool(int64_t, int64_t, int64_t)>& hidden) {
  const int64_t B = q.size(0), H = q.size(1), t2 = q.size(2), D = q.size(3), t1 = k.size(2);
  std::vector<double> Q = q.to(kFloat64).contiguous().to_vector<double>(), K = k.to(kFloat64).contiguous().to_vector<double>(),
                      V = v.to(kFloat64).contiguous().to_vector<double>(), out(B * H * t2 * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < t2; ++i) {
        std::vector<double> s(t1);
        double mx = -INFINITY;
        for (int64_t j = 0; j < t1; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += Q[((b * H + h) * t2 + i) * D + d] * K[((b * H + h) * t1 + j) * D + d];
          s[j] = hidden(b, i, j) ? -INFINITY : dot / std::sqrt(double(D));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < t1; ++j) z += s[j] == -INFINITY ? 0 : std::exp(s[j] - mx);
        for (int64_t j = 0; j < t1; ++j) {
          double w = s[j] == -INFINITY ? 0 : std::exp(s[j] - mx) / z;
          for (int64_t d = 0; d < D; ++d) out[((b * H + h) * t2 + i) * D + d] += w * V[((b * H + h) * t1 + j) * D + d];
        }
      }
  return out;
}

AttentionGeometry geometry(const Tensor& q, const Tensor& k, bool causal) {
  return AttentionGeometry::make(q.size(0), q.size(1), q.size(3), q.size(2), k.size(2), causal);
}

}  // namespace

TEST_CASE("module: dotted names, dedup of shared parameters, train/eval, zero_grad, to(dtype)") {
  struct Pair : Module {
    std::shared_ptr<Linear> a, b;
    Pair() {
      a = register_module("a", std::make_shared<Linear>(3, 4));
      b = register_module("b", std::make_shared<Linear>(4, 2, false));
    }
  };
  Pair m;
  auto named = m.named_parameters();
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "a.weight");
  CHECK(named[1].first == "a.bias");
  CHECK(named[2].first == "b.weight");
  CHECK(named[0].second.shape() == Shape{4, 3});
  m.eval();
  CHECK_FALSE(m.a->is_training());
  m.train();
  CHECK(m.b->is_training());
  Tensor x = ones({5, 3});
  m.b->forward(m.a->forward(x)).sum().backward();
  CHECK(m.a->weight.grad().defined());
  m.zero_grad();
  CHECK_FALSE(m.a->weight.grad().defined());
  m.to(kFloat64);
  CHECK(m.a->weight.dtype() == kFloat64);  // the member handle follows
  CHECK(m.a->weight.requires_grad());
  check_throws_with([&] { m.a->forward(ones({2, 5}, kFloat64)); }, "[Linear] expected input (..., 3), got (2,5)");
  // shared children are listed once
  struct Shared : Module {
    std::shared_ptr<Linear> l;
    Shared() {
      l = std::make_shared<Linear>(2, 2);
      register_module("first", l);
      register_module("second", l);
    }
  };
  CHECK(Shared().named_parameters().size() == 2);
}

TEST_CASE("attention: heads against a loop reference, with causal and padding masks") {
  Generator gen(5);
  Tensor q = randn({2, 3, 4, 5}, kFloat64, &gen), k = randn({2, 3, 6, 5}, kFloat64, &gen), v = randn({2, 3, 6, 5}, kFloat64, &gen);
  // cross-attention with right alignment: query i sits at key position i + 2; padding hides key 5 of batch 1
  AttentionGeometry g = geometry(q, k, true);
  g.alignment = Alignment::Right;
  Tensor pad = from_vector<bool>({false, false, false, false, false, false, false, false, false, false, false, true}, {2, 1, 1, 6});
  Tensor mask = where(causal_mask(g.positions(), 6), ones({1, 1, 4, 6}, kBool), pad);
  AttentionOutput a = attention_heads(q, k, v, nullptr, g, mask, 0.0, false, nullptr);
  auto hidden = [](int64_t b, int64_t i, int64_t j) { return j > i + 2 || (b == 1 && j == 5); };
  CHECK_CLOSE(a.output, from_vector(reference_attention(q, k, v, hidden), {2, 3, 4, 5}), 1e-12, 1e-10);
  std::vector<double> w = a.weights.to_vector<double>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j)
        if (hidden(b, i, j)) CHECK(w[((b * 3) * 4 + i) * 6 + j] == 0.0);
}

TEST_CASE("attention: a fully masked row outputs zeros with zero gradient, never NaN") {
  Tensor q = uniform({1, 1, 2, 3}, -1, 1).requires_grad_(), k = uniform({1, 1, 2, 3}, -1, 1, kFloat64, 2);
  Tensor mask = from_vector<bool>({true, true, false, true}, {1, 1, 2, 2});  // row 0 sees nothing
  AttentionOutput a = attention_heads(q, k, k, nullptr, geometry(q, k, false), mask, 0.0, false, nullptr);
  std::vector<double> out = a.output.to_vector<double>();
  CHECK(out[0] == 0.0);
  CHECK(out[1] == 0.0);
  CHECK(out[2] == 0.0);
  a.output.sum().backward();
  for (double g : q.grad().to_vector<double>()) CHECK(std::isfinite(g));
  std::vector<double> gq = q.grad().to_vector<double>();
  CHECK(gq[0] == 0.0);
}

TEST_CASE("attention: MultiHeadAttention gradcheck, self (causal) and cross (padding)") {
  Generator init(3);
  MultiHeadAttention mha(4, 2, nullptr, 0.0, true, &init);
  mha.to(kFloat64);
  Tensor x = uniform({2, 3, 4}, -1, 1, kFloat64, 11).requires_grad_();
  Tensor mem = uniform({2, 5, 4}, -1, 1, kFloat64, 12).requires_grad_();
  AttentionOptions self;
  self.causal = true;
  GradcheckResult r = gradcheck([&](const TensorList& in) { return mha.forward(in[0], in[0], self).output; }, {x});
  CHECK_MESSAGE(r.ok, r.message);
  AttentionOptions cross;
  cross.key_padding_mask = from_vector<bool>({false, false, false, false, false, false, false, false, true, true}, {2, 5});
  r = gradcheck([&](const TensorList& in) { return mha.forward(in[0], in[1], cross).output; }, {x, mem});
  CHECK_MESSAGE(r.ok, r.message);
  // a parameter, through a lambda that swaps it in
  Tensor w = mha.q_proj->weight.detach().clone().requires_grad_();
  Tensor saved = mha.q_proj->weight;
  r = gradcheck([&](const TensorList& in) {
    mha.q_proj->weight = in[0];
    Tensor y = mha.forward(x.detach(), mem.detach(), cross).output;
    mha.q_proj->weight = saved;
    return y;
  }, {w});
  CHECK_MESSAGE(r.ok, r.message);
  // padded keys get no gradient
  Tensor m2 = mem.detach().clone().requires_grad_();
  mha.forward(x.detach(), m2, cross).output.sum().backward();
  std::vector<double> gm = m2.grad().to_vector<double>();
  for (int64_t j = 3; j < 5; ++j)
    for (int64_t c = 0; c < 4; ++c) CHECK(gm[(1 * 5 + j) * 4 + c] == 0.0);
}

TEST_CASE("attention: bad inputs") {
  MultiHeadAttention mha(8, 2);
  check_throws_with([] { MultiHeadAttention(10, 3); }, "[MultiHeadAttention] embed_dim 10 must be a positive multiple of num_heads 3");
  check_throws_with([&] { mha.forward(zeros({2, 3, 6}), zeros({2, 3, 8})); }, "[MultiHeadAttention] query must be (B, t2, 8), got (2,3,6)");
  check_throws_with([&] { mha.forward(zeros({2, 3, 8}), zeros({1, 3, 8})); }, "key_value must be (B, t1, 8) with the query's batch 2, got (1,3,8)");
  AttentionOptions o;
  o.key_padding_mask = zeros({2, 4}, kBool);
  check_throws_with([&] { mha.forward(zeros({2, 3, 8}), zeros({2, 3, 8}), o); }, "key_padding_mask must be bool (B, t1) = (2, 3), got bool (2,4)");
  o.key_padding_mask = Tensor();
  o.query_positions = arange(2.0, kInt64);
  check_throws_with([&] { mha.forward(zeros({2, 3, 8}), zeros({2, 3, 8}), o); }, "query_positions must be int64 (3), got int64 (2)");
}
