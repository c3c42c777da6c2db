// GPU parity of the reduction, softmax, normalisation and where families (cuda/reduce.cu,
// cuda/softmax.cu, cuda/norm.cu) beyond the op tables: shapes that take every launch path of the
// kernels (short rows, rows longer than one block's chunk, columns, long columns, permuted copies),
// odd and empty sizes, non-contiguous inputs, fully masked rows, ignored targets, both float dtypes,
// bitwise determinism and the errors for mixed devices. Every GPU case starts with have_gpu(), so
// without a GPU it is reported as skipped; the first case runs everywhere.
#include <functional>
#include <string>
#include <vector>

#include "cuda/norm.h"
#include "cuda/reduce.h"
#include "cuda/softmax.h"
#include "cuda_testing.h"

using namespace relgrad;
using relgrad::testing::bitwise_equal;
using relgrad::testing::check_cuda_parity;
using relgrad::testing::check_throws_with;
using relgrad::testing::CudaParityCase;
using relgrad::testing::have_gpu;
using relgrad::testing::uniform;

namespace {

using Op = std::function<TensorList(const TensorList&)>;

// One parity case per float dtype: `make(dt)` builds the CPU inputs.
void parity_both(const std::string& name, const std::function<TensorList(DType)>& make, const Op& op,
                 bool backward = true) {
  for (DType dt : {kFloat64, kFloat32}) {
    CudaParityCase c;
    c.name = name + (dt == kFloat64 ? " (float64)" : " (float32)");
    c.inputs = make(dt);
    c.op = op;
    c.backward = backward;
    CHECK(check_cuda_parity(c));
  }
}

std::function<TensorList(DType)> one_input(const Shape& shape, double lo = -2, double hi = 2, uint64_t seed = 1) {
  return [=](DType dt) { return TensorList{uniform(shape, lo, hi, kFloat64, seed).to(dt)}; };
}

// Small integers stored as floats: many exact ties, for the extremum tie rules.
Tensor with_ties(const Shape& shape, DType dt, uint64_t seed) {
  Generator g(seed);
  return randint(-3, 3, shape, TensorOptions(kInt64), &g).to(dt);
}

// int64 class targets in [0, C), with about a fifth set to ignore_index.
Tensor targets(const Shape& shape, int64_t C, int64_t ignore_index, uint64_t seed) {
  Generator g(seed);
  Tensor t = randint(0, C, shape, TensorOptions(kInt64), &g);
  Tensor drop = lt(uniform(shape, 0, 1, kFloat64, seed + 1), 0.2);
  return where(drop, full(shape, static_cast<double>(ignore_index), TensorOptions(kInt64)), t);
}

Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda()); }

}  // namespace

TEST_CASE("cuda reduce kernels: the raw entry points refuse a missing or unknown device") {
  // Runs everywhere: with a GPU, device 999 does not exist; without one, every entry point says why.
  const int device = cuda_available() ? 999 : 0;
  const std::string expected = cuda_available()   ? "does not exist"
                               : cuda_built()     ? "no CUDA device available"
                                                  : "built without CUDA support";
  check_throws_with([&] { cuda::reduce_sum(kFloat32, nullptr, nullptr, 1, 1, 1, 1.0, device); }, expected);
  check_throws_with([&] { cuda::reduce_extremum(true, kFloat32, nullptr, nullptr, nullptr, 1, 1, 1, device); },
                    expected);
  check_throws_with([&] { cuda::softmax_forward(kFloat32, nullptr, nullptr, SoftmaxLayout{}, device); }, expected);
  check_throws_with(
      [&] { cuda::cross_entropy_forward(kFloat32, nullptr, nullptr, nullptr, nullptr, CrossEntropyLayout{}, device); },
      expected);
  check_throws_with([&] { cuda::norm_forward(kFloat32, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 1e-5,
                                             device); },
                    expected);
  CHECK_THROWS_AS(cuda::where_select(kFloat32, {1}, nullptr, nullptr, {0}, nullptr, {0}, nullptr, {0}, device),
                  DeviceError);
}

