// T5RelativeBias and ALiBi: buckets equal HF T5's _relative_position_bucket and slopes ALiBi's
// get_slopes (reference vectors worked out from those functions, below); the
// biases equal explicit float64 loops for every alignment and shape; gradients pass gradcheck, alone
// and inside MultiHeadAttention; shifting queries and keys together changes nothing; misuse is an error.
#include "layers/attention.h"
#include "layers/relative_bias.h"
#include "attention_testing.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Run-length vector: {{value, count}, ...}.
std::vector<int64_t> runs(std::initializer_list<std::pair<int64_t, int64_t>> rs) {
  std::vector<int64_t> v;
  for (auto& r : rs) v.insert(v.end(), static_cast<size_t>(r.second), r.first);
  return v;
}
std::vector<int64_t> seq(int64_t from, int64_t to) {  // inclusive, either direction
  std::vector<int64_t> v;
  for (int64_t x = from; from <= to ? x <= to : x >= to; x += from <= to ? 1 : -1) v.push_back(x);
  return v;
}
std::vector<int64_t> join(std::initializer_list<std::vector<int64_t>> parts) {
  std::vector<int64_t> v;
  for (auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

struct Shape2 { int64_t t2, t1; };
const Shape2 kShapes[] = {{4, 4}, {3, 6}, {6, 3}, {1, 5}, {5, 1}, {7, 7}};

// Every way of placing queries on the key axis the tests sweep; the last is explicit positions.
std::vector<AttentionGeometry> geometries(int64_t heads, bool causal) {
  std::vector<AttentionGeometry> out;
  for (Shape2 s : kShapes)
    for (int a = 0; a < 4; ++a) {
      AttentionGeometry g = AttentionGeometry::make(2, heads, 4, s.t2, s.t1, causal);
      if (a < 3) {
        g.alignment = a == 0 ? Alignment::Left : a == 1 ? Alignment::Right : Alignment::Scaled;
      } else {
        std::vector<int64_t> p;
        for (int64_t i = 0; i < s.t2; ++i) p.push_back((i * 7 + 3) % (s.t1 + 40) - 20);  // far, unordered
        g.query_positions = from_vector<int64_t>(p, {s.t2});
      }
      out.push_back(g);
    }
  return out;
}

std::vector<int64_t> positions_of(const AttentionGeometry& g) { return g.positions().to_vector<int64_t>(); }

}  // namespace

TEST_CASE("T5 buckets equal hand-checked vectors for rel = -130 ... 130") {
  // rel = −130 … 130, num_buckets 32, max_distance 128
  std::vector<int64_t> bidir = join({runs({{15, 40}, {14, 27}, {13, 18}, {12, 14}, {11, 9}, {10, 7}, {9, 4}, {8, 4}}),
                                     seq(7, 0), seq(17, 23),
                                     runs({{24, 4}, {25, 4}, {26, 7}, {27, 9}, {28, 14}, {29, 18}, {30, 27}, {31, 40}})});
  std::vector<int64_t> causal = join({runs({{31, 18}, {30, 14}, {29, 12}, {28, 10}, {27, 10}, {26, 8}, {25, 7}, {24, 6},
                                            {23, 6}, {22, 5}, {21, 4}, {20, 4}, {19, 3}, {18, 3}, {17, 2}, {16, 3}}),
                                      seq(15, 1), runs({{0, 131}})});
  REQUIRE(bidir.size() == 261);
  REQUIRE(causal.size() == 261);
  for (int64_t k = 0; k < 261; ++k) {
    INFO("rel = ", k - 130);
    CHECK(t5_relative_bucket(k - 130, true, 32, 128) == bidir[k]);
    CHECK(t5_relative_bucket(k - 130, false, 32, 128) == causal[k]);
  }
  // the small config, rel = −20 … 20
  std::vector<int64_t> small_bidir = join({runs({{3, 15}, {2, 4}}), {1, 0, 5}, runs({{6, 4}, {7, 15}})});
  std::vector<int64_t> small_causal = join({runs({{7, 9}, {6, 4}, {5, 2}, {4, 2}}), {3, 2, 1}, runs({{0, 21}})});
  for (int64_t k = 0; k < 41; ++k) {
    INFO("rel = ", k - 20);
    CHECK(t5_relative_bucket(k - 20, true, 8, 16) == small_bidir[k]);
    CHECK(t5_relative_bucket(k - 20, false, 8, 16) == small_causal[k]);
  }
  // far beyond max_distance: clamped to the last bucket of each half (the candle bug gives 16, 32, 37)
  CHECK(t5_relative_bucket(-128, true, 32, 128) == 15);
  CHECK(t5_relative_bucket(-100000, true, 32, 128) == 15);
  CHECK(t5_relative_bucket(100000, true, 32, 128) == 31);
  CHECK(t5_relative_bucket(-256, false, 32, 128) == 31);
  // the index builder: δ = j − π(i)
  T5RelativeBias t5(2, 8, 16, true);
  std::vector<int64_t> c = t5.bucket_index(2, 3, from_vector<int64_t>({0, 2}, {2})).to_vector<int64_t>();
  CHECK(c == std::vector<int64_t>{0, 5, 6, 2, 1, 0});
}

TEST_CASE("T5RelativeBias: the bias equals table[h, bucket(j − π(i))] for every alignment and shape") {
  for (bool bidirectional : {true, false}) {
    Generator gen(3);
    T5RelativeBias t5(3, 8, 16, bidirectional, &gen);
    t5.to(kFloat64);
    std::vector<double> table = t5.table.detach().to_vector<double>();
    for (const AttentionGeometry& g : geometries(3, /*causal=*/!bidirectional)) {
      INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment), " explicit ", g.query_positions.defined());
      Tensor bias = t5.logit_bias(g);
      REQUIRE(bias.shape() == Shape{1, 3, g.t2, g.t1});
      std::vector<int64_t> pi = positions_of(g);
      Ref expected({1, 3, g.t2, g.t1});
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t i = 0; i < g.t2; ++i)
          for (int64_t j = 0; j < g.t1; ++j)
            expected.at({0, h, i, j}) = table[h * 8 + t5_relative_bucket(j - pi[i], bidirectional, 8, 16)];
      CHECK_CLOSE(bias, expected.tensor(), 1e-12, 0);
      // gradient of the table through the primitive's scatter
      GradcheckResult r = gradcheck(
          [&](const TensorList& in) {
            Tensor saved = t5.table;
            t5.table = in[0];
            Tensor out = t5.logit_bias(g);
            t5.table = saved;
            return out;
          },
          {t5.table.detach().clone().requires_grad_()});
      CHECK_MESSAGE(r.ok, r.message);
    }
  }
}

