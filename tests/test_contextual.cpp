// CoPE, FoX and stick-breaking (layers/contextual.h): each scheme's term (stick-breaking: its weights)
// equals explicit float64 loops written from the papers' definitions; the attention weights of a whole
// layer equal loops over those terms; gradients pass gradcheck, for the term alone and inside
// MultiHeadAttention; cached decoding gives the full pass; the fused core is declined and the
// composite runs; the probe's response is the measured effective bias; the registry places them in
// causal self-attention only and checks cope_positions.
#include <cmath>

#include "layers/attention.h"
#include "layers/contextual.h"
#include "layers/models.h"
#include "layers/schemes.h"
#include "attention_testing.h"
#include "cli_testing.h"
#include "train/config/config.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// (B, H, t, D) as a host vector, element (b, h, t, d).
struct Host {
  std::vector<double> v;
  Shape s;
  explicit Host(const Tensor& t) : v(host_values(t)), s(t.shape()) {}
  double at(int64_t a, int64_t b, int64_t c, int64_t d) const { return v[((a * s[1] + b) * s[2] + c) * s[3] + d]; }
};

double sigmoid_ref(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// CoPE's term for one pair, from the paper: gates over the visible keys t = j … π(i), their sum p
// clamped to npos − 1, q·e interpolated between ⌊p⌋ and ⌈p⌉.
double cope_ref(const Host& q, const Host& k, const Host& e, int64_t b, int64_t h, int64_t i, int64_t j, int64_t pi,
                const std::vector<bool>& key_hidden, int64_t t1) {
  const int64_t D = q.s[3], npos = e.s[2];
  double p = 0;
  for (int64_t t = j; t <= pi && t < t1; ++t) {
    if (key_hidden[b * t1 + t]) continue;
    double z = 0;
    for (int64_t d = 0; d < D; ++d) z += q.at(b, h, i, d) * k.at(b, h, t, d);
    p += sigmoid_ref(z / std::sqrt(double(D)));
  }
  p = std::min(p, double(npos - 1));
  const int64_t lo = int64_t(std::floor(p)), hi = int64_t(std::ceil(p));
  double at_lo = 0, at_hi = 0;
  for (int64_t d = 0; d < D; ++d) {
    at_lo += q.at(b, h, i, d) * e.at(0, 0, lo, d);
    at_hi += q.at(b, h, i, d) * e.at(0, 0, hi, d);
  }
  return (p - lo) * at_hi + (1 - (p - lo)) * at_lo;
}

// A CoPE with a random table (the paper's zero start would hide the interpolation).
std::shared_ptr<CoPE> random_cope(int64_t D, int64_t npos, uint64_t seed) {
  auto c = std::make_shared<CoPE>(D, npos);
  c->to(kFloat64);
  NoGradGuard no_grad;
  c->table.copy_(uniform({npos, D}, -1, 1, kFloat64, seed));  // in place: the registered parameter itself
  return c;
}

std::shared_ptr<ForgettingAttention> fox(int64_t C, int64_t H) {
  Generator init(3);
  auto f = std::make_shared<ForgettingAttention>(C, H, &init);
  f->to(kFloat64);
  return f;
}

// The mask the layer builds: later keys (causal), padding keys.
Tensor core_mask(const AttentionGeometry& g, const std::vector<bool>& key_hidden) {
  Tensor pad = from_vector<bool>(key_hidden, {g.batch, 1, 1, g.t1}, kBool);
  Tensor causal = causal_mask(g.positions(), g.t1);
  return where(causal, causal, pad);
}

}  // namespace

