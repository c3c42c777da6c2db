// RoPE and Transformer-XL: reference vectors worked out from RoFormer's rotation and Transformer-XL's
// sinusoid R_p (below); each scheme's terms equal explicit
// float64 loops for every alignment and shape; gradients pass gradcheck, alone and inside
// MultiHeadAttention; shifting queries and keys together leaves the logits unchanged; bad input errors.
#include <cmath>

#include "layers/attention.h"
#include "layers/rotary.h"
#include "layers/transformer_xl.h"
#include "attention_testing.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

struct Shape2 { int64_t t2, t1; };
const Shape2 kShapes[] = {{4, 4}, {3, 6}, {6, 3}, {1, 5}, {5, 1}};

std::vector<AttentionGeometry> geometries(int64_t heads, int64_t head_dim, bool causal) {
  std::vector<AttentionGeometry> out;
  for (Shape2 s : kShapes)
    for (int a = 0; a < 4; ++a) {
      AttentionGeometry g = AttentionGeometry::make(2, heads, head_dim, s.t2, s.t1, causal);
      if (a < 3) {
        g.alignment = a == 0 ? Alignment::Left : a == 1 ? Alignment::Right : Alignment::Scaled;
      } else {
        std::vector<int64_t> p;
        for (int64_t i = 0; i < s.t2; ++i) p.push_back((i * 5 + 2) % (s.t1 + 9) - 4);  // unordered, some < 0
        g.query_positions = from_vector<int64_t>(p, {s.t2});
      }
      out.push_back(g);
    }
  return out;
}

// x (D) rotated at position m, written out pair by pair.
std::vector<double> rotate_ref(const std::vector<double>& x, double m, bool interleaved, double base = 10000) {
  const size_t D = x.size(), half = D / 2;
  std::vector<double> y(D);
  for (size_t k = 0; k < half; ++k) {
    const double a = m / std::pow(base, 2.0 * k / D), c = std::cos(a), s = std::sin(a);
    const size_t i0 = interleaved ? 2 * k : k, i1 = interleaved ? 2 * k + 1 : k + half;
    y[i0] = x[i0] * c - x[i1] * s;
    y[i1] = x[i1] * c + x[i0] * s;
  }
  return y;
}

// Row (b, h, t) of a (B, H, T, D) Ref.
std::vector<double> row(const Ref& r, int64_t b, int64_t h, int64_t t) {
  const int64_t D = r.shape[3];
  auto first = r.v.begin() + r.index({b, h, t, 0});
  return std::vector<double>(first, first + D);
}

}  // namespace

TEST_CASE("RoPE: hand-computed rotations, both pairings") {
  RoPE inter(4, 10000, RoPE::Pairing::Interleaved), half(4, 10000, RoPE::Pairing::HalfSplit);
  Tensor q = from_vector<double>({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}, {3, 4});
  Tensor pos = from_vector<int64_t>({1, 2, 5}, {3});
  Tensor ei = from_vector<double>({-1.14264, 1.922076, 2.959851, 4.0298, -2.234742, 0.077004, 2.919405, 4.059196,
                                   2.201511, -0.3916, 2.796334, 4.144939}, {3, 4});
  Tensor eh = from_vector<double>({-1.984111, 1.959901, 2.462378, 4.0198, -3.144039, 1.919605, -0.339143, 4.039197,
                                   3.160435, 1.797584, -0.107938, 4.094959}, {3, 4});
  CHECK_CLOSE(inter.rotate(q, pos), ei, 1e-6, 0);
  CHECK_CLOSE(half.rotate(q, pos), eh, 1e-6, 0);
  Tensor q1 = from_vector<double>({1, 2, 3, 4}, {1, 4}), k1 = from_vector<double>({0.5, -1, 2, 0.25}, {1, 4});
  for (auto mn : {std::pair<int64_t, int64_t>{3, 1}, {7, 5}, {102, 100}}) {
    Tensor m = from_vector<int64_t>({mn.first}, {1}), n = from_vector<int64_t>({mn.second}, {1});
    CHECK(sum(inter.rotate(q1, m) * inter.rotate(k1, n)).item() == doctest::Approx(5.659235114).epsilon(1e-9));
    CHECK(sum(half.rotate(q1, m) * half.rotate(k1, n)).item() == doctest::Approx(-3.160111731).epsilon(1e-9));
  }
}