TEST_CASE("cuda reduce: sum and mean over every launch path") {
  if (!have_gpu()) return;
  struct Case {
    std::string what;
    Shape shape;
    Shape dims;
  };
  const std::vector<Case> cases = {
      {"all of 100000 (two-stage rows)", {100000}, {}},
      {"one row of 4097", {4097}, {0}},
      {"3 rows of 100000", {3, 100000}, {1}},
      {"1000 rows of 7", {1000, 7}, {1}},
      {"rows of 1", {5, 1}, {1}},
      {"columns, R = 257 > one chunk", {257, 300}, {0}},
      {"columns, R = 5000, inner 3", {2, 5000, 3}, {1}},
      {"columns, R = 100", {100, 33}, {0}},
      {"non-adjacent dims (permuted copy)", {4, 5, 6}, {0, 2}},
      {"last two dims", {7, 9, 11}, {1, 2}},
      {"a 0-d tensor", {}, {}},
      {"empty reduced dim", {0, 5}, {0}},
      {"empty kept dim", {5, 0}, {0}},
  };
  for (const Case& c : cases)
    for (bool keepdim : {false, true}) {
      const std::string k = keepdim ? " keepdim" : "";
      parity_both("sum " + c.what + k, one_input(c.shape),
                  [=](const TensorList& in) { return TensorList{sum(in[0], c.dims, keepdim)}; });
      parity_both("mean " + c.what + k, one_input(c.shape),
                  [=](const TensorList& in) { return TensorList{mean(in[0], c.dims, keepdim)}; });
    }
  // Non-contiguous inputs: a transposed view, and every other element.
  parity_both("sum of a transposed view", one_input({6, 5, 300}), [](const TensorList& in) {
    return TensorList{sum(in[0].transpose(0, 2), {1})};
  });
  parity_both("mean of a strided slice", one_input({40, 9000}), [](const TensorList& in) {
    return TensorList{mean(in[0].slice(1, 0, 9000, 2), {1}, true)};
  });
}

TEST_CASE("cuda reduce: var and logsumexp, rows and columns, with infinities") {
  if (!have_gpu()) return;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{100000}, {0}}, {{3, 4097}, {1}}, {{257, 300}, {0}}, {{2, 5000, 3}, {1}}, {{4, 5, 6}, {0, 2}}, {{6, 1}, {1}}};
  for (const auto& [shape, dims] : cases) {
    const std::string name = shape_str(shape) + " over " + shape_str(dims);
    for (int64_t correction : {0, 1})
      parity_both("var " + name + " correction " + std::to_string(correction), one_input(shape, 3, 5),
                  [dims = dims, correction](const TensorList& in) {
                    return TensorList{var(in[0], dims, correction, true)};
                  });
    parity_both("logsumexp " + name, one_input(shape, -20, 20),
                [dims = dims](const TensorList& in) { return TensorList{logsumexp(in[0], dims)}; });
  }
  // var of one element with correction 1 divides by zero (NaN); logsumexp of -inf rows is -inf, of a
  // row holding +inf is +inf (no backward: the gradients there are NaN on both devices by design).
  parity_both("var of one element", one_input({4, 1}),
              [](const TensorList& in) { return TensorList{var(in[0], {1})}; }, false);
  parity_both(
      "logsumexp with infinities",
      [](DType dt) {
        return TensorList{from_vector<double>({-INFINITY, -INFINITY, -INFINITY, 1, INFINITY, 2, 3, 4, 5}, {3, 3}).to(dt)};
      },
      [](const TensorList& in) { return TensorList{logsumexp(in[0], {1})}; }, false);
}

TEST_CASE("cuda reduce: max, min, amax, amin, argmax, argmin pick the first extremum, NaN first") {
  if (!have_gpu()) return;
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{100000}, 0}, {{3, 9000}, 1}, {{1000, 7}, 1}, {{300, 257}, 0}, {{2, 5000, 3}, 1}, {{5}, 0}};
  for (const auto& [shape, dim] : cases) {
    const std::string name = shape_str(shape) + " dim " + std::to_string(dim);
    auto ties = [shape = shape](DType dt) { return TensorList{with_ties(shape, dt, 3)}; };
    parity_both("max/min with indices " + name, ties, [dim = dim](const TensorList& in) {
      auto [vmax, imax] = max(in[0], dim);
      auto [vmin, imin] = min(in[0], dim, true);
      return TensorList{vmax, imax, vmin, imin, argmax(in[0], dim), argmin(in[0], dim, true)};
    });
    parity_both("amax/amin (tied gradients) " + name, ties, [dim = dim](const TensorList& in) {
      return TensorList{amax(in[0], {dim}), amin(in[0], {dim}, true), max(in[0]), min(in[0])};
    });
  }
  parity_both("amax over two non-adjacent dims", one_input({4, 5, 6}),
              [](const TensorList& in) { return TensorList{amax(in[0], {0, 2}), amin(in[0].transpose(0, 1), {1, 2})}; });
  // NaN wins, at its first position; no backward (the gradient of a NaN maximum is not meaningful).
  parity_both(
      "NaN",
      [](DType dt) {
        return TensorList{from_vector<double>({1, NAN, 3, NAN, 2, 5, 4, 0, 5, 5, NAN, -1}, {3, 4}).to(dt)};
      },
      [](const TensorList& in) {
        auto [v, i] = max(in[0], 1);
        return TensorList{v, i, argmin(in[0], 1), amax(in[0], {0}), max(in[0])};
      },
      false);
  // int64 inputs: values and indices, no gradient.
  CudaParityCase c;
  c.name = "int64 max/min";
  Generator g(4);
  c.inputs = {randint(-1000, 1000, {7, 3000}, TensorOptions(kInt64), &g)};
  c.op = [](const TensorList& in) {
    auto [v, i] = max(in[0], 1);
    return TensorList{v, i, argmin(in[0], 0), amax(in[0], {0, 1}), min(in[0])};
  };
  c.backward = false;
  CHECK(check_cuda_parity(c));
}