TEST_CASE("CoPE: the term equals the paper's loops (gates, positions, clamp, interpolation), any query placement") {
  const int64_t B = 2, H = 2, D = 4;
  for (int64_t npos : {3, 16}) {             // 3: positions clamp at 2; 16: none reach it
    for (const auto& sizes : {std::pair<int64_t, int64_t>{6, 6}, {2, 6}}) {  // full pass; the last 2 (cached decoding)
      const int64_t t2 = sizes.first, t1 = sizes.second;  // not a structured binding: INFO captures them
      auto cope = random_cope(D, npos, 7);
      AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, true);
      g.alignment = t2 == t1 ? Alignment::Left : Alignment::Right;
      std::vector<bool> hidden(size_t(B * t1), false);
      hidden[1 * t1 + t1 - 1] = true;  // batch 1: the last key is padding
      Tensor q = uniform({B, H, t2, D}, -2, 2, kFloat64, 1), k = uniform({B, H, t1, D}, -2, 2, kFloat64, 2);
      Tensor term = cope->content_bias(q, k, core_mask(g, hidden), g);
      Host hq(q), hk(k), he(cope->table.reshape({1, 1, npos, D})), ht(term);
      std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < t2; ++i)
            for (int64_t j = 0; j <= pi[i]; ++j) {
              INFO("npos ", npos, " t2 ", t2, " b ", b, " h ", h, " i ", i, " j ", j);
              CHECK(ht.at(b, h, i, j) == doctest::Approx(cope_ref(hq, hk, he, b, h, i, j, pi[i], hidden, t1)).epsilon(1e-12));
            }
    }
  }
  // Whole positions: two gates of 1/2 (q·k = 0) put p at an integer, where ⌊p⌋ = ⌈p⌉ = p.
  auto cope = random_cope(2, 4, 5);
  AttentionGeometry g = AttentionGeometry::make(1, 1, 2, 2, 2, true);
  Tensor q = from_vector<double>({1, 0, 0, 1}, {1, 1, 2, 2}), k = zeros({1, 1, 2, 2}, kFloat64);
  Tensor term = cope->content_bias(q, k, causal_mask(g.positions(), 2), g);
  std::vector<double> e = host_values(cope->table);  // e[1] at query 1, key 0: p = σ(0) + σ(0) = 1
  CHECK(host_values(term)[2] == doctest::Approx(e[1 * 2 + 1]).epsilon(1e-14));
}

TEST_CASE("CoPE: gradcheck of the term (q, k, table) and of a whole attention layer") {
  auto cope = random_cope(4, 4, 9);  // D = 4: gradcheck_attention's heads
  AttentionGeometry g = AttentionGeometry::make(2, 2, 4, 4, 4, true);
  Tensor mask = causal_mask(g.positions(), 4);
  TensorList in = {uniform({2, 2, 4, 4}, -2, 2, kFloat64, 3).requires_grad_(),
                   uniform({2, 2, 4, 4}, -2, 2, kFloat64, 4).requires_grad_()};
  gradcheck_with_params({&cope->table}, in, [&](const TensorList& x) { return cope->content_bias(x[0], x[1], mask, g); });
  gradcheck_attention(cope, /*causal=*/true, /*cross=*/false, Alignment::Left, {&cope->table});
}

