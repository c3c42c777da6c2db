// The fast paths of the CPU-performance work, each against its composite twin or a float64 reference:
// fast exp/erf (core/base/fast_math.h), masked_softmax (attention's fused softmax), addmm (the GEMM
// accumulating onto a bias or positional term) and the fused Adam/AdamW step.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/base/fast_math.h"
#include "core/base/functors.h"
#include "testing.h"
#include "thread_count.h"
#include "train/optim/optim.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

// The composite twin of masked_softmax: the chain attention used before the fused op.
Tensor composite_masked_softmax(const Tensor& x, const Tensor& mask, double scale, const Tensor& bias) {
  Tensor z = mul(x, scale);
  if (bias.defined()) z = add(z, bias);
  if (!mask.defined()) return softmax(z, -1);
  const double lowest = x.dtype() == kFloat32 ? -std::numeric_limits<float>::max() : -std::numeric_limits<double>::max();
  return masked_fill(softmax(masked_fill(z, mask, lowest), -1), mask, 0.0);
}

// Causal (1, 1, T, T) or'ed with key padding (B, 1, 1, T) where row b has pad[b] padded keys at the end;
// pad[b] == T masks a whole row set.
Tensor attention_mask(int64_t B, int64_t T, const std::vector<int64_t>& pad) {
  std::vector<double> m(B * T * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) m[(b * T + i) * T + j] = (j > i || j >= T - pad[b]) ? 1.0 : 0.0;
  return ne(from_vector(m, {B, 1, T, T}, kFloat64), 0.0);
}

}  // namespace

TEST_CASE("fast_expf: within 1 ulp of exp on [-87, 88.7], 0 below, inf above, NaN kept — every float of a sweep") {
  int64_t worst = 0, checked = 0;
  for (float x = -87.0f; x < 88.7f; x = std::nextafter(x + std::fabs(x) * 1e-5f, 100.0f), ++checked) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, ulp_distance(fn::fast_expf(x), want));
  }
  CHECK(checked > 100000);
  CHECK(worst <= 1);
  CHECK(fn::fast_expf(0.0f) == 1.0f);
  CHECK(fn::fast_expf(-87.5f) == 0.0f);  // flushed: exp(-87.5) < 1.2e-38
  CHECK(fn::fast_expf(-1e30f) == 0.0f);
  CHECK(fn::fast_expf(-INFINITY) == 0.0f);
  CHECK(std::isinf(fn::fast_expf(88.73f)));
  CHECK(std::isinf(fn::fast_expf(INFINITY)));
  CHECK(std::isnan(fn::fast_expf(NAN)));
}

TEST_CASE("fast_erff: within 5e-7 of erf — odd — ±1 far out — NaN kept") {
  double worst = 0;
  for (float x = -6.0f; x < 6.0f; x += 1.0f / 4096) {
    worst = std::max(worst, std::fabs(double(fn::fast_erff(x)) - std::erf(double(x))));
    REQUIRE(fn::fast_erff(-x) == -fn::fast_erff(x));
  }
  CHECK(worst < 5e-7);
  CHECK(fn::fast_erff(0.0f) == 0.0f);
  CHECK(std::fabs(fn::fast_erff(50.0f) - 1.0f) < 1e-6f);
  CHECK(std::isnan(fn::fast_erff(NAN)));
}

TEST_CASE("exp and gelu ops: a value's result does not depend on where it sits (vector lane or tail)") {
  // 37 elements: vector bodies plus a scalar tail. Each element alone (a 1-element tensor, scalar
  // code) must give the bits it gets inside the long tensor.
  Tensor x = uniform({37}, -9.0, 9.0, kFloat32, 3);
  for (auto f : {+[](const Tensor& t) { return exp(t); }, +[](const Tensor& t) { return gelu(t); }}) {
    Tensor all = f(x);
    for (int64_t i = 0; i < 37; ++i) CHECK(bitwise_equal(f(x.narrow(0, i, 1).contiguous()), all.narrow(0, i, 1)));
  }
  // The gradients too, through the op (gelu's backward) and the fused bias + activation.
  auto gelu_grad = [](const Tensor& t) {
    Tensor leaf = t.detach().requires_grad_(true);
    sum(mul(gelu(leaf), 1.5)).backward();
    return leaf.grad();
  };
  auto bias_gelu_grad = [](const Tensor& t) {
    Tensor leaf = t.detach().requires_grad_(true);
    sum(mul(bias_activation(leaf, zeros({t.size(0)}, t.dtype()), Activation::Gelu), 1.5)).backward();
    return leaf.grad();
  };
  for (auto f : {+gelu_grad, +bias_gelu_grad}) {
    Tensor all = f(x);
    for (int64_t i = 0; i < 37; ++i) CHECK(bitwise_equal(f(x.narrow(0, i, 1).contiguous()), all.narrow(0, i, 1)));
  }
}