TEST_CASE("T5RelativeBias: gradcheck inside MultiHeadAttention, self causal and cross with padding") {
  auto causal = std::make_shared<T5RelativeBias>(2, 8, 16, false);
  gradcheck_attention(causal, /*causal=*/true, /*cross=*/false, Alignment::Left, {&causal->table});
  auto bidir = std::make_shared<T5RelativeBias>(2, 8, 16, true);
  gradcheck_attention(bidir, /*causal=*/false, /*cross=*/true, Alignment::Left, {&bidir->table});
}

TEST_CASE("T5RelativeBias: one table shared by a stack collects the gradient of every layer") {
  Generator init(2);
  auto t5 = std::make_shared<T5RelativeBias>(2, 8, 16, true, &init);
  MultiHeadAttention a(8, 2, t5, 0.0, true, &init), b(8, 2, t5, 0.0, true, &init);
  Tensor x = uniform({1, 4, 8}, -1, 1, kFloat32, 4);
  a.forward(x, x).output.sum().backward();
  Tensor ga = t5->table.grad().clone();
  t5->zero_grad();
  b.forward(x, x).output.sum().backward();
  Tensor gb = t5->table.grad().clone();
  t5->zero_grad();
  (a.forward(x, x).output.sum() + b.forward(x, x).output.sum()).backward();
  CHECK_CLOSE(t5->table.grad(), ga + gb, 1e-5, 1e-4);
}

TEST_CASE("ALiBi slopes equal the official get_slopes") {
  auto pow2 = [](std::vector<double> exps) {
    std::vector<double> v;
    for (double e : exps) v.push_back(std::exp2(-e));
    return v;
  };
  CHECK(alibi_slopes(1) == pow2({8}));
  CHECK(alibi_slopes(2) == pow2({4, 8}));
  CHECK(alibi_slopes(3) == pow2({4, 8, 2}));
  CHECK(alibi_slopes(4) == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625});
  CHECK(alibi_slopes(5) == pow2({2, 4, 6, 8, 1}));
  CHECK(alibi_slopes(6) == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});
  CHECK(alibi_slopes(7) == pow2({2, 4, 6, 8, 1, 3, 5}));
  CHECK(alibi_slopes(8) == std::vector<double>{0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625});
  std::vector<double> s12 = alibi_slopes(12);
  std::vector<double> e12 = {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
                             0.7071067812, 0.3535533906, 0.1767766953, 0.08838834765};
  REQUIRE(s12.size() == 12);
  for (size_t k = 0; k < 12; ++k) CHECK(s12[k] == doctest::Approx(e12[k]).epsilon(1e-9));
  std::vector<double> s16 = alibi_slopes(16);
  for (size_t k = 0; k < 16; ++k) CHECK(s16[k] == doctest::Approx(std::exp2(-0.5 * (k + 1))).epsilon(1e-15));
  // the wrong alternative 2^(−8(i+1)/n) for n = 6 starts at 0.39685: not what we produce
  CHECK(alibi_slopes(6)[0] != doctest::Approx(0.39685).epsilon(1e-4));
}