TEST_CASE("FoX: log gates and the bias equal the paper's sums, any query placement") {
  const int64_t B = 2, H = 2, C = 6, t1 = 5;
  auto f = fox(C, H);
  Tensor x = uniform({B, t1, C}, -2, 2, kFloat64, 4);
  Tensor s = f->key_state(x);
  REQUIRE(s.shape() == Shape{B, H, t1, 1});
  std::vector<double> w = host_values(f->forget_gate->weight), bias = host_values(f->forget_gate->bias);
  std::vector<double> xv = host_values(x);
  auto log_f = [&](int64_t b, int64_t h, int64_t l) {
    double z = bias[h];
    for (int64_t c = 0; c < C; ++c) z += w[h * C + c] * xv[(b * t1 + l) * C + c];
    return std::log(sigmoid_ref(z));
  };
  Host hs(s);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < t1; ++l) CHECK(hs.at(b, h, l, 0) == doctest::Approx(log_f(b, h, l)).epsilon(1e-13));
  for (int64_t t2 : {t1, int64_t(2)}) {
    AttentionGeometry g = AttentionGeometry::make(B, H, C / H, t2, t1, true);
    g.alignment = t2 == t1 ? Alignment::Left : Alignment::Right;
    g.key_state = s;
    Host hb(f->content_bias(Tensor(), Tensor(), Tensor(), g));
    std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < t2; ++i)
          for (int64_t j = 0; j <= pi[i]; ++j) {
            double sum = 0;
            for (int64_t l = j + 1; l <= pi[i]; ++l) sum += log_f(b, h, l);
            CHECK(hb.at(b, h, i, j) == doctest::Approx(sum).epsilon(1e-12).scale(1));
          }
  }
  // Very negative gate logits stay finite (log σ(z) ≈ z, no log 0).
  Tensor z = from_vector<double>({-800.0, 0.0, 800.0}, {3});
  std::vector<double> ls = host_values(log_sigmoid(z));
  CHECK(ls[0] == doctest::Approx(-800.0));
  CHECK(ls[1] == doctest::Approx(std::log(0.5)));
  CHECK(ls[2] == doctest::Approx(0.0));
}

TEST_CASE("FoX: gradcheck of a whole attention layer, the gate parameters included") {
  auto f = fox(8, 2);
  gradcheck_attention(f, /*causal=*/true, /*cross=*/false, Alignment::Left,
                      {&f->forget_gate->weight, &f->forget_gate->bias});
}

TEST_CASE("CoPE, FoX: the layer's weights equal a loop softmax over q·k/√D plus the loop term") {
  const int64_t B = 2, H = 2, C = 8, D = 4, t = 5;
  for (int which = 0; which < 2; ++which) {
    std::shared_ptr<PositionalScheme> scheme;
    if (which == 0) scheme = random_cope(D, 3, 11);
    else scheme = fox(C, H);
    Generator init(6);
    MultiHeadAttention m(C, H, scheme, 0.0, true, &init);
    m.to(kFloat64);
    Tensor x = uniform({B, t, C}, -1, 1, kFloat64, 12);
    AttentionOptions o;
    o.causal = true;
    o.need_weights = true;
    o.key_padding_mask = from_vector<bool>({false, false, false, false, false, false, false, false, false, true}, {B, t});
    Host w(m.forward(x, x, o).weights);
    auto heads = [&](const Tensor& y) { return y.reshape({B, t, H, D}).permute({0, 2, 1, 3}).contiguous(); };
    Host hq(heads(m.q_proj->forward(x))), hk(heads(m.k_proj->forward(x)));
    std::vector<bool> hidden = {false, false, false, false, false, false, false, false, false, true};
    Host e(which == 0 ? static_cast<CoPE&>(*scheme).table.reshape({1, 1, 3, D}) : zeros({1, 1, 1, 1}, kFloat64));
    Host ls(which == 1 ? scheme->key_state(x) : zeros({1, 1, 1, 1}, kFloat64));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < t; ++i) {
          std::vector<double> z(size_t(t), -INFINITY);
          double top = -INFINITY, norm = 0;
          for (int64_t j = 0; j <= i; ++j) {
            if (hidden[b * t + j]) continue;
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += hq.at(b, h, i, d) * hk.at(b, h, j, d);
            double term = 0;
            if (which == 0) term = cope_ref(hq, hk, e, b, h, i, j, i, hidden, t);
            else
              for (int64_t l = j + 1; l <= i; ++l) term += ls.at(b, h, l, 0);
            z[j] = dot / std::sqrt(double(D)) + term;
            top = std::max(top, z[j]);
          }
          for (int64_t j = 0; j < t; ++j) norm += std::exp(z[j] - top);
          for (int64_t j = 0; j < t; ++j) {
            INFO("scheme ", scheme->name(), " b ", b, " h ", h, " i ", i, " j ", j);
            CHECK(w.at(b, h, i, j) == doctest::Approx(std::exp(z[j] - top) / norm).epsilon(1e-12));
          }
        }
  }
}

