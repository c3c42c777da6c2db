// Op table for the reductions: sum, mean, var, logsumexp, amax/amin, max/min (all elements and along
// a dim with indices), argmax/argmin. References group the elements of a float64 Ref by their
// position in the kept dims with plain loops, then reduce each group with std:: math.
#include <cmath>
#include <limits>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

using Group = std::vector<double>;  // the values one output element reduces, in row-major order

// out[kept idx] = f(group): the reduction of x over dims (empty = all), with or without keepdim.
Ref reduce_ref(const Ref& x, const Shape& dims, bool keepdim, const std::function<double(const Group&)>& f) {
  const int64_t nd = static_cast<int64_t>(x.shape.size());
  std::vector<bool> reduced(nd, dims.empty());
  for (int64_t d : dims)
    if (nd > 0) reduced[d < 0 ? d + nd : d] = true;
  Shape out_shape;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d]) out_shape.push_back(x.shape[d]);
    else if (keepdim) out_shape.push_back(1);
  Ref out(out_shape);
  std::vector<Group> groups(out.numel());
  for (int64_t k = 0; k < x.numel(); ++k) {
    Shape idx = unravel(k, x.shape), out_idx;
    for (int64_t d = 0; d < nd; ++d)
      if (!reduced[d]) out_idx.push_back(idx[d]);
      else if (keepdim) out_idx.push_back(0);
    groups[out.index(out_idx)].push_back(x.v[k]);
  }
  for (int64_t k = 0; k < out.numel(); ++k) out.v[k] = f(groups[k]);
  return out;
}

double ref_sum(const Group& g) { double s = 0; for (double v : g) s += v; return s; }
double ref_mean(const Group& g) { return ref_sum(g) / g.size(); }
double ref_var(const Group& g, int64_t correction) {
  double m = ref_mean(g), ss = 0;
  for (double v : g) ss += (v - m) * (v - m);
  return ss / (static_cast<double>(g.size()) - correction);
}
double ref_logsumexp(const Group& g) {  // inputs are small: the naive formula is exact enough
  double s = 0;
  for (double v : g) s += std::exp(v);
  return std::log(s);
}
double ref_max(const Group& g) { double m = g[0]; for (double v : g) m = std::max(m, v); return m; }
double ref_min(const Group& g) { double m = g[0]; for (double v : g) m = std::min(m, v); return m; }
double ref_argmax(const Group& g) { size_t k = 0; for (size_t i = 1; i < g.size(); ++i) if (g[i] > g[k]) k = i; return k; }
double ref_argmin(const Group& g) { size_t k = 0; for (size_t i = 1; i < g.size(); ++i) if (g[i] < g[k]) k = i; return k; }

// Distinct values 0.1 apart in a scrambled order (7919 is prime, so k -> 7919 k mod n is a
// permutation): no ties, so a finite-difference step never changes which element is the extremum.
Tensor separated(const Shape& shape, DType dt) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>((k * 7919) % n) * 0.1 - 0.05 * static_cast<double>(n);
  return from_vector(v, shape, kFloat64).to(dt);
}

// The dims sets every multi-dim reduction is run over, on a (3, 4, 5) input: one dim, a negative
// dim, two non-adjacent dims (forces the permute-and-copy path), adjacent dims, all dims, explicitly all.
struct DimsCase { Shape shape, dims; };
std::vector<DimsCase> dims_cases() {
  return {{{3, 4, 5}, {1}},        {{3, 4, 5}, {-1}},    {{3, 4, 5}, {0, 2}}, {{3, 4, 5}, {-2, -1}},
          {{3, 4, 5}, {}},         {{3, 4, 5}, {0, 1, 2}}, {{3, 1, 4}, {1}},  {{3, 1, 4}, {0}},
          {{5}, {0}}};
}

std::string case_name(const std::string& op, const Shape& shape, const Shape& dims, bool keepdim) {
  return op + " " + shape_str(shape) + " dims " + shape_str(dims) + (keepdim ? " keepdim" : "");
}

// Bad dims, shared by every op that takes a dims list.
std::vector<BadInput> bad_dims(const std::string& op, const std::function<Tensor(const Tensor&, const Shape&)>& f) {
  Tensor x = zeros({2, 3, 4}, kFloat64);
  return {{"dim out of range", [=] { f(x, {3}); }, "[" + op + "] dim 3 out of range for a tensor of 3 dimensions"},
          {"negative dim out of range", [=] { f(x, {-4}); }, "[" + op + "] dim -4 out of range"},
          {"repeated dim", [=] { f(x, {1, -2}); }, "[" + op + "] dim 1 appears more than once in (1,-2)"}};
}