namespace {
// Scalar calls the compiler cannot inline into the loops below: the forms a tail or a one-element
// call of a functor takes.
using UnaryFn = float (*)(float);
using GradFn = float (*)(float, float);
volatile UnaryFn scalar_exp = [](float v) { return fn::fast_expf(v); };
volatile UnaryFn scalar_erf = [](float v) { return fn::fast_erff(v); };
volatile UnaryFn scalar_gelu = [](float v) { return fn::Gelu{}(v); };
volatile GradFn scalar_gelu_grad = [](float v, float g) { return fn::Gelu{}.grad(v, v, g); };
volatile GradFn scalar_gelu_tanh_grad = [](float v, float g) { return fn::GeluTanh{}.grad(v, v, g); };
}  // namespace

TEST_CASE("fast exp, erf and GELU's functors: a vectorised loop gives the bits of scalar calls") {
  // Loops the compiler vectorises, against the same functors called one element at a time. They
  // differ when the compiler fuses a * b + c into an FMA in one form and not the other (GCC's default
  // -ffp-contract=fast did, in GELU's gradient; CMakeLists.txt turns it off).
  const int64_t n = 4099;
  std::vector<float> x(n), g(n), e(n), r(n), y(n), d(n), dt(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = -12.0f + 24.0f * static_cast<float>(i) / n + 1e-3f * static_cast<float>(i % 7);
    g[i] = 0.25f + static_cast<float>(i % 11) / 8.0f;
  }
  for (int64_t i = 0; i < n; ++i) e[i] = fn::fast_expf(x[i]);
  for (int64_t i = 0; i < n; ++i) r[i] = fn::fast_erff(x[i]);
  for (int64_t i = 0; i < n; ++i) y[i] = fn::Gelu{}(x[i]);
  for (int64_t i = 0; i < n; ++i) d[i] = fn::Gelu{}.grad(x[i], x[i], g[i]);
  for (int64_t i = 0; i < n; ++i) dt[i] = fn::GeluTanh{}.grad(x[i], x[i], g[i]);
  int64_t differ[5] = {};
  for (int64_t i = 0; i < n; ++i) {
    differ[0] += e[i] != scalar_exp(x[i]);
    differ[1] += r[i] != scalar_erf(x[i]);
    differ[2] += y[i] != scalar_gelu(x[i]);
    differ[3] += d[i] != scalar_gelu_grad(x[i], g[i]);
    differ[4] += dt[i] != scalar_gelu_tanh_grad(x[i], g[i]);
  }
  INFO("exp, erf, gelu, gelu grad, gelu_tanh grad: " << differ[0] << ", " << differ[1] << ", " << differ[2]
                                                   << ", " << differ[3] << ", " << differ[4]);
  for (int64_t k : differ) CHECK(k == 0);
}

TEST_CASE("masked_softmax: equals its composite twin, forward and backward, float64 and float32") {
  const int64_t B = 3, H = 2, T = 7;
  Tensor mask = attention_mask(B, T, {0, 2, T});  // batch 2: every key padded → rows of zeros
  for (DType dt : {kFloat64, kFloat32}) {
    CAPTURE(dtype_name(dt));
    for (bool with_bias : {false, true}) {
      for (bool with_mask : {false, true}) {
        Tensor x = uniform({B, H, T, T}, -3, 3, kFloat64, 5).to(dt).requires_grad_(true);
        Tensor bias = with_bias ? uniform({1, H, T, T}, -1, 1, kFloat64, 6).to(dt).requires_grad_(true) : Tensor();
        Tensor m = with_mask ? mask : Tensor();
        Tensor g = uniform({B, H, T, T}, -1, 1, kFloat64, 7).to(dt);
        Tensor fused = masked_softmax(x, m, 0.37, bias);
        sum(mul(fused, g)).backward();
        Tensor gx = x.grad(), gb = with_bias ? bias.grad() : Tensor();
        x.set_grad(Tensor());
        if (with_bias) bias.set_grad(Tensor());
        Tensor twin = composite_masked_softmax(x, m, 0.37, bias);
        sum(mul(twin, g)).backward();
        const double tol = dt == kFloat64 ? 1e-14 : 2e-6;
        CHECK(compare(fused, twin, tol, tol) == "");
        CHECK(compare(gx, x.grad(), tol, tol) == "");
        if (with_bias) CHECK(compare(gb, bias.grad(), tol, tol) == "");
      }
    }
  }
  // The fully masked rows are exactly 0 with exactly 0 gradient.
  Tensor x = uniform({B, H, T, T}, -3, 3).requires_grad_(true);
  Tensor y = masked_softmax(x, mask, 1.0);
  sum(mul(y, uniform({B, H, T, T}, -1, 1, kFloat64, 9))).backward();
  CHECK(sum(abs(y.select(0, 2))).item() == 0.0);
  CHECK(sum(abs(x.grad().select(0, 2))).item() == 0.0);
}