TEST_CASE("stick-breaking: the weights equal the paper's product, nearest key first, in a layer too") {
  const int64_t B = 2, H = 2, t1 = 6;
  StickBreaking sb;
  for (int64_t t2 : {t1, int64_t(2)}) {
    AttentionGeometry g = AttentionGeometry::make(B, H, 4, t2, t1, true);
    g.alignment = t2 == t1 ? Alignment::Left : Alignment::Right;
    std::vector<bool> hidden(size_t(B * t1), false);
    hidden[1 * t1 + 2] = true;  // batch 1: key 2 is padding, it breaks nothing
    Tensor logits = uniform({B, H, t2, t1}, -3, 3, kFloat64, 21), bias = uniform({1, H, t2, t1}, -1, 1, kFloat64, 22);
    const double scale = 0.7;
    Host w(sb.attention_weights(logits, core_mask(g, hidden), scale, bias, g));
    Host hl(logits), hb(bias);
    std::vector<int64_t> pi = g.positions().to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < t2; ++i) {
          double left = 1.0;  // the stick, broken from the nearest key back
          std::vector<double> expected(size_t(t1), 0.0);
          for (int64_t j = pi[i] - 1; j >= 0; --j) {
            if (hidden[b * t1 + j]) continue;
            const double beta = sigmoid_ref(hl.at(b, h, i, j) * scale + hb.at(0, h, i, j));
            expected[j] = beta * left;
            left *= 1 - beta;
          }
          for (int64_t j = 0; j < t1; ++j) {
            INFO("t2 ", t2, " b ", b, " h ", h, " i ", i, " j ", j);
            CHECK(w.at(b, h, i, j) == doctest::Approx(expected[j]).epsilon(1e-12).scale(1e-300));
          }
        }
  }
  // In a layer: out = Σ_j A_ij v_j (no normalisation), the first query attends nothing, and the
  // forward hook sees these weights.
  Generator init(2);
  MultiHeadAttention m(8, 2, std::make_shared<StickBreaking>(), 0.0, true, &init);
  m.to(kFloat64);
  Tensor x = uniform({1, 4, 8}, -1, 1, kFloat64, 23);
  AttentionOptions o;
  o.causal = true;
  o.need_weights = true;
  Tensor hooked;
  m.forward_hook = [&](const AttentionCall& call) { hooked = call.weights.detach(); };
  AttentionOutput a = m.forward(x, x, o);
  CHECK(bitwise_equal(hooked, a.weights));
  Host w(a.weights);
  auto heads = [&](const Tensor& y) { return y.reshape({1, 4, 2, 4}).permute({0, 2, 1, 3}).contiguous(); };
  Host hq(heads(m.q_proj->forward(x))), hk(heads(m.k_proj->forward(x)));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 4; ++i) {
      double left = 1.0;
      for (int64_t j = 3; j >= 0; --j) {
        double expected = 0;
        if (j < i) {
          double z = 0;
          for (int64_t d = 0; d < 4; ++d) z += hq.at(0, h, i, d) * hk.at(0, h, j, d);
          const double beta = sigmoid_ref(z / 2);
          expected = beta * left;
          left *= 1 - beta;
        }
        CHECK(w.at(0, h, i, j) == doctest::Approx(expected).epsilon(1e-12).scale(1e-300));
      }
    }
  // The first query's output is the output projection's bias alone.
  CHECK_CLOSE(a.output.select(1, 0).reshape({8}), m.out_proj->bias, 1e-15, 0);
}

