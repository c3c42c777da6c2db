// The basic layers (Embedding, LayerNorm, RMSNorm, Dropout, FeedForward): initialisation as PyTorch,
// output against plain-loop references, float64 gradcheck with respect to the input and every
// parameter, every parameter reached by backward, Dropout's train/eval behaviour, and bad inputs.
#include <cfloat>
#include <cmath>
#include <functional>

#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// gradcheck of f(inputs) where f also reads the module's parameters through `params` (its member
// handles): each is swapped for gradcheck's copy during an evaluation and restored after. `params`
// must cover the module's whole named_parameters(), so no parameter goes unchecked.
void gradcheck_layer(const Module& m, const std::vector<Tensor*>& params, const TensorList& inputs,
                     const std::function<Tensor(const TensorList&)>& f) {
  REQUIRE(params.size() == m.parameters().size());
  gradcheck_with_params(params, inputs, f);
}

// Sets a parameter's values without recording (parameters refuse in-place ops under grad mode).
void set_values(const Tensor& p, const Tensor& values) {
  NoGradGuard no_grad;
  Tensor(p).copy_(values);
}

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// y (rows, out) = x (rows, in) Wᵀ + b, W (out, in).
std::vector<double> naive_linear(const std::vector<double>& x, int64_t rows, const Linear& l) {
  const int64_t in = l.in_features, out = l.out_features;
  std::vector<double> W = values(l.weight), b = values(l.bias), y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < in; ++i) acc += x[r * in + i] * W[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

}  // namespace

// ---- Embedding ----

TEST_CASE("layers: Embedding init N(0,1), padding row zero, lookup against a loop") {
  Generator gen(3);
  Embedding emb(500, 16, 2, &gen);
  CHECK(emb.weight.shape() == Shape{500, 16});
  CHECK(emb.weight.dtype() == kFloat32);
  std::vector<double> w = values(emb.weight);
  double mean = 0, sq = 0;
  for (double v : w) mean += v / w.size();
  for (double v : w) sq += (v - mean) * (v - mean) / w.size();
  CHECK(std::fabs(mean) < 0.05);
  CHECK(std::fabs(std::sqrt(sq) - 1.0) < 0.05);
  for (int64_t c = 0; c < 16; ++c) CHECK(w[2 * 16 + c] == 0.0);
  CHECK(emb.named_parameters()[0].first == "weight");

  Tensor idx = from_vector<int64_t>({7, 2, 499, 0, 7, 1}, {2, 3});
  Tensor y = emb(idx);
  REQUIRE(y.shape() == Shape{2, 3, 16});
  std::vector<double> expected;
  for (int64_t i : idx.to_vector<int64_t>())
    for (int64_t c = 0; c < 16; ++c) expected.push_back(w[i * 16 + c]);
  CHECK_CLOSE(y, from_vector(expected, {2, 3, 16}, kFloat32), 0, 0);
}

TEST_CASE("layers: Embedding gradcheck (float64), padding row gets no gradient") {
  Generator gen(4);
  Embedding plain(6, 3, -1, &gen);
  plain.to(kFloat64);
  Tensor repeats = from_vector<int64_t>({0, 1, 5, 0, 3, 1}, {3, 2});  // repeated rows accumulate
  gradcheck_layer(plain, {&plain.weight}, {}, [&](const TensorList&) { return plain(repeats); });
  // The padding row's zero gradient is by design (as PyTorch), not the true derivative, so
  // gradcheck looks up other rows only; the padding row is checked separately below.
  Embedding emb(6, 3, 1, &gen);
  emb.to(kFloat64);
  gradcheck_layer(emb, {&emb.weight}, {}, [&](const TensorList&) {
    return emb(from_vector<int64_t>({0, 4, 5, 0}, {2, 2}));
  });
  Tensor idx = from_vector<int64_t>({0, 1, 5, 0, 3, 1}, {3, 2});
  Tensor y = emb(idx);
  check_every_parameter_gets_gradient(emb, y);
  std::vector<double> g = values(emb.weight.grad());
  for (int64_t c = 0; c < 3; ++c) CHECK(g[1 * 3 + c] == 0.0);  // padding row
  for (int64_t c = 0; c < 3; ++c) CHECK(g[2 * 3 + c] == 0.0);  // never looked up
}

