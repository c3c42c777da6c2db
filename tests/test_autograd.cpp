// Graph semantics of the tape: fan-out, diamonds, shared subgraphs, accumulation, no-grad, detach,
// retain_graph, a 100,000-op chain, in-place modification of a saved tensor, and gradcheck itself.
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {
Tensor leaf(std::vector<double> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return from_vector(v, s).requires_grad_();
}
}  // namespace

TEST_CASE("autograd: a + a sends the gradient twice") {
  Tensor a = leaf({1, 2});
  (a + a).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 2});
  Tensor b = leaf({3});
  (b * b).sum().backward();  // d(b^2)/db = 2b
  CHECK(b.grad().item() == 6.0);
}

TEST_CASE("autograd: diamond and shared subgraph") {
  // y = (x*2) used twice: z = y*y + exp(y); dz/dx = 2*(2y + exp(y))
  Tensor x = leaf({0.5, -1.0});
  Tensor y = x * 2.0;
  Tensor z = (y * y + exp(y)).sum();
  z.backward();
  std::vector<double> g = x.grad().to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    double yv = 2 * (i == 0 ? 0.5 : -1.0);
    CHECK(g[i] == doctest::Approx(2 * (2 * yv + std::exp(yv))).epsilon(1e-14));
  }
  // a subgraph shared by two losses that are summed
  Tensor w = leaf({1.0, 2.0});
  Tensor h = tanh(w);
  Tensor loss = (h * 3.0).sum() + (h * h).sum();
  loss.backward();
  std::vector<double> gw = w.grad().to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    double t = std::tanh(i + 1.0);
    CHECK(gw[i] == doctest::Approx((3 + 2 * t) * (1 - t * t)).epsilon(1e-14));
  }
}

// The engine keeps a leaf's gradient as the backward returned it where nothing else holds that tensor
// or its storage (else a copy): no two leaves' .grad, and no .grad and a saved tensor, share memory.
TEST_CASE("autograd: a leaf's .grad shares memory with nothing else") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  (a + b).sum().backward();  // add's backward hands one gradient to both
  a.grad().mul_(10.0);
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 1});
  Tensor c = leaf({1, 2, 3, 4});
  Tensor v = c.view({2, 2});
  (v * v).sum().backward();  // the gradient reaches c through the view's backward (a view of it)
  CHECK(c.grad().to_vector<double>() == std::vector<double>{2, 4, 6, 8});
  CHECK(c.grad().is_contiguous());
  Tensor d = leaf({5, 6}), e = leaf({7, 8});
  Tensor root = d * e;
  const Tensor given = from_vector<double>({1, 1}, {2});
  root.backward(given);  // a gradient the caller holds is not taken as d's or e's
  d.grad().mul_(0.0);
  e.grad().mul_(0.0);
  CHECK(given.to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("autograd: gradients accumulate over backward calls — zero with set_grad") {
  Tensor a = leaf({1, 2});
  (a * 3.0).sum().backward();
  (a * 3.0).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{6, 6});
  a.set_grad(Tensor());
  (a * 1.0).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("autograd: no-grad, detach, requires_grad propagation") {
  Tensor a = leaf({1, 2});
  {
    NoGradGuard guard;
    Tensor y = a * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      EnableGradGuard enable;
      CHECK((a * 2.0).requires_grad());
    }
  }
  CHECK(GradMode::is_enabled());
  Tensor d = (a * 2.0).detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.impl()->storage != nullptr);
  Tensor y = a * d;  // d is a constant: dy/da = d
  y.sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 4});
  Tensor c = from_vector<double>({1}, {1});
  CHECK_FALSE((c * 2.0).requires_grad());
  check_throws_with([&] { (c * 2.0).sum().backward(); }, "[backward] the tensor does not require grad");
  check_throws_with([&] { (a * 2.0).backward(); }, "grad can be implicitly created only for one-element outputs");
  // explicit gradient for a non-scalar output
  Tensor b = leaf({1, 2});
  (b * 3.0).backward(from_vector<double>({1, 10}, {2}));
  CHECK(b.grad().to_vector<double>() == std::vector<double>{3, 30});
  check_throws_with([&] { (b * 3.0).backward(zeros({3}, kFloat64)); }, "[backward] gradient shape (3) differs from output shape (2)");
}