TEST_CASE("RoPE: content logits equal rotated dot products for every alignment and shape — gradcheck") {
  for (RoPE::Pairing pairing : {RoPE::Pairing::Interleaved, RoPE::Pairing::HalfSplit}) {
    const bool interleaved = pairing == RoPE::Pairing::Interleaved;
    RoPE rope(6, 500.0, pairing);
    for (const AttentionGeometry& g : geometries(2, 6, false)) {
      INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment), " interleaved ", interleaved);
      Tensor q = uniform({2, 2, g.t2, 6}, -1, 1, kFloat64, 1), k = uniform({2, 2, g.t1, 6}, -1, 1, kFloat64, 2);
      auto qk = rope.content_qk(q, k, g);
      Tensor logits = matmul(qk.first, qk.second.transpose(-1, -2));
      Ref rq(q), rk(k), expected({2, 2, g.t2, g.t1});
      std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < g.t2; ++i)
            for (int64_t j = 0; j < g.t1; ++j) {
              std::vector<double> a = rotate_ref(row(rq, b, h, i), double(pi[i]), interleaved, 500.0);
              std::vector<double> c = rotate_ref(row(rk, b, h, j), double(j), interleaved, 500.0);
              double dot = 0;
              for (size_t d = 0; d < 6; ++d) dot += a[d] * c[d];
              expected.at({b, h, i, j}) = dot;
            }
      CHECK_CLOSE(logits, expected.tensor(), 1e-12, 0);
    }
    AttentionGeometry g = geometries(2, 6, false)[5];
    GradcheckResult r = gradcheck(
        [&](const TensorList& in) {
          auto qk = rope.content_qk(in[0], in[1], g);
          return matmul(qk.first, qk.second.transpose(-1, -2));
        },
        {uniform({1, 2, g.t2, 6}, -1, 1, kFloat64, 3).requires_grad_(),
         uniform({1, 2, g.t1, 6}, -1, 1, kFloat64, 4).requires_grad_()});
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("RoPE: logits depend only on j − π(i) (rotating both at shifted positions changes nothing)") {
  for (RoPE::Pairing pairing : {RoPE::Pairing::Interleaved, RoPE::Pairing::HalfSplit}) {
    RoPE rope(8, 10000, pairing);
    Tensor q = uniform({1, 2, 3, 8}, -1, 1, kFloat64, 5), k = uniform({1, 2, 5, 8}, -1, 1, kFloat64, 6);
    Tensor qp = from_vector<int64_t>({0, 2, 4}, {3}), kp = arange(5.0, kInt64);
    Tensor base = matmul(rope.rotate(q, qp), rope.rotate(k, kp).transpose(-1, -2));
    for (int64_t s : {1, 17, 1000}) {
      Tensor shifted = matmul(rope.rotate(q, qp + from_vector<int64_t>({s}, {1})),
                              rope.rotate(k, kp + from_vector<int64_t>({s}, {1})).transpose(-1, -2));
      CHECK_CLOSE(shifted, base, 1e-10, 0);
    }
  }
}

TEST_CASE("RoPE: gradcheck inside MultiHeadAttention, self causal and cross with padding") {
  gradcheck_attention(std::make_shared<RoPE>(4), true, false, Alignment::Left);
  gradcheck_attention(std::make_shared<RoPE>(4, 100.0, RoPE::Pairing::HalfSplit), false, true, Alignment::Right);
}

TEST_CASE("RoPE: bad inputs give clear errors") {
  check_throws_with([] { RoPE(5); }, "[RoPE] head_dim must be positive and even, got 5");
  check_throws_with([] { RoPE(4, 1.0); }, "[RoPE] base must be > 1, got 1");
  RoPE rope(4);
  AttentionGeometry g;
  g.heads = 1;
  g.t2 = 2;
  g.t1 = 2;
  check_throws_with([&] { rope.content_qk(zeros({1, 1, 2, 6}), zeros({1, 1, 2, 6}), g); }, "[RoPE] built for head_dim 4");
  check_throws_with([&] { rope.rotate(zeros({3, 4}), arange(2.0, kInt64)); }, "[RoPE] positions must have shape (3), got (2)");
  auto mha = std::make_shared<MultiHeadAttention>(12, 2, std::make_shared<RoPE>(4));  // head_dim 6
  Tensor x = zeros({1, 3, 12});
  check_throws_with([&] { mha->forward(x, x); }, "[RoPE] built for head_dim 4");
}