TEST_CASE("masked_softmax: float64 gradcheck through x and a broadcast bias — bad inputs are named") {
  const int64_t T = 5;
  Tensor mask = attention_mask(2, T, {1, 0});
  Tensor x = uniform({2, 2, T, T}, -2, 2, kFloat64, 11).requires_grad_(true);
  Tensor bias = uniform({2, T, T}, -1, 1, kFloat64, 12).requires_grad_(true);
  auto r = gradcheck([&](const TensorList& in) { return masked_softmax(in[0], mask, 0.5, in[1]); }, {x, bias});
  CHECK_MESSAGE(r.ok, r.message);
  check_throws_with([&] { masked_softmax(x, ne(zeros({3, 1, 1, T}), 0.0)); }, "mask (3,1,1,5) does not broadcast to x (2,2,5,5)");
  check_throws_with([&] { masked_softmax(x, zeros({1, 1, T, T})); }, "mask must be bool");
  check_throws_with([&] { masked_softmax(x, Tensor(), 1.0, zeros({T}, TensorOptions(kFloat32))); }, "dtypes differ");
}

TEST_CASE("masked_softmax: a NaN input gives a NaN row, as the composite does") {
  Tensor x = uniform({2, 6}, -1, 1, kFloat32);
  x.narrow(0, 1, 1).narrow(1, 3, 1).fill_(NAN);
  Tensor y = masked_softmax(x, Tensor());
  CHECK(std::isfinite(sum(y.select(0, 0)).item()));
  for (int64_t c = 0; c < 6; ++c) CHECK(std::isnan(y.select(0, 1).select(0, c).item()));
}

TEST_CASE("masked_softmax: rows over many blocks and a row longer than a block, at 1, 2 and 3 threads") {
  // core/cpu/softmax.h takes rows in blocks of up to 4,096 elements (whole rows): the exps of a block
  // in one loop, the masks of unit stride applied by the block. (3, 5, 300, 30): 4,500 rows of 30 in
  // 34 blocks, fully masked rows (batch 1's keys all padded) and a NaN row among them; (3, 1, 2, 5000):
  // rows longer than a block, each its own. The composite's values, and the same bits at any thread count.
  struct Case {
    int64_t B, H, T, C;
  };
  for (const Case& c : {Case{3, 5, 300, 30}, Case{3, 1, 2, 5000}}) {
    CAPTURE(c.C);
    Tensor x = uniform({c.B, c.H, c.T, c.C}, -3, 3, kFloat32, 31);
    x.select(0, 0).select(0, 0).select(0, 1).narrow(0, 4, 1).fill_(NAN);  // a NaN in an unmasked row: all NaN
    Tensor bias = uniform({1, c.H, c.T, c.C}, -1, 1, kFloat32, 32);
    std::vector<double> pad(c.B * c.C);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < c.C; ++j) pad[b * c.C + j] = (b == 1 || j >= c.C - b) ? 1.0 : 0.0;  // b = 0 none, b = 2 two
    Tensor mask = ne(from_vector(pad, {c.B, 1, 1, c.C}, kFloat64), 0.0);
    Tensor want = composite_masked_softmax(x, mask, 0.37, bias);
    std::vector<Tensor> got;
    for (int threads : {1, 2, 3}) {
      const ThreadCount n(threads);
      got.push_back(masked_softmax(x, mask, 0.37, bias));
    }
    // The NaN row is NaN in both (compare() asks NaN for NaN); batch 1's rows all 0.
    CHECK(compare(got[0], want, 2e-6, 2e-6) == "");
    CHECK(std::isnan(got[0].select(0, 0).select(0, 0).select(0, 1).select(0, 0).item()));
    CHECK(sum(abs(got[0].select(0, 1))).item() == 0.0);
    CHECK(bitwise_equal(got[0], got[1]));
    CHECK(bitwise_equal(got[0], got[2]));
  }
}

