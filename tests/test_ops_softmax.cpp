// Op table for the softmax family: softmax, log_softmax and cross_entropy. References are the
// textbook formulas on float64 with plain loops (inputs are small, so no max-shift is needed there).
#include <cmath>

#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Applies f to every line of x along dim (the C values at all indices but dim), writing back C values.
Ref along_dim(const Ref& x, int64_t dim, const std::function<std::vector<double>(const std::vector<double>&)>& f) {
  const int64_t nd = static_cast<int64_t>(x.shape.size());
  if (nd == 0) {  // a scalar is one line of one value
    Ref out(x.shape);
    out.v = f(x.v);
    return out;
  }
  const int64_t d = dim < 0 ? dim + nd : dim, C = x.shape[d];
  Ref out(x.shape);
  for (int64_t k = 0; k < x.numel(); ++k) {
    Shape idx = unravel(k, x.shape);
    if (idx[d] != 0) continue;  // visit each line once, from its first element
    std::vector<double> line(C);
    for (int64_t c = 0; c < C; ++c) { idx[d] = c; line[c] = x.at(idx); }
    std::vector<double> result = f(line);
    for (int64_t c = 0; c < C; ++c) { idx[d] = c; out.at(idx) = result[c]; }
  }
  return out;
}

std::vector<double> ref_softmax(const std::vector<double>& line) {
  double s = 0;
  for (double v : line) s += std::exp(v);
  std::vector<double> out;
  for (double v : line) out.push_back(std::exp(v) / s);
  return out;
}

std::vector<double> ref_log_softmax(const std::vector<double>& line) {
  std::vector<double> out = ref_softmax(line);
  for (double& v : out) v = std::log(v);
  return out;
}

// Cross-entropy per position of logits (N, C, d...) or (C), target (N, d...) or (), then reduced.
Ref ref_cross_entropy(const Ref& logits, const Ref& target, const CrossEntropyOptions& o) {
  const bool unbatched = logits.shape.size() == 1;
  const int64_t N = unbatched ? 1 : logits.shape[0], C = unbatched ? logits.shape[0] : logits.shape[1];
  const int64_t D = logits.numel() / (N * C);
  Ref losses(target.shape);
  double total = 0, count = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t t = static_cast<int64_t>(target.v[n * D + d]);
      if (t == o.ignore_index) continue;
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(logits.v[(n * C + c) * D + d]);
      auto neg_log_p = [&](int64_t c) { return std::log(s) - logits.v[(n * C + c) * D + d]; };
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth += neg_log_p(c) / C;
      double loss = (1 - o.label_smoothing) * neg_log_p(t) + o.label_smoothing * smooth;
      losses.v[n * D + d] = loss;
      total += loss;
      count += 1;
    }
  if (o.reduction == Reduction::None) return losses;
  Ref out(Shape{});
  out.v[0] = o.reduction == Reduction::Sum ? total : total / count;
  return out;
}

Tensor int_tensor(const std::vector<int64_t>& v, const Shape& shape) { return from_vector(v, shape, kInt64); }

const char* reduction_name(Reduction r) { return r == Reduction::None ? "none" : r == Reduction::Sum ? "sum" : "mean"; }

void run_softmax_op(const std::string& name, Tensor (*op)(const Tensor&, int64_t),
                    std::vector<double> (*f)(const std::vector<double>&)) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{3, 4, 5}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, -1},
                                                         {{3, 4, 5}, -3}, {{3, 1}, 1},   {{3, 1}, 0},
                                                         {{6}, 0},        {{}, 0}};
  for (const auto& [shape, dim] : cases) {
    OpCase c;
    c.name = name + " " + shape_str(shape) + " dim " + std::to_string(dim);
    c.shapes = {shape};
    c.op = [op, dim = dim](const TensorList& in) { return op(in[0], dim); };
    c.reference = [f, dim = dim](const std::vector<Ref>& in) { return along_dim(in[0], dim, f); };
    c.bad_inputs = {
        {"dim out of range", [op] { op(zeros({2, 3}), 2); }, "[" + name + "] dim 2 out of range for a tensor of 2 dimensions"},
        {"negative dim out of range", [op] { op(zeros({2, 3}), -3); }, "[" + name + "] dim -3 out of range"},
        {"int64 input", [op] { op(arange(3.0, kInt64), 0); }, "[" + name + "] expected a floating tensor"}};
    run_op_case(c);
  }
}