TEST_CASE("Transformer-XL: the sinusoid table matches Transformer-XL's R_p at p = −δ") {
  // rows δ = −2 … 1, i.e. p = 2, 1, 0, −1
  Tensor r = txl_sinusoid(2, 1, 4, kFloat64);
  Tensor expected = from_vector<double>({0.909297, 0.019999, -0.416147, 0.9998, 0.841471, 0.01, 0.540302, 0.99995,
                                         0, 0, 1, 1, -0.841471, -0.01, 0.540302, 0.99995}, {4, 4});
  CHECK_CLOSE(r, expected, 1e-6, 0);
}

TEST_CASE("Transformer-XL: terms (a)+(c) and (b)+(d) equal explicit loops for every alignment and shape") {
  const int64_t C = 8, H = 2, D = 4;
  Generator init(7);
  TransformerXL txl(C, H, &init);
  txl.to(kFloat64);
  std::vector<double> W = txl.r_proj->weight.detach().to_vector<double>();  // (C, C)
  std::vector<double> u = txl.u.detach().to_vector<double>(), v = txl.v.detach().to_vector<double>();
  for (bool causal : {false, true})
    for (const AttentionGeometry& g : geometries(H, D, causal)) {
      INFO("t2 ", g.t2, " t1 ", g.t1, " alignment ", int(g.alignment), " causal ", causal);
      Tensor q = uniform({2, H, g.t2, D}, -1, 1, kFloat64, 1), k = uniform({2, H, g.t1, D}, -1, 1, kFloat64, 2);
      auto qk = txl.content_qk(q, k, g);
      Tensor ac = matmul(qk.first, qk.second.transpose(-1, -2)), bd = txl.score_term(q, g);
      Ref rq(q), rk(k), eac({2, H, g.t2, g.t1}), ebd({2, H, g.t2, g.t1});
      std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < g.t2; ++i)
            for (int64_t j = 0; j < g.t1; ++j) {
              // R_p at p = π(i) − j, concatenated [sin, cos], projected by W_r, head h's slice
              const double p = double(pi[i] - j);
              std::vector<double> R(C);
              for (int64_t kk = 0; kk < C / 2; ++kk) {
                const double w = 1.0 / std::pow(10000.0, 2.0 * kk / C);
                R[kk] = std::sin(p * w);
                R[C / 2 + kk] = std::cos(p * w);
              }
              double a = 0, bterm = 0;
              for (int64_t d = 0; d < D; ++d) {
                double rw = 0;
                for (int64_t c = 0; c < C; ++c) rw += W[(h * D + d) * C + c] * R[c];
                a += (rq.at({b, h, i, d}) + u[h * D + d]) * rk.at({b, h, j, d});
                bterm += (rq.at({b, h, i, d}) + v[h * D + d]) * rw;
              }
              eac.at({b, h, i, j}) = a;
              ebd.at({b, h, i, j}) = causal && j > pi[i] ? 0.0 : bterm;  // later keys: no entry (masked)
            }
      CHECK_CLOSE(ac, eac.tensor(), 1e-12, 0);
      CHECK_CLOSE(bd, ebd.tensor(), 1e-12, 0);
    }
}