TEST_CASE("softmax rows: long rows (vector lanes and tail) match the float64 reference") {
  for (int64_t C : {1, 7, 8, 9, 300}) {
    Tensor x = uniform({5, C}, -20, 20, kFloat64, 21);
    Tensor want = exp(sub(x, logsumexp(x, {1}, true)));
    CHECK(compare(softmax(x.to(kFloat32), 1).to(kFloat64), want, 1e-6, 1e-5) == "");
    CHECK(compare(softmax(x, 1), want, 1e-14, 1e-12) == "");
    CHECK(compare(log_softmax(x.to(kFloat32), 1).to(kFloat64), log(want), 1e-5, 1e-5) == "");
  }
}

TEST_CASE("addmm: equals matmul + add, forward and backward, for the Linear and the attention shapes") {
  struct Case {
    Shape a, b, c;
  };
  for (const Case& k : {Case{{2, 5, 4}, {4, 3}, {3}},              // Linear: folded rows, bias (m)
                        Case{{2, 3, 5, 4}, {2, 3, 4, 6}, {2, 3, 5, 6}},  // q · kᵀ + positional term
                        Case{{2, 3, 5, 4}, {2, 3, 4, 6}, {1, 3, 5, 6}},  // term broadcast over the batch
                        Case{{5, 4}, {4, 3}, {}}}) {                    // a 0-d c
    for (DType dt : {kFloat64, kFloat32}) {
      Tensor a = uniform(k.a, -1, 1, kFloat64, 1).to(dt).requires_grad_(true);
      Tensor b = uniform(k.b, -1, 1, kFloat64, 2).to(dt).requires_grad_(true);
      Tensor c = uniform(k.c, -1, 1, kFloat64, 3).to(dt).requires_grad_(true);
      Tensor out = addmm(c, a, b, 0.5);
      Tensor g = uniform(out.shape(), -1, 1, kFloat64, 4).to(dt);
      sum(mul(out, g)).backward();
      TensorList grads{a.grad(), b.grad(), c.grad()};
      for (Tensor* t : {&a, &b, &c}) t->set_grad(Tensor());
      Tensor twin = add(c, mul(matmul(a, b), 0.5));
      sum(mul(twin, g)).backward();
      const double tol = dt == kFloat64 ? 1e-13 : 1e-5;
      CHECK(compare(out, twin, tol, tol) == "");
      CHECK(compare(grads[0], a.grad(), tol, tol) == "");
      CHECK(compare(grads[1], b.grad(), tol, tol) == "");
      CHECK(compare(grads[2], c.grad(), tol, tol) == "");
    }
  }
  Tensor a = uniform({2, 3, 4}, -1, 1, kFloat64, 5).requires_grad_(true);
  Tensor b = uniform({4, 2}, -1, 1, kFloat64, 6).requires_grad_(true);
  Tensor c = uniform({3, 2}, -1, 1, kFloat64, 7).requires_grad_(true);
  auto r = gradcheck([](const TensorList& in) { return addmm(in[2], in[0], in[1], 1.5); }, {a, b, c});
  CHECK_MESSAGE(r.ok, r.message);
  check_throws_with([&] { addmm(zeros({4}, TensorOptions(kFloat64)), a, b); }, "does not broadcast to the product's shape");
  check_throws_with([&] { addmm(c, a, a); }, "inner dimensions differ");
}

TEST_CASE("Adam and AdamW: the fused step gives the composite's bits, float32 and float64, several steps") {
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool decoupled : {false, true}) {
      cpu::AdamStep s;
      s.lr = 3e-3;
      s.beta1 = 0.9;
      s.beta2 = 0.95;
      s.eps = 1e-8;
      s.weight_decay = 0.1;
      s.decoupled = decoupled;
      // 70,000 elements: above the parallel grain, so the threaded loop runs too.
      Tensor p1 = uniform({70000}, -1, 1, kFloat64, 1).to(dt), p2 = p1.clone();
      Tensor m1 = zeros({70000}, TensorOptions(dt)), m2 = m1.clone(), v1 = m1.clone(), v2 = m1.clone();
      for (int t = 1; t <= 4; ++t) {
        Tensor g = uniform({70000}, -1, 1, kFloat64, 10 + t).to(dt);
        s.bias_correction1 = 1 - std::pow(s.beta1, t);
        s.bias_correction2 = 1 - std::pow(s.beta2, t);
        REQUIRE(cpu::adam_fusable(p1, g, m1, v1));
        cpu::adam_step(p1, g, m1, v1, s);
        adam_composite_update(p2, g, m2, v2, s);
      }
      CAPTURE(dtype_name(dt));
      CAPTURE(decoupled);
      CHECK(bitwise_equal(p1, p2));
      CHECK(bitwise_equal(m1, m2));
      CHECK(bitwise_equal(v1, v2));
      CHECK(!bitwise_equal(p1, uniform({70000}, -1, 1, kFloat64, 1).to(dt)));  // the step did move p
    }
  }
  Tensor p = zeros({4, 4}), g = zeros({4, 4});
  CHECK(!cpu::adam_fusable(p.transpose(0, 1), g, zeros({4, 4}), zeros({4, 4})));  // a view: composite path
}