TEST_CASE("layers: Embedding errors") {
  Embedding emb(4, 2);
  check_throws_with([&] { emb(from_vector<float>({0, 1}, {2})); }, "[Embedding] indices must be int64, got float32");
  check_throws_with([] { Embedding(4, 2, 4); }, "[Embedding] padding_idx 4 out of range for num_embeddings 4");
  check_throws_with([] { Embedding(0, 2); }, "[Embedding] num_embeddings and embedding_dim must be positive");
  CHECK_THROWS_AS(emb(from_vector<int64_t>({0, 4}, {2})), Error);  // index past the table
}

// ---- LayerNorm / RMSNorm ----

TEST_CASE("layers: LayerNorm init and output against a loop") {
  LayerNorm ln(5);
  CHECK(ln.named_parameters().size() == 2);
  CHECK(ln.named_parameters()[0].first == "weight");
  CHECK(ln.named_parameters()[1].first == "bias");
  CHECK_CLOSE(ln.weight, ones({5}), 0, 0);
  CHECK_CLOSE(ln.bias, zeros({5}), 0, 0);
  ln.to(kFloat64);
  set_values(ln.weight, uniform({5}, 0.5, 1.5, kFloat64, 2));
  set_values(ln.bias, uniform({5}, -1, 1, kFloat64, 3));
  Tensor x = uniform({2, 3, 5}, -2, 2, kFloat64, 4);
  std::vector<double> X = values(x), W = values(ln.weight), b = values(ln.bias), Y(X.size());
  for (int64_t r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < 5; ++c) m += X[r * 5 + c] / 5;
    for (int64_t c = 0; c < 5; ++c) v += (X[r * 5 + c] - m) * (X[r * 5 + c] - m) / 5;  // biased, as PyTorch
    for (int64_t c = 0; c < 5; ++c) Y[r * 5 + c] = (X[r * 5 + c] - m) / std::sqrt(v + 1e-5) * W[c] + b[c];
  }
  CHECK_CLOSE(ln(x), from_vector(Y, {2, 3, 5}), 1e-12, 1e-10);
  // without affine parameters (and without bias only)
  CHECK(LayerNorm(5, 1e-5, false).named_parameters().empty());
  LayerNorm no_bias(5, 1e-5, true, false);
  CHECK(no_bias.named_parameters().size() == 1);
  CHECK_FALSE(no_bias.bias.defined());
}

TEST_CASE("layers: LayerNorm gradcheck (float64) over two normalised dims — every parameter gets a gradient") {
  LayerNorm ln(Shape{2, 3});
  ln.to(kFloat64);
  set_values(ln.weight, uniform({2, 3}, 0.5, 1.5, kFloat64, 5));
  set_values(ln.bias, uniform({2, 3}, -1, 1, kFloat64, 6));
  Tensor x = uniform({2, 2, 3}, -1, 1, kFloat64, 7).requires_grad_();
  gradcheck_layer(ln, {&ln.weight, &ln.bias}, {x}, [&](const TensorList& in) { return ln(in[0]); });
  check_every_parameter_gets_gradient(ln, ln(x));
}