TEST_CASE("cuda softmax: softmax and log_softmax over rows of every length and over other dims") {
  if (!have_gpu()) return;
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{4, 1}, 1},     {{3, 7}, -1},   {{5, 257}, 1},  {{2, 4097}, 1}, {{2, 100000}, 1},
      {{2000, 10}, 1}, {{50, 33}, 0},  {{4, 300, 5}, 1}, {{7}, 0},      {{0, 5}, 1}};
  for (const auto& [shape, dim] : cases) {
    const std::string name = shape_str(shape) + " dim " + std::to_string(dim);
    parity_both("softmax " + name, one_input(shape, -8, 8),
                [dim = dim](const TensorList& in) { return TensorList{softmax(in[0], dim)}; });
    parity_both("log_softmax " + name, one_input(shape, -8, 8),
                [dim = dim](const TensorList& in) { return TensorList{log_softmax(in[0], dim)}; });
  }
  parity_both("softmax of a transposed view", one_input({37, 6, 3}), [](const TensorList& in) {
    return TensorList{softmax(in[0].transpose(0, 2), -1), log_softmax(in[0].slice(0, 0, 37, 3), 0)};
  });
  parity_both("softmax of large logits", one_input({3, 50}, 900, 1000),
              [](const TensorList& in) { return TensorList{softmax(in[0], 1), log_softmax(in[0], 1)}; });
}

TEST_CASE("cuda softmax: masked_softmax with broadcast bias and mask, fully masked rows give zeros") {
  if (!have_gpu()) return;
  for (int64_t C : {1, 37, 1000}) {
    auto make = [C](DType dt) {
      Tensor u = uniform({2, 1, 5, C}, 0, 1, kFloat64, 7);
      u.narrow(2, 1, 1).fill_(2.0);  // query 1 of every batch: every key masked
      Tensor mask = gt(u, 0.7);
      return TensorList{uniform({2, 3, 5, C}, -3, 3, kFloat64, 8).to(dt), uniform({3, 5, C}, -1, 1, kFloat64, 9).to(dt),
                        mask};
    };
    const std::string name = "C = " + std::to_string(C);
    parity_both("masked_softmax " + name, make, [](const TensorList& in) {
      return TensorList{masked_softmax(in[0], in[2], 0.125, in[1])};
    });
    parity_both("masked_softmax, mask only, non-contiguous x " + name, make, [](const TensorList& in) {
      return TensorList{masked_softmax(in[0].transpose(0, 1), in[2].transpose(0, 1), 1.0)};
    });
    parity_both("masked_softmax, bias only " + name, make,
                [](const TensorList& in) { return TensorList{masked_softmax(in[0], Tensor(), 0.5, in[1])}; });
  }
  // The fully masked rows really are zero on the GPU (parity alone would accept a shared mistake).
  Tensor x = on_gpu(uniform({2, 3, 8}, -1, 1));
  Tensor mask = on_gpu(gt(uniform({2, 1, 8}, 0, 1, kFloat64, 3), 2.0));  // all false
  mask.narrow(0, 1, 1).fill_(1.0);                                         // batch 1: all masked
  Tensor y = masked_softmax(x, mask).to(Device::cpu());
  CHECK(sum(abs(y.narrow(0, 1, 1))).item() == 0.0);
  CHECK(std::abs(sum(y.narrow(0, 0, 1)).item() - 3.0) < 1e-12);
}