// The multi-tensor step (cpu::adam_steps, what Adam and AdamW run once a step): parameters of sizes
// around its 16,384-element chunks, float32 and float64 together, each with its own hyper-parameters,
// give each parameter the bits of the composite twin (adam_composite_update) at 1, 2 and 3 threads;
// and an Adam whose step threw part-way applies none of its queued updates later.
TEST_CASE("Adam and AdamW: every parameter's step in one region gives each parameter the composite's bits") {
  const int64_t sizes[] = {1, 7, 16383, 16384, 16385, 70000, 300};
  for (int threads : {1, 2, 3}) {
    ThreadCount guard(threads);
    std::vector<cpu::AdamJob> jobs;
    std::vector<Tensor> p_ref, m_ref, v_ref;
    for (size_t i = 0; i < std::size(sizes); ++i) {
      const DType dt = i % 3 == 2 ? kFloat64 : kFloat32;
      cpu::AdamStep s;
      s.lr = 1e-3 * double(i + 1);
      s.beta1 = 0.9, s.beta2 = 0.95, s.eps = 1e-8, s.weight_decay = i % 2 ? 0.1 : 0.0, s.decoupled = i % 2 == 0;
      s.bias_correction1 = 1 - std::pow(s.beta1, 3), s.bias_correction2 = 1 - std::pow(s.beta2, 3);
      const uint64_t seed = 100 + 10 * i;
      Tensor p = uniform({sizes[i]}, -1, 1, kFloat64, seed).to(dt), g = uniform({sizes[i]}, -1, 1, kFloat64, seed + 1).to(dt);
      Tensor m = uniform({sizes[i]}, -1, 1, kFloat64, seed + 2).to(dt), v = uniform({sizes[i]}, 0, 1, kFloat64, seed + 3).to(dt);
      p_ref.push_back(p.clone()), m_ref.push_back(m.clone()), v_ref.push_back(v.clone());
      adam_composite_update(p_ref.back(), g, m_ref.back(), v_ref.back(), s);
      jobs.push_back(cpu::AdamJob{p, g, m, v, s});
    }
    cpu::adam_steps(jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      CAPTURE(threads);
      CAPTURE(sizes[i]);
      CHECK(bitwise_equal(jobs[i].param, p_ref[i]));
      CHECK(bitwise_equal(jobs[i].m, m_ref[i]));
      CHECK(bitwise_equal(jobs[i].v, v_ref[i]));
    }
  }
  // A step that throws part-way (a float32 parameter given a float64 gradient, on the composite path)
  // applies none of its queued updates, then or with the next step: after the next step, the first
  // parameter's exp_avg holds that step's gradient alone, (1 − β1)·g.
  Tensor a = uniform({40}, -1, 1, kFloat32, 1), b = uniform({5, 3}, -1, 1, kFloat32, 2);
  const Tensor a_before = a.clone();
  AdamW opt({a, b}, AdamWOptions().lr(0.01).betas(0.9, 0.95));
  a.set_grad(uniform({40}, -1, 1, kFloat32, 3));
  b.set_grad(uniform({5, 3}, -1, 1, kFloat64, 4));
  CHECK_THROWS(opt.step());
  CHECK(bitwise_equal(a, a_before));
  b.set_grad(Tensor());
  const Tensor g = uniform({40}, -1, 1, kFloat32, 5);
  a.set_grad(g);
  opt.step();
  CHECK(!bitwise_equal(a, a_before));
  Tensor exp_avg;
  for (const auto& [name, t] : opt.state_tensors())
    if (name == "group0.param0.exp_avg") exp_avg = t;
  REQUIRE(exp_avg.defined());
  CHECK(bitwise_equal(exp_avg, mul(g, static_cast<double>(static_cast<float>(1.0 - 0.9)))));
}