// One OpCase per (shape, dims, keepdim) for a reduction op(x, dims, keepdim) with reference f.
void run_reduction(const std::string& name, const std::function<Tensor(const Tensor&, const Shape&, bool)>& op,
                   const std::function<double(const Group&)>& f, bool separated_inputs, bool dtype_is_float_only,
                   int64_t min_group = 1) {
  for (const DimsCase& dc : dims_cases())
    for (bool keepdim : {false, true}) {
      Group probe = reduce_ref(Ref(dc.shape), dc.dims, false, [](const Group& g) { return double(g.size()); }).v;
      if (probe[0] < min_group) continue;  // e.g. var with correction 1 of one element: NaN, no gradient
      OpCase c;
      c.name = case_name(name, dc.shape, dc.dims, keepdim);
      c.shapes = {dc.shape};
      if (separated_inputs) c.make_inputs = [shape = dc.shape](DType dt) { return TensorList{separated(shape, dt)}; };
      c.op = [=, dims = dc.dims](const TensorList& in) { return op(in[0], dims, keepdim); };
      c.reference = [=, dims = dc.dims](const std::vector<Ref>& in) { return reduce_ref(in[0], dims, keepdim, f); };
      c.bad_inputs = bad_dims(name, [op](const Tensor& x, const Shape& d) { return op(x, d, false); });
      if (dtype_is_float_only)
        c.bad_inputs.push_back({"int64 input", [op] { op(arange(3.0, kInt64), {}, false); },
                                "[" + name + "] expected a floating tensor"});
      else
        c.bad_inputs.push_back({"bool input", [op] { op(ones({3}, kBool), {}, false); },
                                "[" + name + "] not supported for bool tensors"});
      run_op_case(c);
    }
}

// One OpCase per (shape, dim, keepdim) for an op along one dim; `int_output` ops get no gradcheck.
void run_dim_reduction(const std::string& name, const std::function<Tensor(const Tensor&, int64_t, bool)>& op,
                       const std::function<double(const Group&)>& f, bool int_output) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{3, 4, 5}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, -1},
                                                         {{3, 1, 4}, 1}, {{6}, 0},       {{}, 0}};
  for (const auto& [shape, dim] : cases)
    for (bool keepdim : {false, true}) {
      OpCase c;
      c.name = case_name(name, shape, {dim}, keepdim);
      c.shapes = {shape};
      c.make_inputs = [shape = shape](DType dt) { return TensorList{separated(shape, dt)}; };
      c.op = [=, dim = dim](const TensorList& in) { return op(in[0], dim, keepdim); };
      c.reference = [=, dim = dim](const std::vector<Ref>& in) { return reduce_ref(in[0], {dim}, keepdim, f); };
      c.check_gradient = !int_output;
      Tensor x = zeros({2, 3}, kFloat64);
      c.bad_inputs = {{"dim out of range", [=] { op(x, 2, false); }, "[" + name + "] dim 2 out of range"},
                      {"zero-size dim", [=] { op(zeros({2, 0}), 1, false); },
                       "[" + name + "] cannot reduce over a dimension of size 0: input shape (2,0)"}};
      run_op_case(c);
    }
}

}  // namespace

TEST_CASE("op sum") {
  run_reduction("sum", [](const Tensor& x, const Shape& d, bool k) { return sum(x, d, k); }, ref_sum, false, true);
}

TEST_CASE("op mean") {
  run_reduction("mean", [](const Tensor& x, const Shape& d, bool k) { return mean(x, d, k); }, ref_mean, false, true);
}

TEST_CASE("op var") {
  for (int64_t correction : {0, 1})
    run_reduction("var", [=](const Tensor& x, const Shape& d, bool k) { return var(x, d, correction, k); },
                  [=](const Group& g) { return ref_var(g, correction); }, false, true, correction + 1);
}

TEST_CASE("op logsumexp") {
  run_reduction("logsumexp", [](const Tensor& x, const Shape& d, bool k) { return logsumexp(x, d, k); },
                ref_logsumexp, false, true);
}

TEST_CASE("op amax") {
  run_reduction("amax", [](const Tensor& x, const Shape& d, bool k) { return amax(x, d, k); }, ref_max, true, false);
}

TEST_CASE("op amin") {
  run_reduction("amin", [](const Tensor& x, const Shape& d, bool k) { return amin(x, d, k); }, ref_min, true, false);
}