TEST_CASE("stick-breaking: gradcheck of the weights (logits, bias) and of a whole attention layer") {
  StickBreaking sb;
  AttentionGeometry g = AttentionGeometry::make(2, 2, 4, 4, 4, true);
  Tensor pad = from_vector<bool>({false, false, false, false, false, true, false, false}, {2, 1, 1, 4}, kBool);
  TensorList in = {uniform({2, 2, 4, 4}, -2, 2, kFloat64, 31).requires_grad_(),
                   uniform({1, 2, 4, 4}, -1, 1, kFloat64, 32).requires_grad_()};
  GradcheckResult r = gradcheck([&](const TensorList& x) { return sb.attention_weights(x[0], pad, 0.5, x[1], g); }, in);
  CHECK_MESSAGE(r.ok, r.message);
  gradcheck_attention(std::make_shared<StickBreaking>(), /*causal=*/true, /*cross=*/false);
}

TEST_CASE("CoPE, FoX, stick-breaking: cached decoding equals the full causal pass, and the fused core declines them") {
  const int64_t C = 8, H = 2, B = 2, t = 7;
  for (int which = 0; which < 3; ++which) {
    std::shared_ptr<PositionalScheme> scheme;
    if (which == 0) scheme = random_cope(C / H, 4, 13);
    else if (which == 1) scheme = fox(C, H);
    else scheme = std::make_shared<StickBreaking>();
    Generator init(8);
    MultiHeadAttention m(C, H, scheme, 0.0, true, &init);
    m.to(kFloat64);
    Tensor x = uniform({B, t, C}, -1, 1, kFloat64, 14);
    AttentionOptions o;
    o.causal = true;
    Tensor full = m.forward(x, x, o).output;
    KVCache cache;
    TensorList parts = {m.forward(x.narrow(1, 0, 3), cache, o).output};
    for (int64_t s = 3; s < t; ++s) parts.push_back(m.forward(x.narrow(1, s, 1), cache, o).output);
    INFO("scheme ", scheme->name());
    CHECK_CLOSE(cat(parts, 1), full, 1e-12, 1e-10);
    if (which == 1) CHECK(cache.s.shape() == Shape{B, H, t, 1});  // every key's log gate, kept beside the keys
    m.core = AttentionCore::Fused;
    CHECK_CLOSE(m.forward(x, x, o).output, full, 0, 0);
    CHECK_FALSE(m.last_call_fused);
  }
}

TEST_CASE("CoPE, FoX, stick-breaking: the probe's response is the measured effective bias") {
  // FoX with constant gates (w = 0, b): the bias is exactly −δ·log σ(b) at every δ ≤ 0.
  const int64_t C = 4, H = 2, B = 1, t = 5;
  auto f = fox(C, H);
  f->forget_gate->weight = zeros({H, C}, kFloat64);
  f->forget_gate->bias = from_vector<double>({1.0, -0.5}, {H});
  ResponseInput in;
  in.q = uniform({B, H, t, C / H}, -1, 1, kFloat64, 1);
  in.k = uniform({B, H, t, C / H}, -1, 1, kFloat64, 2);
  for (int64_t i = 0; i < t; ++i) in.positions.push_back(i);
  in.query_valid.assign(size_t(B * t), true);
  in.key_valid.assign(size_t(B * t), true);
  in.causal = true;
  in.geometry = AttentionGeometry::make(B, H, C / H, t, t, true);
  CHECK(f->response(in, 2).empty());  // no gates recorded: no curve
  in.geometry.key_state = f->key_state(uniform({B, t, C}, -1, 1, kFloat64, 3));
  std::vector<std::vector<double>> r = f->response(in, 2);
  REQUIRE(r.size() == 2);
  for (int64_t h = 0; h < H; ++h) {
    const double lf = std::log(sigmoid_ref(h == 0 ? 1.0 : -0.5));
    for (int64_t d = -2; d <= 0; ++d) CHECK(r[h][d + 2] == doctest::Approx(-d * lf).epsilon(1e-12));
    CHECK(std::isnan(r[h][4]));  // δ > 0: no visible pair
  }
  // Stick-breaking: at δ = −1 nothing lies between (0); at δ = −2 the one key between takes log(1 − β).
  r = StickBreaking().response(in, 2);
  REQUIRE(r.size() == 2);
  Host sq(in.q), sk(in.k);
  for (int64_t h = 0; h < H; ++h) {
    CHECK(r[h][1] == 0.0);
    double sum = 0;
    for (int64_t i = 2; i < t; ++i) {
      double z = 0;
      for (int64_t c = 0; c < C / H; ++c) z += sq.at(0, h, i, c) * sk.at(0, h, i - 1, c);
      sum += std::log(1 - sigmoid_ref(z / std::sqrt(double(C / H))));
    }
    CHECK(r[h][0] == doctest::Approx(sum / double(t - 2)).epsilon(1e-12));
    CHECK(std::isnan(r[h][2]));  // δ = 0: the query's own key is not attended
  }
  // CoPE with zero keys: every gate is 1/2, p = (1 − δ)/2, and the response averages q_i·e[p] over the
  // queries that reach δ.
  auto cope = random_cope(C / H, 8, 4);
  in.k = zeros({B, H, t, C / H}, kFloat64);
  r = cope->response(in, 2);
  Host hq(in.q), he(cope->table.reshape({1, 1, 8, C / H}));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = -2; d <= 0; ++d) {
      const double p = (1.0 - double(d)) / 2, lo = std::floor(p);
      double sum = 0;
      int64_t n = 0;
      for (int64_t i = -d; i < t; ++i, ++n)
        for (int64_t c = 0; c < C / H; ++c)
          sum += hq.at(0, h, i, c) * ((p - lo) * he.at(0, 0, int64_t(std::ceil(p)), c) + (1 - p + lo) * he.at(0, 0, int64_t(lo), c));
      CHECK(r[h][d + 2] == doctest::Approx(sum / double(n)).epsilon(1e-12));
    }
}