TEST_CASE("layers: RMSNorm output against a loop (dtype eps), gradcheck, every parameter gets a gradient") {
  RMSNorm rms(4);
  CHECK(rms.named_parameters().size() == 1);
  CHECK_CLOSE(rms.weight, ones({4}), 0, 0);
  rms.to(kFloat64);
  set_values(rms.weight, uniform({4}, 0.5, 1.5, kFloat64, 8));
  Tensor x = uniform({3, 4}, -1, 1, kFloat64, 9).requires_grad_();
  std::vector<double> X = values(x), W = values(rms.weight), Y(X.size());
  for (int64_t r = 0; r < 3; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < 4; ++c) ms += X[r * 4 + c] * X[r * 4 + c] / 4;
    for (int64_t c = 0; c < 4; ++c) Y[r * 4 + c] = X[r * 4 + c] / std::sqrt(ms + DBL_EPSILON) * W[c];
  }
  CHECK_CLOSE(rms(x), from_vector(Y, {3, 4}), 1e-12, 1e-10);
  gradcheck_layer(rms, {&rms.weight}, {x}, [&](const TensorList& in) { return rms(in[0]); });
  check_every_parameter_gets_gradient(rms, rms(x));
  CHECK(RMSNorm(4, 1e-6, false).named_parameters().empty());
}

TEST_CASE("layers: LayerNorm and RMSNorm errors name the layer and both shapes") {
  LayerNorm ln(4);
  check_throws_with([&] { ln(ones({2, 5})); }, "[LayerNorm] expected input (..., 4), got (2,5)");
  LayerNorm ln2(Shape{2, 4});
  check_throws_with([&] { ln2(ones({3, 4})); }, "[LayerNorm] expected input (..., 2,4), got (3,4)");
  check_throws_with([&] { ln2(ones({4})); }, "[LayerNorm] expected input (..., 2,4), got (4)");
  RMSNorm rms(4);
  check_throws_with([&] { rms(ones({2, 3})); }, "[RMSNorm] expected input (..., 4), got (2,3)");
  check_throws_with([] { LayerNorm(Shape{}); }, "[LayerNorm] normalized_shape must not be empty");
  check_throws_with([] { LayerNorm(4, 0.0); }, "[LayerNorm] eps must be positive");
  check_throws_with([] { RMSNorm(0); }, "[RMSNorm] normalized_shape must be positive");
}

// ---- Dropout ----

TEST_CASE("layers: Dropout is the identity in eval, masks and scales in train, same seed same mask") {
  Tensor x = uniform({8, 16}, 1, 2, kFloat64, 10);  // no zeros, so a zero means dropped
  Generator g1(42), g2(42), g3(43);
  Dropout d1(0.5, &g1), d2(0.5, &g2), d3(0.5, &g3);
  CHECK(d1.parameters().empty());
  std::vector<double> X = values(x), y1 = values(d1(x)), y2 = values(d2(x)), y3 = values(d3(x));
  int64_t dropped = 0;
  for (size_t i = 0; i < X.size(); ++i) {
    CHECK((y1[i] == 0.0 || std::fabs(y1[i] - 2 * X[i]) < 1e-12));  // kept values scaled by 1/(1-p)
    dropped += y1[i] == 0.0;
  }
  CHECK(dropped > 32);  // about half of 128
  CHECK(dropped < 96);
  CHECK(y1 == y2);  // same seed, same mask
  CHECK(y1 != y3);  // another seed, another mask
  CHECK(values(d1(x)) != y1);  // the generator advanced: the next draw is a new mask
  d1.eval();
  Tensor e = d1(x);
  CHECK_CLOSE(e, x, 0, 0);
  CHECK(g1.offset() == 2);  // eval draws nothing
  d1.train();
  CHECK(values(d1(x)) != X);
  Dropout p0(0.0);
  CHECK_CLOSE(p0(x), x, 0, 0);
  Dropout p1(1.0, &g1);
  CHECK_CLOSE(p1(x), zeros({8, 16}, kFloat64), 0, 0);
}

TEST_CASE("layers: Dropout gradcheck (float64, fixed seed) and errors") {
  Generator g(5);
  Dropout d(0.3, &g);
  Tensor x = uniform({3, 4}, -1, 1, kFloat64, 11).requires_grad_();
  gradcheck_layer(d, {}, {x}, [&](const TensorList& in) {
    g.manual_seed(5);  // the same mask at every evaluation
    return d(in[0]);
  });
  check_throws_with([] { Dropout(1.5); }, "[Dropout] p must be in [0, 1], got 1.5");
  check_throws_with([] { Dropout(-0.1); }, "[Dropout] p must be in [0, 1], got -0.1");
}