TEST_CASE("autograd: retain_graph and freed graphs") {
  Tensor a = leaf({2});
  Tensor y = exp(a).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  CHECK(a.grad().item() == doctest::Approx(2 * std::exp(2.0)));
  check_throws_with([&] { y.backward(); }, "trying to backward through the graph a second time");
}

TEST_CASE("autograd: a chain of 100,000 ops, backward and destruction without recursion") {
  Tensor x = leaf({1.0});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0 + 0.0;  // 200,000 nodes
  y.sum().backward();
  CHECK(x.grad().item() == 1.0);
  y = Tensor();  // freeing the graph must not overflow the stack either
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = z + 0.0;
  z = Tensor();
  CHECK(true);
}

TEST_CASE("autograd: modifying a saved tensor in place is detected") {
  Tensor a = leaf({1, 2});
  Tensor b = from_vector<double>({3, 4}, {2});
  Tensor y = (a * b).sum();  // saves b for d/da
  b.mul_(2.0);
  check_throws_with([&] { y.backward(); }, "[mul] a tensor saved for backward was modified by an in-place operation");
  // an output saved by exp, modified through a view
  Tensor c = leaf({0.0, 1.0});
  Tensor e;
  {
    e = exp(c);
  }
  Tensor loss = e.sum();
  {
    NoGradGuard ng;
    e.select(0, 0).fill_(5.0);
  }
  check_throws_with([&] { loss.backward(); }, "[exp] a tensor saved for backward was modified");
  // in-place on a tensor that requires grad with grad mode on is refused
  check_throws_with([&] { a.add_(1.0); }, "[add_(double v)] in-place operation on a tensor that requires grad");
  {
    NoGradGuard ng;
    a.add_(1.0);  // fine under no-grad (optimizer updates)
  }
  CHECK(a.to_vector<double>() == std::vector<double>{2, 3});
  check_throws_with([&] {
    Tensor s = zeros({2}, kFloat64);
    s.add_(zeros({3, 2}, kFloat64));
  }, "does not fit in-place into shape (2)");
}

TEST_CASE("autograd: grad() returns gradients without touching .grad") {
  Tensor a = leaf({1, 2});
  Tensor h = a * 3.0;
  Tensor y = (h * h).sum();
  TensorList g = grad(y, {a, h});
  CHECK(g[0].to_vector<double>() == std::vector<double>{18, 36});
  CHECK(g[1].to_vector<double>() == std::vector<double>{6, 12});
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("gradcheck: passes on correct gradients and catches a wrong one") {
  Tensor x = uniform({3, 2}, -1, 1).requires_grad_();
  GradcheckResult ok = gradcheck([](const TensorList& in) { return tanh(in[0]) * in[0]; }, {x});
  CHECK_MESSAGE(ok.ok, ok.message);
  CHECK(ok.max_abs_error < 1e-8);
  // An op whose recorded backward is deliberately wrong (twice the true gradient).
  auto wrong = [](const TensorList& in) {
    Tensor y = in[0].detach() * 3.0;
    if (!needs_grad({in[0]})) return y;
    return record(y, "wrong_triple", {in[0]}, [](const Tensor& g) -> TensorList { return {g * 6.0}; });
  };
  GradcheckResult bad = gradcheck(wrong, {x});
  CHECK_FALSE(bad.ok);
  CHECK(bad.message.find("analytical 6, numerical 3") != std::string::npos);
  check_throws_with([] { gradcheck([](const TensorList& in) { return in[0]; }, {zeros({2}).requires_grad_()}); },
                    "[gradcheck] input 0 must be a float64 leaf");
}