TEST_CASE("op max all") {
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{7}, Shape{}}) {
    OpCase c;
    c.name = "max all " + shape_str(shape);
    c.shapes = {shape};
    c.make_inputs = [shape](DType dt) { return TensorList{separated(shape, dt)}; };
    c.op = [](const TensorList& in) { return max(in[0]); };
    c.reference = [](const std::vector<Ref>& in) { return reduce_ref(in[0], {}, false, ref_max); };
    c.bad_inputs = {{"empty input", [] { max(zeros({0})); }, "[max] cannot reduce over a dimension of size 0"}};
    run_op_case(c);
  }
}

TEST_CASE("op min all") {
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{7}, Shape{}}) {
    OpCase c;
    c.name = "min all " + shape_str(shape);
    c.shapes = {shape};
    c.make_inputs = [shape](DType dt) { return TensorList{separated(shape, dt)}; };
    c.op = [](const TensorList& in) { return min(in[0]); };
    c.reference = [](const std::vector<Ref>& in) { return reduce_ref(in[0], {}, false, ref_min); };
    c.bad_inputs = {{"bool input", [] { min(ones({2}, kBool)); }, "[min] not supported for bool tensors"}};
    run_op_case(c);
  }
}

TEST_CASE("op max dim values") {
  run_dim_reduction("max", [](const Tensor& x, int64_t d, bool k) { return std::get<0>(max(x, d, k)); }, ref_max, false);
}
TEST_CASE("op max dim indices") {
  run_dim_reduction("max", [](const Tensor& x, int64_t d, bool k) { return std::get<1>(max(x, d, k)); }, ref_argmax, true);
}
TEST_CASE("op min dim values") {
  run_dim_reduction("min", [](const Tensor& x, int64_t d, bool k) { return std::get<0>(min(x, d, k)); }, ref_min, false);
}
TEST_CASE("op min dim indices") {
  run_dim_reduction("min", [](const Tensor& x, int64_t d, bool k) { return std::get<1>(min(x, d, k)); }, ref_argmin, true);
}
TEST_CASE("op argmax") {
  run_dim_reduction("argmax", [](const Tensor& x, int64_t d, bool k) { return argmax(x, d, k); }, ref_argmax, true);
}
TEST_CASE("op argmin") {
  run_dim_reduction("argmin", [](const Tensor& x, int64_t d, bool k) { return argmin(x, d, k); }, ref_argmin, true);
}

// ---- behaviour the table cannot express ---------------------------------------------------------

TEST_CASE("reduce: max/min along a dim return int64 indices of the first extremum, gradient to it") {
  // Row 0 ties at columns 1 and 3, row 1 at columns 0 and 2.
  Tensor x = from_vector<double>({1, 5, 2, 5, 3, 0, 3, 0}, {2, 4}).requires_grad_();
  auto [values, indices] = max(x, 1);
  CHECK(indices.dtype() == kInt64);
  CHECK_FALSE(indices.requires_grad());
  CHECK(values.to_vector<double>() == std::vector<double>{5, 3});
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  values.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0});
  auto [mn, mi] = min(x, 1, /*keepdim=*/true);
  CHECK(mi.shape() == Shape{2, 1});
  CHECK(mi.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(argmin(x, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1});
}

TEST_CASE("reduce: amax, amin and max() split the gradient evenly among ties, as PyTorch") {
  Tensor x = from_vector<double>({1, 5, 2, 5, 5, 0}, {2, 3}).requires_grad_();
  amax(x, {1}).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 0.5, 0.5, 0});
  Tensor y = from_vector<double>({1, 5, 2, 5, 5, 0}, {2, 3}).requires_grad_();
  max(y).backward();
  std::vector<double> third(6, 0.0);
  third[1] = third[3] = third[4] = 1.0 / 3;
  CHECK_CLOSE(y.grad(), from_vector(third, {2, 3}, kFloat64), 1e-15, 0);
  Tensor z = from_vector<double>({0, -1, -1}, {3}).requires_grad_();
  amin(z, {0}).backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5});
}

TEST_CASE("reduce: max and min propagate NaN, and work on int64 tensors") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector<double>({1, nan, 3}, {3});
  CHECK(std::isnan(max(x).item()));
  CHECK(std::isnan(amin(x, {0}).item()));
  CHECK(argmax(x, 0).item() == 1);
  Tensor i = from_vector<int64_t>({4, -2, 9, 9}, {4}, kInt64);
  CHECK(max(i).dtype() == kInt64);
  CHECK(max(i).item() == 9);
  CHECK(min(i).item() == -2);
  CHECK(argmax(i, 0).item() == 2);
}