TEST_CASE("CoPE, FoX, stick-breaking: registry placement, checks and errors name the key and the values") {
  for (const char* name : {"cope", "fox", "stick_breaking"}) {
    const SchemeEntry* e = find_scheme(name);
    REQUIRE(e != nullptr);
    CHECK(placement(*e, false, false) == Placement::NeedsCausal);  // encoder self-attention
    CHECK(placement(*e, true, true) == Placement::SelfOnly);       // cross-attention
    CHECK(placement(*e, true, false) == Placement::Allowed);       // decoder self-attention
    PositionalConfig p;
    p.scheme = name;
    CHECK(make_positional(p, "decoder_self", 16, 2, true, "test")->name() == name);
  }
  PositionalConfig p;
  p.scheme = "cope";
  p.cope_positions = 0;
  const std::string key = "model.decoder_self.";
  CHECK(find_scheme("cope")->check({p, key, true, 16, 2, 8}) == "model.decoder_self.cope_positions must be at least 1, got 0");
  p.cope_positions = 1;
  CHECK(find_scheme("cope")->check({p, key, true, 16, 2, 8}).empty());
  CHECK(find_scheme("cope")->parameters(p, 2, 8) == 8);
  CHECK(find_scheme("fox")->parameters(p, 2, 8) == 2 * 17);
  check_throws_with([] { CoPE(4, 0); }, "[CoPE] npos (the embedded positions) must be at least 1, got 0");
  // Outside causal attention, or without the gates, the layer-level errors name the scheme.
  auto cope = random_cope(4, 4, 1);
  AttentionGeometry g = AttentionGeometry::make(1, 1, 4, 2, 2, false);
  Tensor q = zeros({1, 1, 2, 4}, kFloat64);
  check_throws_with([&] { cope->content_bias(q, q, Tensor(), g); }, "[CoPE] CoPE counts the keys up to the query's position");
  auto f = fox(4, 1);
  check_throws_with([&] { f->content_bias(q, q, Tensor(), g); }, "[ForgettingAttention] the forget gates sum");
  g.causal = true;
  check_throws_with([&] { f->content_bias(q, q, Tensor(), g); }, "needs the log forget gates of all 2 keys");
  check_throws_with([&] { f->key_state(zeros({1, 2, 5}, kFloat64)); }, "the gates read the layer input (B, t, 4), got (1,2,5)");
  g.causal = false;
  check_throws_with([&] { StickBreaking().attention_weights(zeros({1, 1, 2, 2}, kFloat64), Tensor(), 1.0, Tensor(), g); },
                    "[StickBreaking] stick-breaking breaks the stick from the query's position back");
}