// Shared bad inputs of cross_entropy (logits (2, 3), target (2)).
std::vector<BadInput> cross_entropy_bad_inputs() {
  Tensor logits = zeros({2, 3}, kFloat64);
  return {
      {"float target", [=] { cross_entropy(logits, zeros({2}, kFloat64)); },
       "[cross_entropy] target must hold int64 class indices, got float64 (2)"},
      {"target of the wrong shape", [=] { cross_entropy(logits, int_tensor({0, 1, 2}, {3})); },
       "[cross_entropy] logits (2,3) need a target of shape (2), got (3)"},
      {"target (N, d) for (N, C) logits", [=] { cross_entropy(logits, int_tensor({0, 1}, {2, 1})); },
       "need a target of shape (2), got (2,1)"},
      {"target >= C", [=] { cross_entropy(logits, int_tensor({0, 3}, {2})); },
       "[cross_entropy] target 3 is out of range for 3 classes"},
      {"negative target", [=] { cross_entropy(logits, int_tensor({-1, 0}, {2})); },
       "[cross_entropy] target -1 is out of range for 3 classes"},
      {"scalar logits", [=] { cross_entropy(scalar_tensor(1.0, kFloat64), int_tensor({0}, {})); },
       "[cross_entropy] logits need a class dim, got shape ()"},
      {"int64 logits", [=] { cross_entropy(zeros({2, 3}, kInt64), int_tensor({0, 1}, {2})); },
       "[cross_entropy] logits must be float32 or float64, got int64 (2,3)"},
      {"label_smoothing > 1", [=] { cross_entropy(logits, int_tensor({0, 1}, {2}), CrossEntropyOptions().set_label_smoothing(1.5)); },
       "[cross_entropy] label_smoothing must be in [0, 1], got 1.5"},
  };
}

struct CrossEntropyCase {
  std::string what;
  Shape logits_shape;
  std::vector<int64_t> target;
  Shape target_shape;
  CrossEntropyOptions options;
};

}  // namespace

TEST_CASE("op softmax") { run_softmax_op("softmax", softmax, ref_softmax); }

TEST_CASE("op log_softmax") { run_softmax_op("log_softmax", log_softmax, ref_log_softmax); }

TEST_CASE("op cross_entropy") {
  std::vector<CrossEntropyCase> cases;
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    CrossEntropyOptions plain = CrossEntropyOptions().set_reduction(r);
    CrossEntropyOptions ignore = CrossEntropyOptions().set_reduction(r);  // -100 is the default ignore_index
    CrossEntropyOptions ignore_2 = CrossEntropyOptions().set_reduction(r).set_ignore_index(2);
    CrossEntropyOptions smooth = CrossEntropyOptions().set_reduction(r).set_label_smoothing(0.1);
    CrossEntropyOptions smooth_ignore = CrossEntropyOptions().set_reduction(r).set_label_smoothing(0.25);
    std::string red = reduction_name(r);
    cases.push_back({"(N,C) " + red, {4, 5}, {0, 4, 2, 1}, {4}, plain});
    cases.push_back({"(N,C) ignore_index -100 " + red, {4, 5}, {0, -100, 2, -100}, {4}, ignore});
    cases.push_back({"(N,C) ignore_index 2 (a valid class) " + red, {4, 5}, {0, 2, 2, 1}, {4}, ignore_2});
    cases.push_back({"(N,C) label_smoothing " + red, {4, 5}, {3, 4, 0, 1}, {4}, smooth});
    cases.push_back({"(N,C) label_smoothing + ignore " + red, {4, 5}, {3, -100, 0, 1}, {4}, smooth_ignore});
    cases.push_back({"(N,C,d) " + red, {2, 3, 4}, {0, 1, 2, 0, 2, -100, 1, 1}, {2, 4}, smooth_ignore});
    cases.push_back({"(N,C,d1,d2) " + red, {2, 3, 2, 2}, {0, 1, 2, 0, 2, 2, 1, -100}, {2, 2, 2}, plain});
    cases.push_back({"(C) unbatched " + red, {5}, {3}, {}, smooth});
    cases.push_back({"(N,1) one class " + red, {3, 1}, {0, 0, -100}, {3}, plain});
  }
  for (const CrossEntropyCase& cc : cases) {
    OpCase c;
    c.name = "cross_entropy " + cc.what;
    c.make_inputs = [cc](DType dt) {
      return TensorList{uniform(cc.logits_shape, -2, 2, kFloat64, 5).to(dt), int_tensor(cc.target, cc.target_shape)};
    };
    c.op = [o = cc.options](const TensorList& in) { return cross_entropy(in[0], in[1], o); };
    c.reference = [o = cc.options](const std::vector<Ref>& in) { return ref_cross_entropy(in[0], in[1], o); };
    c.bad_inputs = cross_entropy_bad_inputs();
    run_op_case(c);
  }
}

// ---- behaviour the table cannot express ---------------------------------------------------------

