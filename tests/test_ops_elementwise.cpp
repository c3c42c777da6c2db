// Op table for the elementwise family: every unary op of core/base/unary_ops.def, pow, binary
// arithmetic with broadcasting and scalars, comparisons. References are std:: math on doubles.
#include <cmath>
#include <map>

#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// The naive reference of each unary op, written independently of core/base/functors.h.
const std::map<std::string, std::function<double(double)>>& unary_references() {
  static const std::map<std::string, std::function<double(double)>> refs = {
      {"neg", [](double x) { return -x; }},
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"relu", [](double x) { return x > 0 ? x : 0.0; }},
      {"silu", [](double x) { return x / (1.0 + std::exp(-x)); }},
      {"gelu_erf", [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu_tanh",
       [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"softplus", [](double x) { return std::log(1.0 + std::exp(x)); }},
  };
  return refs;
}

Ref map_ref(const Ref& a, const std::function<double(double)>& f) {
  Ref out(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.v[i] = f(a.v[i]);
  return out;
}

// Reference broadcasting: out[idx] = f(a[idx broadcast], b[idx broadcast]).
Ref broadcast_ref(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  size_t n = std::max(a.shape.size(), b.shape.size());
  Shape shape(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i + a.shape.size() >= n ? a.shape[i + a.shape.size() - n] : 1;
    int64_t db = i + b.shape.size() >= n ? b.shape[i + b.shape.size() - n] : 1;
    shape[i] = std::max(da, db);
  }
  Ref out(shape);
  auto pick = [&](const Ref& r, const Shape& idx) {
    Shape sub(r.shape.size());
    for (size_t d = 0; d < r.shape.size(); ++d) sub[d] = r.shape[d] == 1 ? 0 : idx[n - r.shape.size() + d];
    return r.at(sub);
  };
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = unravel(i, shape);
    out.v[i] = f(pick(a, idx), pick(b, idx));
  }
  return out;
}

OpCase unary_case(const std::string& name, Tensor (*op)(const Tensor&)) {
  OpCase c;
  c.name = name;
  c.shapes = {{3, 4, 5}};
  // Keep inputs in the domain and away from kinks (relu/abs at 0) so finite differences are exact.
  if (name == "log" || name == "sqrt" || name == "rsqrt") { c.lo = 0.5; c.hi = 3.0; }
  c.op = [op](const TensorList& in) { return op(in[0]); };
  auto f = unary_references().at(name);
  c.reference = [f](const std::vector<Ref>& in) { return map_ref(in[0], f); };
  if (name == "relu" || name == "abs")
    c.make_inputs = [](DType dt) {  // |x| >= 0.1: no element near the kink
      Tensor u = uniform({3, 4, 5}, 0.1, 2.0, kFloat64, 7);
      Tensor sign = uniform({3, 4, 5}, -1.0, 1.0, kFloat64, 8);
      return TensorList{where(gt(sign, 0.0), u, neg(u)).to(dt)};
    };
  c.bad_inputs = {{"int64 input", [op] { op(arange(3.0, kInt64)); }, std::string("[") + name + "] expected a floating tensor"}};
  return c;
}

}  // namespace