TEST_CASE("reduce: logsumexp is stable at large and infinite inputs") {
  Tensor big = from_vector<double>({1000, 1000, -1000}, {3});
  CHECK(logsumexp(big, {0}).item() == doctest::Approx(1000 + std::log(2.0)));
  Tensor f32 = from_vector<float>({1000, 1000}, {2}, kFloat32);
  CHECK(std::isfinite(logsumexp(f32, {0}).item()));
  double inf = std::numeric_limits<double>::infinity();
  Tensor neg_inf = from_vector<double>({-inf, -inf}, {2});
  CHECK(logsumexp(neg_inf, {0}).item() == -inf);
  Tensor empty_rows = zeros({2, 0}, kFloat64);
  CHECK(logsumexp(empty_rows, {1}).to_vector<double>() == std::vector<double>{-inf, -inf});
}

TEST_CASE("reduce: var of one element with correction 1 is NaN — reductions of a scalar") {
  CHECK(std::isnan(var(from_vector<double>({3}, {1}), {}).item()));
  CHECK(var(from_vector<double>({3}, {1}), {}, 0).item() == 0);
  Tensor s = scalar_tensor(2.5, kFloat64);
  CHECK(amax(s, {0}).item() == 2.5);
  CHECK(std::get<1>(max(s, -1)).item() == 0);
  CHECK(logsumexp(s, {}).item() == doctest::Approx(2.5));
}

TEST_CASE("reduce: empty inputs — an empty kept dim gives an empty result, an empty reduced dim the identity") {
  // (5, 0) over dim 0: no output element (the column loop steps by inner = 0: nothing may divide by it).
  CHECK(sum(zeros({5, 0}), {0}).shape() == Shape{0});
  CHECK(mean(zeros({5, 0}), {0}, true).shape() == Shape{1, 0});
  CHECK(sum(zeros({2, 5, 0}), {1}).shape() == Shape{2, 0});
  // (0, 5) over dim 0: five sums of nothing (0) and five means of nothing (NaN), as PyTorch.
  CHECK(sum(zeros({0, 5}), {0}).to_vector<float>() == std::vector<float>(5, 0.0f));
  CHECK(std::isnan(mean(zeros({0, 5}), {0}).to_vector<float>()[0]));
}

TEST_CASE("reduce: large inputs (the parallel path) match the reference, run after run") {
  // Big enough for the kernels to spread columns over threads. Each column is reduced by one thread
  // in a fixed order, so repeated runs agree bit for bit.
  Tensor x = uniform({64, 1000}, -3, 3, kFloat64, 11);
  Ref rx(x);
  for (int64_t dim : {0, 1}) {
    CHECK_CLOSE(var(x, {dim}), reduce_ref(rx, {dim}, false, [](const Group& g) { return ref_var(g, 1); }).tensor(),
                1e-12, 1e-10);
    CHECK_CLOSE(logsumexp(x, {dim}), reduce_ref(rx, {dim}, false, ref_logsumexp).tensor(), 1e-12, 1e-10);
    CHECK_CLOSE(argmax(x, dim), reduce_ref(rx, {dim}, false, ref_argmax).tensor(), 0, 0);
    CHECK(var(x, {dim}).to_vector<double>() == var(x, {dim}).to_vector<double>());
  }
}

// A bias gradient's sum, (R, N) over dim 0: one output row (outer = 1), its columns shared out in
// parts; each column is still one double chain over the rows in order, so the result is that loop's
// bits at any thread count.
TEST_CASE("reduce: a sum over the rows of one matrix is each column's chain in row order, at 1, 2 and 3 threads") {
  const int64_t R = 3000, N = 700;  // 700 columns: cut in two parts at 2 and 3 threads, whole at 1
  const Tensor x = uniform({R, N}, -3, 3, kFloat32, 29);
  const std::vector<float> xv = x.to_vector<float>();
  std::vector<float> expected(N);
  for (int64_t i = 0; i < N; ++i) {
    double acc = 0;
    for (int64_t r = 0; r < R; ++r) acc += xv[r * N + i];
    expected[i] = static_cast<float>(acc);
  }
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    CHECK_MESSAGE(sum(x, {0}).to_vector<float>() == expected, threads << " threads");
  }
  omp_set_num_threads(before);
#else
  CHECK(sum(x, {0}).to_vector<float>() == expected);
#endif
}