TEST_CASE("softmax: large logits stay finite (the row max is subtracted first)") {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = from_vector<double>({1000, 999, 0, -1000}, {1, 4}).to(dt);
    std::vector<double> y = softmax(x, -1).to(kFloat64).to_vector<double>();
    for (double v : y) CHECK(std::isfinite(v));
    CHECK(y[0] == doctest::Approx(1 / (1 + std::exp(-1.0))));
    std::vector<double> ly = log_softmax(x, 1).to(kFloat64).to_vector<double>();
    for (double v : ly) CHECK(std::isfinite(v));
    CHECK(ly[3] == doctest::Approx(ly[0] - 2000).epsilon(1e-6));  // x_3 - x_0 = -2000
    Tensor loss = cross_entropy(x, int_tensor({3}, {1}));
    CHECK(loss.item() == doctest::Approx(-ly[3]).epsilon(1e-6));
    Tensor xg = x.detach().clone().requires_grad_();
    cross_entropy(xg, int_tensor({1}, {1})).backward();
    for (double v : xg.grad().to(kFloat64).to_vector<double>()) CHECK(std::isfinite(v));
  }
}

TEST_CASE("cross_entropy: known values, as PyTorch") {
  Tensor logits = from_vector<double>({1, 2, 3}, {1, 3});
  // -log softmax([1,2,3])[0] = log(1 + e + e^2)
  double nll = std::log(1 + std::exp(1.0) + std::exp(2.0));
  CHECK(cross_entropy(logits, int_tensor({0}, {1})).item() == doctest::Approx(nll));
  // label smoothing 0.1: 0.9 * nll + 0.1 * mean_c(-log p_c); -log p_c = lse - x_c
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double smooth = lse - 2.0;
  CHECK(cross_entropy(logits, int_tensor({0}, {1}), CrossEntropyOptions().set_label_smoothing(0.1)).item() ==
        doctest::Approx(0.9 * nll + 0.1 * smooth));
}

TEST_CASE("cross_entropy: ignored targets get no gradient — all ignored gives NaN mean, zero gradient") {
  Tensor logits = uniform({3, 4}, -1, 1, kFloat64, 3).requires_grad_();
  cross_entropy(logits, int_tensor({1, -100, 2}, {3})).backward();
  std::vector<double> g = logits.grad().to_vector<double>();
  for (int c = 0; c < 4; ++c) CHECK(g[4 + c] == 0);
  // Each non-ignored row of the Mean gradient sums to 0 (softmax minus a one-hot), and is divided by 2.
  double row0 = g[0] + g[1] + g[2] + g[3];
  CHECK(row0 == doctest::Approx(0).epsilon(1e-12));
  CHECK(g[1] < 0);
  Tensor l2 = uniform({2, 3}, -1, 1, kFloat64, 4).requires_grad_();
  Tensor loss = cross_entropy(l2, int_tensor({-100, -100}, {2}));
  CHECK(std::isnan(loss.item()));
  loss.backward();
  for (double v : l2.grad().to_vector<double>()) CHECK(v == 0);
  CHECK(cross_entropy(l2.detach(), int_tensor({-100, -100}, {2}), CrossEntropyOptions().set_reduction(Reduction::Sum))
            .item() == 0);
}

TEST_CASE("softmax: rows sum to 1 along any dim — modifying the saved output in place is caught") {
  Tensor x = uniform({2, 3, 4}, -5, 5, kFloat64, 9);
  for (int64_t dim : {0, 1, 2}) {
    Tensor s = sum(softmax(x, dim), {dim});
    CHECK_CLOSE(s, ones(s.shape(), kFloat64), 1e-12, 0);
  }
  // A saved softmax output modified in place must be caught by backward.
  Tensor xg = x.clone().requires_grad_();
  Tensor y = softmax(xg, 1);
  Tensor z = y.detach();
  z.mul_(2.0);
  check_throws_with([&] { y.sum().backward(); }, "modified by an in-place operation");
}

TEST_CASE("softmax: large inputs (the parallel path) match the reference") {
  // (64, 1000) is big enough for the kernels to spread columns over threads.
  Tensor x = uniform({64, 1000}, -3, 3, kFloat64, 12);
  Ref rx(x);
  CHECK_CLOSE(softmax(x, 1), along_dim(rx, 1, ref_softmax).tensor(), 1e-12, 1e-10);
  CHECK_CLOSE(log_softmax(x, 0), along_dim(rx, 0, ref_log_softmax).tensor(), 1e-12, 1e-10);
  std::vector<int64_t> t(64);
  for (int64_t n = 0; n < 64; ++n) t[n] = n % 7 == 0 ? -100 : (n * 37) % 1000;
  CrossEntropyOptions o = CrossEntropyOptions().set_label_smoothing(0.1).set_reduction(Reduction::None);
  CHECK_CLOSE(cross_entropy(x, int_tensor(t, {64}), o), ref_cross_entropy(rx, Ref(int_tensor(t, {64})), o).tensor(),
              1e-12, 1e-10);
}