TEST_CASE("CoPE, FoX, stick-breaking: relgrad train --dry-run refuses a bad knob or place naming the key") {
  const std::vector<std::string> lm = {"train", "--dry-run", "--model.type=decoder-only"};
  std::vector<std::string> bad = lm;
  bad.push_back("--model.decoder_self.scheme=cope");
  bad.push_back("--model.decoder_self.cope_positions=0");
  CliResult r = run_relgrad(bad);
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "[config] model.decoder_self.cope_positions must be at least 1, got 0"), r.err);
  std::vector<std::string> good = lm;
  good.push_back("--model.decoder_self.scheme=cope");
  good.push_back("--model.decoder_self.cope_positions=1");
  CHECK_CLI(run_relgrad(good), 0);
  for (const char* name : {"cope", "fox", "stick_breaking"}) {
    std::vector<std::string> encoder = {"train", "--dry-run", "--model.type=encoder-decoder",
                                        std::string("--model.encoder_self.scheme=") + name};
    r = run_relgrad(encoder);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, std::string("model.encoder_self.scheme = ") + name), r.err);
    std::vector<std::string> cross = {"train", "--dry-run", "--model.type=encoder-decoder",
                                      std::string("--model.cross.scheme=") + name};
    r = run_relgrad(cross);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, std::string("model.cross.scheme = ") + name), r.err);
  }
}

TEST_CASE("CoPE: a config without cope_positions (an older checkpoint's) has its default, and it round-trips") {
  RunConfig c = RunConfig::defaults();
  load_config_json_text(c, R"({"model": {"decoder_self": {"scheme": "t5"}}})", "older");
  CHECK(c.model.decoder_self.cope_positions == 64);
  set_config_value(c, "model.decoder_self.cope_positions", "8");
  RunConfig back = RunConfig::defaults();
  load_config_json_text(back, config_to_json(c), "round trip");
  CHECK(back.model.decoder_self.cope_positions == 8);
}

TEST_CASE("CoPE, FoX, stick-breaking on CUDA: the layer's output, cached decoding and gradients equal the CPU's") {
  if (!have_gpu()) return;
  const int64_t C = 8, H = 2, B = 2, t = 6;
  for (int which = 0; which < 3; ++which) {
    auto make = [&]() -> std::shared_ptr<PositionalScheme> {
      if (which == 0) return random_cope(C / H, 4, 17);
      if (which == 1) return fox(C, H);
      return std::make_shared<StickBreaking>();
    };
    Generator init_cpu(19), init_gpu(19);
    MultiHeadAttention cpu(C, H, make(), 0.0, true, &init_cpu), gpu(C, H, make(), 0.0, true, &init_gpu);
    cpu.to(kFloat64);
    gpu.to(kFloat64);
    gpu.to(Device::cuda());
    INFO("scheme ", cpu.positional->name());
    Tensor x = uniform({B, t, C}, -1, 1, kFloat64, 20);
    Tensor xg = x.to(Device::cuda());
    AttentionOptions o;
    o.causal = true;
    Tensor a = cpu.forward(x, x, o).output, b = gpu.forward(xg, xg, o).output;
    CHECK_CLOSE(b.to(Device::cpu()), a, 1e-12, 1e-10);
    KVCache cache;
    Tensor first = gpu.forward(xg.narrow(1, 0, 4), cache, o).output, rest = gpu.forward(xg.narrow(1, 4, 2), cache, o).output;
    CHECK_CLOSE(cat({first, rest}, 1).to(Device::cpu()), a, 1e-12, 1e-10);
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