// One TEST_CASE per unary op, generated from the same X-macro list as the ops themselves.
#define RG_UNARY(name, Functor) \
  TEST_CASE("op " #name) { run_op_case(unary_case(#name, static_cast<Tensor (*)(const Tensor&)>(&relgrad::name))); }
#include "core/base/unary_ops.def"
#undef RG_UNARY

TEST_CASE("op gelu approximate names") {
  Tensor x = uniform({7}, -3, 3);
  CHECK_CLOSE(gelu(x), gelu_erf(x), 0, 0);
  CHECK_CLOSE(gelu(x, "tanh"), gelu_tanh(x), 0, 0);
  check_throws_with([&] { gelu(x, "fast"); }, "[gelu] approximate must be 'none' or 'tanh'");
}

TEST_CASE("op pow") {
  for (double p : {2.0, 3.0, 0.5, -1.5, 0.0}) {
    OpCase c;
    c.name = "pow " + std::to_string(p);
    c.shapes = {{4, 3}};
    c.lo = 0.5;
    c.hi = 2.5;
    c.op = [p](const TensorList& in) { return pow(in[0], p); };
    c.reference = [p](const std::vector<Ref>& in) { return map_ref(in[0], [p](double x) { return std::pow(x, p); }); };
    run_op_case(c);
  }
}

namespace {
OpCase binary_case(const std::string& name, Tensor (*op)(const Tensor&, const Tensor&),
                   std::function<double(double, double)> f, Shape sa, Shape sb) {
  OpCase c;
  c.name = name + " " + shape_str(sa) + " " + shape_str(sb);
  c.shapes = {sa, sb};
  if (name == "div") { c.lo = 0.5; c.hi = 2.0; }  // denominators away from 0
  c.op = [op](const TensorList& in) { return op(in[0], in[1]); };
  c.reference = [f](const std::vector<Ref>& in) { return broadcast_ref(in[0], in[1], f); };
  c.bad_inputs = {
      {"shapes that do not broadcast", [op] { op(zeros({2, 3}), zeros({4, 3})); }, "cannot be broadcast: (2,3) and (4,3)"},
      {"dtype mismatch", [op] { op(zeros({2}), zeros({2}, kFloat64)); }, "dtypes differ: float32 (2) and float64 (2)"},
  };
  return c;
}
const std::vector<std::pair<Shape, Shape>> kBroadcastShapes = {
    {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1, 5}, {4, 1}}, {{1}, {2, 3}}, {{}, {2, 3}}, {{2, 3}, {}}};
}  // namespace

TEST_CASE("op add") {
  for (auto& [a, b] : kBroadcastShapes) run_op_case(binary_case("add", &relgrad::add, std::plus<double>(), a, b));
}
TEST_CASE("op sub") {
  for (auto& [a, b] : kBroadcastShapes) run_op_case(binary_case("sub", &relgrad::sub, std::minus<double>(), a, b));
}
TEST_CASE("op mul") {
  for (auto& [a, b] : kBroadcastShapes) run_op_case(binary_case("mul", &relgrad::mul, std::multiplies<double>(), a, b));
}
TEST_CASE("op div") {
  for (auto& [a, b] : kBroadcastShapes) run_op_case(binary_case("div", &relgrad::div, std::divides<double>(), a, b));
}

TEST_CASE("op scalar operands and operators") {
  OpCase c;
  c.name = "scalar mix";
  c.shapes = {{2, 3}};
  c.lo = 0.5;
  c.op = [](const TensorList& in) { return (2.0 - in[0]) * 3.0 / (1.0 + in[0]) + in[0] / 4.0 - 1.0 + (1.0 / in[0]) - (-in[0]); };
  c.reference = [](const std::vector<Ref>& in) {
    return map_ref(in[0], [](double x) { return (2.0 - x) * 3.0 / (1.0 + x) + x / 4.0 - 1.0 + 1.0 / x + x; });
  };
  run_op_case(c);
}

TEST_CASE("op comparisons give bool masks") {
  Tensor a = from_vector<double>({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector<double>({2, 2}, {2});
  CHECK(eq(a, b).dtype() == kBool);
  CHECK(eq(a, b).to_vector<bool>() == std::vector<bool>{false, true, false, false});
  CHECK(ne(a, b).to_vector<bool>() == std::vector<bool>{true, false, true, true});
  CHECK(lt(a, b).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(le(a, b).to_vector<bool>() == std::vector<bool>{true, true, false, false});
  CHECK(gt(a, 2.5).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  CHECK(ge(a, 3.0).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  // comparisons record no graph
  Tensor x = a.clone().requires_grad_();
  CHECK_FALSE(gt(x, 0.0).requires_grad());
  check_throws_with([] { lt(zeros({2}), zeros({3})); }, "[lt] shapes cannot be broadcast: (2) and (3)");
  check_throws_with([] { add(from_vector<bool>({true}, {1}), from_vector<bool>({true}, {1})); },
                    "[add] arithmetic on bool tensors is not supported");
}

TEST_CASE("op unary values at special points") {
  // sigmoid must not overflow for large |x|; relu'(0) = 0 and abs'(0) = 0 as in PyTorch.
  Tensor x = from_vector<double>({-1000, 0, 1000}, {3});
  CHECK(sigmoid(x).to_vector<double>() == std::vector<double>{0.0, 0.5, 1.0});
  Tensor z = zeros({2}, kFloat64).requires_grad_();
  (relu(z) + abs(z)).sum().backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{0.0, 0.0});
}