TEST_CASE("cuda softmax: cross_entropy with ignore_index, label smoothing and every reduction") {
  if (!have_gpu()) return;
  struct Case {
    std::string what;
    Shape logits, target;
  };
  const std::vector<Case> cases = {{"(N, C)", {64, 10}, {64}},
                                   {"(N, C) vocab 50000", {3, 50000}, {3}},
                                   {"(N, C, D)", {4, 7, 33}, {4, 33}},
                                   {"(N, C, d1, d2), C = 300", {2, 300, 3, 2}, {2, 3, 2}},
                                   {"(C) unbatched", {11}, {}}};
  for (const Case& c : cases)
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
      for (double eps : {0.0, 0.1}) {
        CrossEntropyOptions o = CrossEntropyOptions().set_reduction(r).set_label_smoothing(eps);
        const int64_t C = c.logits.size() == 1 ? c.logits[0] : c.logits[1];
        auto make = [c, C](DType dt) {
          return TensorList{uniform(c.logits, -4, 4, kFloat64, 11).to(dt), targets(c.target, C, -100, 12)};
        };
        parity_both("cross_entropy " + c.what + " reduction " + std::to_string(static_cast<int>(r)) + " eps " +
                        std::to_string(eps),
                    make, [o](const TensorList& in) { return TensorList{cross_entropy(in[0], in[1], o)}; });
      }
  // Every target ignored: the mean is NaN, the gradient zero, on both devices.
  parity_both(
      "cross_entropy, all ignored",
      [](DType dt) { return TensorList{uniform({3, 4}, -1, 1).to(dt), full({3}, 1.0, TensorOptions(kInt64))}; },
      [](const TensorList& in) {
        return TensorList{cross_entropy(in[0], in[1], CrossEntropyOptions().set_ignore_index(1))};
      });
  // A bad target on the GPU is caught before any kernel, with the CPU's message.
  Tensor logits = on_gpu(uniform({2, 3}, -1, 1));
  check_throws_with([&] { cross_entropy(logits, on_gpu(from_vector<int64_t>({0, 3}, {2}))); }, "target 3 is out of range");
}

TEST_CASE("cuda norm: layer_norm and rms_norm with weight and bias gradients") {
  if (!have_gpu()) return;
  const std::vector<std::pair<Shape, Shape>> cases = {{{4, 7}, {7}},        {{3, 1000}, {1000}}, {{2, 3, 4097}, {4097}},
                                                      {{5000, 64}, {64}},   {{300, 1}, {1}},     {{2, 6, 5, 4}, {5, 4}},
                                                      {{0, 8}, {8}}};
  for (const auto& [shape, ns] : cases) {
    const std::string name = shape_str(shape) + " over " + shape_str(ns);
    auto make = [shape = shape, ns = ns](DType dt) {
      return TensorList{uniform(shape, -3, 5, kFloat64, 21).to(dt), uniform(ns, 0.5, 1.5, kFloat64, 22).to(dt),
                        uniform(ns, -1, 1, kFloat64, 23).to(dt)};
    };
    parity_both("layer_norm affine " + name, make, [ns = ns](const TensorList& in) {
      return TensorList{layer_norm(in[0], ns, in[1], in[2], 1e-5)};
    });
    parity_both("layer_norm plain " + name, make,
                [ns = ns](const TensorList& in) { return TensorList{layer_norm(in[0], ns)}; });
    parity_both("rms_norm weight " + name, make,
                [ns = ns](const TensorList& in) { return TensorList{rms_norm(in[0], ns, in[1])}; });
  }
  parity_both(
      "layer_norm of a transposed view",
      [](DType dt) {
        return TensorList{uniform({9, 64}, -2, 2).to(dt), uniform({9}, 0.5, 1.5, kFloat64, 2).to(dt),
                          uniform({9}, -1, 1, kFloat64, 3).to(dt)};
      },
      [](const TensorList& in) { return TensorList{layer_norm(in[0].t(), {9}, in[1], in[2])}; });  // (64, 9) view
  parity_both(
      "rms_norm of a strided slice",
      [](DType dt) { return TensorList{uniform({40, 200}, -2, 2).to(dt), uniform({100}, 0.5, 1.5).to(dt)}; },
      [](const TensorList& in) { return TensorList{rms_norm(in[0].slice(1, 0, 200, 2), {100}, in[1], 1e-6)}; });
}