TEST_CASE("ALiBi: the bias equals −m·distance for every alignment and shape, causal and bidirectional") {
  for (bool bidirectional : {false, true}) {
    ALiBi alibi(3, bidirectional);
    alibi.to(kFloat64);
    std::vector<double> m = alibi_slopes(3);
    for (const AttentionGeometry& g : geometries(3, /*causal=*/!bidirectional)) {
      INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment), " bidirectional ", bidirectional);
      Tensor bias = alibi.logit_bias(g);
      CHECK(bias.dtype() == kFloat64);
      std::vector<int64_t> pi = positions_of(g);
      Ref expected({1, 3, g.t2, g.t1});
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t i = 0; i < g.t2; ++i)
          for (int64_t j = 0; j < g.t1; ++j) {
            double v = bidirectional ? -m[h] * std::fabs(double(j - pi[i])) : j <= pi[i] ? -m[h] * double(pi[i] - j) : 0.0;
            expected.at({0, h, i, j}) = v;
          }
      CHECK_CLOSE(bias, expected.tensor(), 1e-12, 0);
    }
  }
  // no parameters; the slopes are a buffer
  ALiBi alibi(4);
  CHECK(alibi.parameters().empty());
  CHECK(alibi.named_buffers().size() == 1);
}

TEST_CASE("ALiBi: gradcheck inside MultiHeadAttention, self causal and cross with padding") {
  gradcheck_attention(std::make_shared<ALiBi>(2, false), /*causal=*/true, /*cross=*/false);
  gradcheck_attention(std::make_shared<ALiBi>(2, true), /*causal=*/false, /*cross=*/true);
}

TEST_CASE("T5 and ALiBi are translation invariant: shifting queries and keys together changes nothing") {
  // Queries at π(i) against keys 0 … t1−1  ==  queries at π(i) + s against keys s … s+t1−1 of a
  // longer key axis.
  T5RelativeBias t5(2, 8, 16, true);
  ALiBi alibi_b(2, true), alibi_c(2, false);
  const int64_t t2 = 4, t1 = 6, s = 9;
  for (bool causal : {false, true}) {
    std::vector<const PositionalScheme*> schemes = {&alibi_c};
    if (!causal) schemes = {&t5, &alibi_b};
    for (const PositionalScheme* scheme : schemes) {
      AttentionGeometry g, shifted;
      g.heads = shifted.heads = 2;
      g.causal = shifted.causal = causal;
      g.t2 = shifted.t2 = t2;
      g.t1 = t1;
      shifted.t1 = t1 + s;
      g.query_positions = from_vector<int64_t>({1, 3, 4, 5}, {t2});
      shifted.query_positions = from_vector<int64_t>({1 + s, 3 + s, 4 + s, 5 + s}, {t2});
      Tensor a = scheme->logit_bias(g), b = scheme->logit_bias(shifted).narrow(-1, s, t1);
      CHECK_CLOSE(a, b, 0, 0);
    }
  }
}

TEST_CASE("T5RelativeBias and ALiBi: bad inputs give clear errors") {
  AttentionGeometry g;
  g.heads = 3;
  g.t2 = 2;
  g.t1 = 2;
  T5RelativeBias t5(4);
  check_throws_with([&] { t5.logit_bias(g); }, "[T5RelativeBias] built for 4 heads, the attention has 3");
  T5RelativeBias t5c(3, 32, 128, false);
  check_throws_with([&] { t5c.logit_bias(g); },
                    "[T5RelativeBias] the causal (bidirectional=false) table cannot tell future keys from the present one");
  check_throws_with([] { T5RelativeBias(2, 2, 128, true); }, "[T5RelativeBias] num_buckets must be at least 4 (bidirectional), got 2");
  check_throws_with([] { T5RelativeBias(2, 32, 8, true); }, "[T5RelativeBias] max_distance must exceed the 8 exact buckets, got 8");
  check_throws_with([] { T5RelativeBias(0); }, "[T5RelativeBias] num_heads must be positive, got 0");
  ALiBi alibi(4, true);
  check_throws_with([&] { alibi.logit_bias(g); }, "[ALiBi] built for 4 heads, the attention has 3");
  ALiBi causal(3);
  check_throws_with([&] { causal.logit_bias(g); }, "[ALiBi] the causal variant needs a causal mask");
  check_throws_with([] { ALiBi(0); }, "[ALiBi] num_heads must be positive, got 0");
  // wrong head count inside a layer
  auto mha = std::make_shared<MultiHeadAttention>(8, 2, std::make_shared<ALiBi>(4, true));
  Tensor x = zeros({1, 3, 8});
  check_throws_with([&] { mha->forward(x, x); }, "[ALiBi] built for 4 heads, the attention has 2");
}