TEST_CASE("Transformer-XL: gradcheck of the terms and inside MultiHeadAttention") {
  Generator init(8);
  TransformerXL txl(8, 2, &init);
  txl.to(kFloat64);
  AttentionGeometry g = geometries(2, 4, false)[6];  // t2 3, t1 6, Scaled
  GradcheckResult r = gradcheck(
      [&](const TensorList& in) {
        Tensor w = txl.r_proj->weight, u = txl.u, v = txl.v;
        txl.r_proj->weight = in[1];
        txl.u = in[2];
        txl.v = in[3];
        auto qk = txl.content_qk(in[0], in[4], g);
        Tensor out = matmul(qk.first, qk.second.transpose(-1, -2)) + txl.score_term(in[0], g);
        txl.r_proj->weight = w;
        txl.u = u;
        txl.v = v;
        return out;
      },
      {uniform({1, 2, 3, 4}, -1, 1, kFloat64, 1).requires_grad_(), txl.r_proj->weight.detach().clone().requires_grad_(),
       txl.u.detach().clone().requires_grad_(), txl.v.detach().clone().requires_grad_(),
       uniform({1, 2, 6, 4}, -1, 1, kFloat64, 2).requires_grad_()});
  CHECK_MESSAGE(r.ok, r.message);
  auto self = std::make_shared<TransformerXL>(8, 2, &init);
  gradcheck_attention(self, true, false, Alignment::Left, {&self->r_proj->weight, &self->u, &self->v});
  auto cross = std::make_shared<TransformerXL>(8, 2, &init);  // cross, right-aligned as with a memory
  gradcheck_attention(cross, true, true, Alignment::Right, {&cross->r_proj->weight, &cross->u, &cross->v});
  auto bidir = std::make_shared<TransformerXL>(8, 2, &init);
  gradcheck_attention(bidir, false, true, Alignment::Scaled, {&bidir->r_proj->weight, &bidir->u, &bidir->v});
}

TEST_CASE("Transformer-XL: shifting queries and keys together leaves the logits unchanged") {
  Generator init(9);
  TransformerXL txl(8, 2, &init);
  txl.to(kFloat64);
  const int64_t t2 = 3, t1 = 5, s = 11;
  Tensor q = uniform({1, 2, t2, 4}, -1, 1, kFloat64, 1), k = uniform({1, 2, t1, 4}, -1, 1, kFloat64, 2);
  Tensor kk = cat({uniform({1, 2, s, 4}, -1, 1, kFloat64, 3), k}, 2);  // s unrelated keys in front
  for (bool causal : {false, true}) {
    AttentionGeometry g, sh;
    g.heads = sh.heads = 2;
    g.head_dim = sh.head_dim = 4;
    g.causal = sh.causal = causal;
    g.t2 = sh.t2 = t2;
    g.t1 = t1;
    sh.t1 = t1 + s;
    g.query_positions = from_vector<int64_t>({2, 3, 4}, {t2});
    sh.query_positions = from_vector<int64_t>({2 + s, 3 + s, 4 + s}, {t2});
    auto logits = [&](const Tensor& keys, const AttentionGeometry& geo) {
      auto qk = txl.content_qk(q, keys, geo);
      return matmul(qk.first, qk.second.transpose(-1, -2)) + txl.score_term(q, geo);
    };
    CHECK_CLOSE(logits(kk, sh).narrow(-1, s, t1), logits(k, g), 1e-12, 0);
  }
}

TEST_CASE("Transformer-XL: bad inputs give clear errors") {
  check_throws_with([] { TransformerXL(10, 3); }, "[TransformerXL] embed_dim 10 must be a positive multiple of num_heads 3");
  check_throws_with([] { TransformerXL(9, 3); }, "[TransformerXL] embed_dim must be even for the sinusoid, got 9");
  TransformerXL txl(8, 2);
  AttentionGeometry g;
  g.heads = 4;
  g.t2 = 2;
  g.t1 = 2;
  check_throws_with([&] { txl.score_term(zeros({1, 4, 2, 2}), g); },
                    "[TransformerXL] built for 2 heads of size 4, got q (1,4,2,2)");
  g.heads = 3;
  check_throws_with([&] { txl.score_term(zeros({1, 2, 2, 4}), g); }, "[TransformerXL] built for 2 heads, the attention has 3");
  auto mha = std::make_shared<MultiHeadAttention>(8, 4, std::make_shared<TransformerXL>(8, 2));
  Tensor x = zeros({1, 3, 8});
  check_throws_with([&] { mha->forward(x, x); }, "[TransformerXL] built for 2 heads of size 4, got q (1,4,3,2)");
}