// ---- FeedForward ----

TEST_CASE("layers: FeedForward names, output against a loop for each activation") {
  for (const char* act : {"gelu", "gelu_tanh", "relu"}) {
    INFO("activation ", act);
    Generator init(6);
    FeedForward ff(4, 6, activation_from_name(act, "test"), 0.0, &init);
    auto named = ff.named_parameters();
    REQUIRE(named.size() == 4);
    CHECK(named[0].first == "fc1.weight");
    CHECK(named[1].first == "fc1.bias");
    CHECK(named[2].first == "fc2.weight");
    CHECK(named[3].first == "fc2.bias");
    CHECK(named[0].second.shape() == Shape{6, 4});
    CHECK(named[2].second.shape() == Shape{4, 6});
    ff.to(kFloat64);
    Tensor x = uniform({2, 3, 4}, -2, 2, kFloat64, 12);
    std::vector<double> h = naive_linear(values(x), 6, *ff.fc1);
    for (double& v : h) {
      if (std::string(act) == "gelu") v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      else if (std::string(act) == "gelu_tanh")
        v = 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      else v = std::max(v, 0.0);
    }
    CHECK_CLOSE(ff(x), from_vector(naive_linear(h, 6, *ff.fc2), {2, 3, 4}), 1e-12, 1e-10);
  }
}

TEST_CASE("layers: FeedForward gradcheck (float64) w.r.t. input and all parameters, eval and train with dropout") {
  for (const char* act : {"gelu", "gelu_tanh", "relu"}) {
    INFO("activation ", act);
    Generator init(7), drop(8);
    FeedForward ff(3, 5, activation_from_name(act, "test"), 0.25, &init);
    ff.dropout->generator = &drop;
    ff.to(kFloat64);
    Tensor x = uniform({2, 2, 3}, -1, 1, kFloat64, 13).requires_grad_();
    std::vector<Tensor*> params = {&ff.fc1->weight, &ff.fc1->bias, &ff.fc2->weight, &ff.fc2->bias};
    auto f = [&](const TensorList& in) {
      drop.manual_seed(8);  // in train mode: the same dropout mask at every evaluation
      return ff(in[0]);
    };
    ff.eval();
    gradcheck_layer(ff, params, {x}, f);
    ff.train();
    gradcheck_layer(ff, params, {x}, f);
    ff.eval();
    check_every_parameter_gets_gradient(ff, ff(x));
  }
}

TEST_CASE("layers: FeedForward train/eval reaches its dropout") {
  Generator init(9), drop(10);
  FeedForward ff(4, 8, Activation::Relu, 0.5, &init);
  ff.dropout->generator = &drop;
  Tensor x = uniform({5, 4}, -1, 1, kFloat32, 14);
  ff.eval();
  CHECK_FALSE(ff.dropout->is_training());
  CHECK_CLOSE(ff(x), ff(x), 0, 0);  // deterministic in eval
  ff.train();
  CHECK(ff.dropout->is_training());
  CHECK(values(ff(x)) != values(ff(x)));  // a fresh mask each call
}

TEST_CASE("layers: FeedForward errors") {
  FeedForward ff(4, 8);
  check_throws_with([&] { ff(ones({2, 5})); }, "[FeedForward] expected input (..., 4), got (2,5)");
  check_throws_with([] { FeedForward(4, 8, activation_from_name("swish", "FeedForward")); },
                    "[FeedForward] unknown activation 'swish' (expected gelu, gelu_tanh or relu)");
  check_throws_with([] { FeedForward(4, 8, Activation::Gelu, 1.5); }, "[FeedForward] dropout must be in [0, 1], got 1.5");
  check_throws_with([] { FeedForward(4, 0); }, "[FeedForward] d_model and d_ff must be positive");
}