TEST_CASE("cuda where: where and masked_fill with broadcasting, every dtype") {
  if (!have_gpu()) return;
  auto make = [](DType dt) {
    return TensorList{uniform({4, 1, 6}, -1, 1, kFloat64, 31).to(dt), uniform({3, 6}, -1, 1, kFloat64, 32).to(dt),
                      gt(uniform({4, 3, 1}, 0, 1, kFloat64, 33), 0.4)};
  };
  parity_both("where broadcast", make, [](const TensorList& in) { return TensorList{where(in[2], in[0], in[1])}; });
  parity_both("where with a scalar and a transposed view", make, [](const TensorList& in) {
    Tensor cond = in[2].transpose(0, 1);  // (3, 4, 1)
    return TensorList{where(cond, in[0].transpose(0, 1), scalar_tensor(0.5, TensorOptions(in[0].dtype()).device(in[0].device())))};
  });
  parity_both("masked_fill", make, [](const TensorList& in) {
    return TensorList{masked_fill(in[1], in[2], -1e9), masked_fill(in[0], in[2].slice(1, 0, 3, 2), 7.0)};
  });
  parity_both(
      "where of a large tensor",
      [](DType dt) { return TensorList{uniform({300, 1000}, -1, 1).to(dt), uniform({1000}, -1, 1, kFloat64, 2).to(dt)}; },
      [](const TensorList& in) { return TensorList{where(gt(in[0], 0.0), in[0], in[1])}; });
  // int64 and bool operands (no gradient).
  for (DType dt : {kInt64, kBool}) {
    CudaParityCase c;
    c.name = std::string("where of ") + dtype_name(dt);
    Generator g(5);
    c.inputs = {randint(0, 2, {5, 7}, TensorOptions(kInt64), &g).to(dt), randint(0, 2, {7}, TensorOptions(kInt64), &g).to(dt),
                gt(uniform({5, 1}, 0, 1), 0.5)};
    c.op = [](const TensorList& in) { return TensorList{where(in[2], in[0], in[1]), masked_fill(in[0], in[2], 1.0)}; };
    c.backward = false;
    CHECK(check_cuda_parity(c));
  }
}

TEST_CASE("cuda reduce: results are bitwise identical run after run") {
  if (!have_gpu()) return;
  Tensor x = on_gpu(uniform({3, 100000}, -1, 1, kFloat32, 41));
  Tensor cols = on_gpu(uniform({5000, 64}, -1, 1, kFloat32, 42));
  Tensor w0 = on_gpu(uniform({64}, 0.5, 1.5, kFloat32, 43));
  Tensor target = on_gpu(targets({3}, 100000, -100, 44));
  auto run = [&] {
    TensorList out{sum(x), sum(x, {1}), mean(cols, {0}), var(cols, {0}), logsumexp(x, {1}), softmax(x, 1),
                   cross_entropy(x, target)};
    Tensor w = w0.clone().requires_grad_();  // a fresh leaf, so .grad holds this run's gradient only
    Tensor y = layer_norm(cols, {64}, w);
    sum(mul(y, cols)).backward();
    out.push_back(w.grad().clone());
    return out;
  };
  TensorList a = run(), b = run();
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("output ", k);
    CHECK(bitwise_equal(a[k].to(Device::cpu()), b[k].to(Device::cpu())));
  }
}

TEST_CASE("cuda reduce: mixed devices are refused, naming the op") {
  if (!have_gpu()) return;
  Tensor xg = on_gpu(uniform({3, 4}, -1, 1));
  Tensor xc = uniform({3, 4}, -1, 1);
  Tensor mg = on_gpu(gt(xc, 0.0)), mc = gt(xc, 0.0);
  check_throws_with([&] { where(mg, xg, xc); }, "[where] tensors are on different devices");
  check_throws_with([&] { where(mc, xg, xg); }, "[where] tensors are on different devices");
  check_throws_with([&] { masked_fill(xg, mc, 0.0); }, "[masked_fill] tensors are on different devices");
  check_throws_with([&] { masked_softmax(xg, mc); }, "[masked_softmax] tensors are on different devices");
  check_throws_with([&] { masked_softmax(xg, Tensor(), 1.0, xc); }, "[masked_softmax] tensors are on different devices");
  check_throws_with([&] { cross_entropy(xg, from_vector<int64_t>({0, 1, 2}, {3})); },
                    "[cross_entropy] tensors are on different devices");
  check_throws_with([&] { layer_norm(xg, {4}, ones({4}, kFloat64)); }, "weight is on cpu but input is on cuda:0");
  CHECK_THROWS_AS(where(mg, xg, xc), DeviceError);
  // Bool tensors have no ordering, on the GPU as on the CPU.
  check_throws_with([&] { amax(mg, {0}); }, "not supported for bool tensors");
}
