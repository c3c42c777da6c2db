// Op table for the indexing family (embedding, index_select, gather, cat, stack, split, chunk) and
// the selects (where, masked_fill). Index inputs are built as int64 by make_inputs and stay int64 in
// every harness mode (the strided copies keep the dtype); references are plain loops over Ref.
#include <cmath>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Indices in [0, n) from a fixed seed; with more indices than n, repeats are certain.
Tensor random_index(const Shape& shape, int64_t n, uint64_t seed) {
  Generator g(seed);
  return randint(0, n, shape, kInt64, &g);
}

Tensor idx(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s); }

int64_t as_index(double v) { return static_cast<int64_t>(std::llround(v)); }

// One tensor from all pieces of a split, so that one op output (and one gradcheck) covers every
// piece: piece k, scaled by k + 1 (so a piece swapped with another shows), flattened, concatenated.
Tensor join_pieces(const TensorList& parts) {
  TensorList flat;
  for (size_t k = 0; k < parts.size(); ++k) flat.push_back(mul(parts[k], static_cast<double>(k + 1)).reshape({-1}));
  return cat(flat, 0);
}

// The reference of join_pieces(split(x, sizes, dim)).
Ref split_reference(const Ref& x, const Shape& sizes, int64_t dim) {
  std::vector<double> out;
  int64_t start = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    for (int64_t i = 0; i < x.numel(); ++i) {
      Shape at = unravel(i, x.shape);
      if (at[dim] >= start && at[dim] < start + sizes[k]) out.push_back((k + 1) * x.v[i]);
    }
    start += sizes[k];
  }
  Ref r(Shape{static_cast<int64_t>(out.size())});
  r.v = out;
  return r;
}

}  // namespace

// ---- embedding ----------------------------------------------------------------------------------
TEST_CASE("op embedding") {
  OpCase c;
  c.name = "embedding (5,3) with indices (2,4), repeated";
  c.make_inputs = [](DType dt) {
    return TensorList{uniform({5, 3}, -2, 2, kFloat64, 11).to(dt), idx({1, 3, 1, 0, 4, 1, 3, 3}, {2, 4})};
  };
  c.op = [](const TensorList& in) { return embedding(in[0], in[1]); };
  c.reference = [](const std::vector<Ref>& in) {
    const Ref &w = in[0], &ix = in[1];
    Ref out({2, 4, 3});
    for (int64_t n = 0; n < 8; ++n)
      for (int64_t ch = 0; ch < 3; ++ch) out.v[n * 3 + ch] = w.at({as_index(ix.v[n]), ch});
    return out;
  };
  Tensor w = zeros({5, 3});
  c.bad_inputs = {
      {"index == V", [w] { embedding(w, idx({0, 5}, {2})); }, "[embedding] index 5 is out of range for size 5"},
      {"negative index", [w] { embedding(w, idx({-1}, {1})); }, "[embedding] index -1 is out of range for size 5"},
      {"float indices", [w] { embedding(w, zeros({2})); }, "[embedding] indices must be int64, got float32 (2)"},
      {"1-D weight", [] { embedding(zeros({5}), idx({0}, {1})); }, "[embedding] weight must be 2-D (V, C), got (5)"},
      {"int weight", [] { embedding(zeros({5, 3}, kInt64), idx({0}, {1})); }, "[embedding] expected a floating tensor"},
      {"padding_idx out of range", [w] { embedding(w, idx({0}, {1}), 5); }, "[embedding] padding_idx 5 is out of range"},
  };
  run_op_case(c);
  CHECK_THROWS_AS(embedding(w, idx({7}, {1})), IndexError);
  CHECK_THROWS_AS(embedding(w, zeros({1})), DTypeError);

  // 0-d indices give one row; empty indices give (0, C).
  CHECK(embedding(w, idx({2}, {})).shape() == Shape{3});
  CHECK(embedding(w, idx({}, {0, 2})).shape() == Shape{0, 2, 3});
}

TEST_CASE("op embedding gradient: repeated indices accumulate, padding_idx rows get none") {
  const int64_t V = 6, C = 4, pad = 3;
  std::vector<int64_t> ids = {1, 3, 1, 0, 5, 1, 3, 3, 2, 0};
  Tensor w = uniform({V, C}, -1, 1, kFloat64, 3).requires_grad_();
  Tensor up = uniform({2, 5, C}, -1, 1, kFloat64, 4);
  Tensor out = embedding(w, idx(ids, {2, 5}), pad);
  // The forward still looks the padding row up (PyTorch's module zeroes it at init instead).
  CHECK_CLOSE(out.select(0, 0).select(0, 1), w.detach().select(0, pad), 0, 0);
  (out * up).sum().backward();
  Ref g(Shape{V, C}), u(up);
  for (size_t n = 0; n < ids.size(); ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      if (ids[n] != pad) g.at({ids[n], ch}) += u.v[n * C + ch];
  CHECK_CLOSE(w.grad(), g.tensor(), 1e-12, 1e-12);
  CHECK(abs(w.grad().select(0, pad)).sum().item() == 0.0);
  CHECK(abs(w.grad().select(0, 4)).sum().item() == 0.0);  // never looked up
}

TEST_CASE("op embedding backward is deterministic: bitwise equal to the serial sum on any thread count") {
  const int64_t V = 37, C = 200, N = 20000;
  Tensor ids = random_index({N}, V, 9);
  Tensor up = uniform({N, C}, -1, 1, kFloat32, 10);
  auto grad_once = [&] {
    Tensor w = zeros({V, C}).requires_grad_();
    embedding(w, ids).backward(up);
    return w.grad().to_vector<float>();
  };
  // The serial reference: float sums over n in increasing order, as the kernel promises.
  std::vector<float> expected(V * C, 0.0f), u = up.to_vector<float>();
  std::vector<int64_t> iv = ids.to_vector<int64_t>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) expected[iv[n] * C + ch] += u[n * C + ch];
  CHECK(grad_once() == expected);
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
  for (int t : {1, 3, 8}) {
    omp_set_num_threads(t);
    CHECK(grad_once() == expected);
  }
  omp_set_num_threads(threads);
#endif
}

// ---- index_select ---------------------------------------------------------------------------------
TEST_CASE("op index_select") {
  struct Variant { Shape shape; int64_t dim; std::vector<int64_t> index; };
  for (const Variant& v : {Variant{{4, 3, 5}, 1, {2, 0, 2, 1}}, Variant{{4, 3}, 0, {3, 3, 0}},
                           Variant{{2, 3, 4}, -1, {1, 3}}}) {
    OpCase c;
    c.name = "index_select " + shape_str(v.shape) + " dim " + std::to_string(v.dim);
    c.make_inputs = [v](DType dt) {
      return TensorList{uniform(v.shape, -2, 2, kFloat64, 5).to(dt), idx(v.index, {static_cast<int64_t>(v.index.size())})};
    };
    c.op = [v](const TensorList& in) { return index_select(in[0], v.dim, in[1]); };
    c.reference = [v](const std::vector<Ref>& in) {
      const int64_t d = v.dim < 0 ? v.dim + static_cast<int64_t>(v.shape.size()) : v.dim;
      Shape shape = v.shape;
      shape[d] = static_cast<int64_t>(v.index.size());
      Ref out(shape);
      for (int64_t i = 0; i < out.numel(); ++i) {
        Shape at = unravel(i, shape);
        at[d] = as_index(in[1].v[at[d]]);
        out.v[i] = in[0].at(at);
      }
      return out;
    };
    Tensor x = zeros({4, 3});
    c.bad_inputs = {
        {"index out of range", [x] { index_select(x, 1, idx({0, 3}, {2})); },
         "[index_select] index 3 is out of range for size 3 (dim 1 of x (4,3))"},
        {"negative index", [x] { index_select(x, 0, idx({-2}, {1})); }, "[index_select] index -2 is out of range"},
        {"2-D index", [x] { index_select(x, 0, idx({0, 1}, {1, 2})); }, "[index_select] index must be 1-D, got shape (1,2)"},
        {"float index", [x] { index_select(x, 0, zeros({2}, kFloat64)); }, "[index_select] index must be int64, got float64"},
        {"bad dim", [x] { index_select(x, 2, idx({0}, {1})); }, "[index_select] dim 2 out of range for a tensor of 2 dimensions"},
    };
    run_op_case(c);
  }
  // Any dtype can be selected from (no gradient then).
  Tensor ints = arange(6.0, kInt64).reshape({3, 2});
  CHECK(index_select(ints, 0, idx({2, 0}, {2})).to_vector<int64_t>() == std::vector<int64_t>{4, 5, 0, 1});
}

// ---- gather ----------------------------------------------------------------------------------------
TEST_CASE("op gather") {
  // The second variant's index is smaller than x in a non-gathered dim: the backward then fills only
  // the corner of x that the index reaches.
  struct Variant { Shape x_shape, index_shape; int64_t dim; };
  for (const Variant& v : {Variant{{3, 4, 5}, {3, 6, 5}, 1}, Variant{{3, 4, 5}, {2, 3, 7}, -1},
                           Variant{{4, 3}, {2, 3}, 0}}) {
    OpCase c;
    c.name = "gather x " + shape_str(v.x_shape) + " index " + shape_str(v.index_shape) + " dim " + std::to_string(v.dim);
    const int64_t d = v.dim < 0 ? v.dim + static_cast<int64_t>(v.x_shape.size()) : v.dim;
    c.make_inputs = [v, d](DType dt) {
      return TensorList{uniform(v.x_shape, -2, 2, kFloat64, 6).to(dt), random_index(v.index_shape, v.x_shape[d], 7)};
    };
    c.op = [v](const TensorList& in) { return gather(in[0], v.dim, in[1]); };
    c.reference = [d](const std::vector<Ref>& in) {
      Ref out(in[1].shape);
      for (int64_t i = 0; i < out.numel(); ++i) {
        Shape at = unravel(i, out.shape);
        at[d] = as_index(in[1].v[i]);
        out.v[i] = in[0].at(at);
      }
      return out;
    };
    Tensor x = zeros({3, 4});
    c.bad_inputs = {
        {"index out of range", [x] { gather(x, 1, idx({0, 4, 1}, {3, 1})); },
         "[gather] index 4 is out of range for size 4 (dim 1 of x (3,4))"},
        {"negative index", [x] { gather(x, 0, idx({-1}, {1, 1})); }, "[gather] index -1 is out of range for size 3"},
        {"float index", [x] { gather(x, 0, zeros({1, 1})); }, "[gather] index must be int64, got float32 (1,1)"},
        {"index ndim", [x] { gather(x, 0, idx({0}, {1})); }, "[gather] index (1) must have as many dims as x (3,4)"},
        {"index larger in another dim", [x] { gather(x, 1, idx({0, 0, 0, 0}, {4, 1})); },
         "[gather] index (4,1) is larger than x (3,4) in dim 0"},
        {"bad dim", [x] { gather(x, -3, idx({0}, {1, 1})); }, "[gather] dim -3 out of range for a tensor of 2 dimensions"},
    };
    run_op_case(c);
  }
}

// ---- cat / stack --------------------------------------------------------------------------------------
TEST_CASE("op cat") {
  struct Variant { std::vector<Shape> shapes; int64_t dim; };
  for (const Variant& v : {Variant{{{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}, 1}, Variant{{{3, 2}, {1, 2}}, 0},
                           Variant{{{2, 3}, {2, 0}, {2, 2}}, -1}}) {
    OpCase c;
    c.name = "cat dim " + std::to_string(v.dim);
    c.shapes = v.shapes;
    c.op = [v](const TensorList& in) { return cat(in, v.dim); };
    c.reference = [v](const std::vector<Ref>& in) {
      const int64_t d = v.dim < 0 ? v.dim + static_cast<int64_t>(v.shapes[0].size()) : v.dim;
      Shape shape = v.shapes[0];
      shape[d] = 0;
      for (const Shape& s : v.shapes) shape[d] += s[d];
      Ref out(shape);
      int64_t start = 0;
      for (const Ref& r : in) {
        for (int64_t i = 0; i < r.numel(); ++i) {
          Shape at = unravel(i, r.shape);
          at[d] += start;
          out.at(at) = r.v[i];
        }
        start += r.shape[d];
      }
      return out;
    };
    c.bad_inputs = {
        {"mismatched shapes", [] { cat({zeros({2, 3, 4}), zeros({3, 1, 4})}, 1); },
         "[cat] sizes must match except in dim 1: tensor 0 is (2,3,4), tensor 1 is (3,1,4)"},
        {"mismatched ndim", [] { cat({zeros({2, 3}), zeros({2, 3, 1})}, 0); }, "[cat] sizes must match except in dim 0"},
        {"dtype mismatch", [] { cat({zeros({2}), zeros({2}, kFloat64)}); },
         "[cat] tensor 1 has dtype float64 but tensor 0 has float32"},
        {"bad dim", [] { cat({zeros({2, 3}), zeros({2, 3})}, 2); }, "[cat] dim 2 out of range for a tensor of 2 dimensions"},
        {"empty list", [] { cat({}); }, "[cat] expected a non-empty list of tensors"},
        {"0-d tensors", [] { cat({scalar_tensor(1), scalar_tensor(2)}); }, "[cat] zero-dimensional tensors cannot be concatenated"},
    };
    run_op_case(c);
  }
  CHECK_THROWS_AS(cat({zeros({2, 3}), zeros({3, 3})}, 1), ShapeError);
  // Only the inputs that require grad get one.
  Tensor a = ones({2}, kFloat64).requires_grad_(), b = ones({3}, kFloat64);
  cat({a, b}).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1, 1});
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("op stack") {
  for (int64_t dim : {0, 1, 2, -1}) {
    OpCase c;
    c.name = "stack dim " + std::to_string(dim);
    c.shapes = {{2, 3}, {2, 3}, {2, 3}};
    c.op = [dim](const TensorList& in) { return stack(in, dim); };
    c.reference = [dim](const std::vector<Ref>& in) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      Shape shape = {2, 3};
      shape.insert(shape.begin() + d, 3);
      Ref out(shape);
      for (int64_t k = 0; k < 3; ++k)
        for (int64_t i = 0; i < 6; ++i) {
          Shape at = unravel(i, {2, 3});
          at.insert(at.begin() + d, k);
          out.at(at) = in[k].v[i];
        }
      return out;
    };
    c.bad_inputs = {
        {"different shapes", [] { stack({zeros({2, 3}), zeros({3, 2})}); },
         "[stack] all tensors must have the same shape: tensor 0 is (2,3), tensor 1 is (3,2)"},
        {"bad dim", [] { stack({zeros({2, 3}), zeros({2, 3})}, 3); }, "[stack] dim 3 out of range for a tensor of 3 dimensions"},
        {"dtype mismatch", [] { stack({zeros({2}), zeros({2}, kInt64)}); }, "[stack] tensor 1 has dtype int64"},
        {"empty list", [] { stack({}); }, "[stack] expected a non-empty list of tensors"},
    };
    run_op_case(c);
  }
  CHECK(stack({scalar_tensor(1), scalar_tensor(2)}).shape() == Shape{2});  // 0-d tensors stack into (N)
}

// ---- split / chunk -----------------------------------------------------------------------------------
TEST_CASE("op split") {
  struct Variant { Shape shape; int64_t dim; int64_t split_size; Shape sizes; Shape expected_sizes; };
  for (const Variant& v : {Variant{{5, 7}, 1, 3, {}, {3, 3, 1}}, Variant{{5, 7}, 0, 5, {}, {5}},
                           Variant{{5, 7}, -1, 0, {2, 0, 5}, {2, 0, 5}}, Variant{{4, 2, 3}, 0, 0, {1, 3}, {1, 3}}}) {
    OpCase c;
    c.name = "split " + shape_str(v.shape) + " dim " + std::to_string(v.dim);
    c.shapes = {v.shape};
    const int64_t d = v.dim < 0 ? v.dim + static_cast<int64_t>(v.shape.size()) : v.dim;
    auto do_split = [v](const Tensor& x) { return v.sizes.empty() ? split(x, v.split_size, v.dim) : split(x, v.sizes, v.dim); };
    c.op = [do_split](const TensorList& in) { return join_pieces(do_split(in[0])); };
    c.reference = [v, d](const std::vector<Ref>& in) { return split_reference(in[0], v.expected_sizes, d); };
    Tensor x = zeros({5, 7});
    c.bad_inputs = {
        {"sizes that do not add up", [x] { split(x, Shape{2, 2}, 1); },
         "[split] split sizes (2,2) sum to 4 but dim 1 of x (5,7) has size 7"},
        {"negative size", [x] { split(x, Shape{8, -1}, 1); }, "[split] split sizes must be non-negative, got (8,-1)"},
        {"split_size 0", [x] { split(x, int64_t(0), 1); }, "[split] split_size must be positive, got 0"},
        {"bad dim", [x] { split(x, int64_t(2), 2); }, "[split] dim 2 out of range for a tensor of 2 dimensions"},
        {"0-d tensor", [] { split(scalar_tensor(1), int64_t(1)); }, "[split] cannot split a 0-d tensor"},
    };
    run_op_case(c);
    // The pieces are views of x: no copy, and the expected sizes.
    Tensor x2 = uniform(v.shape, -1, 1);
    TensorList parts = do_split(x2);
    REQUIRE(parts.size() == v.expected_sizes.size());
    for (size_t k = 0; k < parts.size(); ++k) {
      CHECK(parts[k].size(d) == v.expected_sizes[k]);
      CHECK(parts[k].impl()->storage == x2.impl()->storage);
    }
  }
  CHECK(split(zeros({0, 2}), int64_t(0)).size() == 1);  // a size-0 dim gives one empty piece
}

TEST_CASE("op chunk") {
  struct Variant { Shape shape; int64_t chunks, dim; Shape expected_sizes; };
  // 6 into 4 chunks gives 3 of size 2 (ceil(6/4) = 2), as PyTorch.
  for (const Variant& v : {Variant{{5, 3}, 3, 0, {2, 2, 1}}, Variant{{2, 6}, 4, 1, {2, 2, 2}},
                           Variant{{2, 3}, 5, -1, {1, 1, 1}}}) {
    OpCase c;
    c.name = "chunk " + shape_str(v.shape) + " into " + std::to_string(v.chunks);
    c.shapes = {v.shape};
    const int64_t d = v.dim < 0 ? v.dim + static_cast<int64_t>(v.shape.size()) : v.dim;
    c.op = [v](const TensorList& in) { return join_pieces(chunk(in[0], v.chunks, v.dim)); };
    c.reference = [v, d](const std::vector<Ref>& in) { return split_reference(in[0], v.expected_sizes, d); };
    c.bad_inputs = {
        {"chunks 0", [] { chunk(zeros({4}), 0); }, "[chunk] chunks must be positive, got 0"},
        {"bad dim", [] { chunk(zeros({4}), 2, 1); }, "[chunk] dim 1 out of range for a tensor of 1 dimensions"},
    };
    run_op_case(c);
    Tensor x = zeros(v.shape);
    TensorList parts = chunk(x, v.chunks, v.dim);
    REQUIRE(parts.size() == v.expected_sizes.size());
    for (size_t k = 0; k < parts.size(); ++k) CHECK(parts[k].impl()->storage == x.impl()->storage);
  }
  CHECK(chunk(zeros({0, 2}), 3).size() == 3);  // as PyTorch: a size-0 dim gives `chunks` empty pieces
}

// ---- where / masked_fill -------------------------------------------------------------------------------
namespace {
// A bool mask of `shape` with a fixed, irregular pattern.
Tensor pattern_mask(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return ge(rand(shape, kFloat64, &g), 0.5);
}
// Element of r at the broadcast position of multi-index `at` (r's shape aligned to the right).
double pick(const Ref& r, const Shape& at) {
  Shape sub(r.shape.size());
  for (size_t k = 0; k < r.shape.size(); ++k) sub[k] = r.shape[k] == 1 ? 0 : at[at.size() - r.shape.size() + k];
  return r.at(sub);
}
}  // namespace

TEST_CASE("op where") {
  struct Variant { Shape c, a, b, out; };
  for (const Variant& v : {Variant{{3, 4}, {3, 4}, {3, 4}, {3, 4}}, Variant{{3, 1, 5}, {1, 4, 5}, {3, 4, 1}, {3, 4, 5}},
                           Variant{{4}, {3, 4}, {}, {3, 4}}, Variant{{2, 1}, {}, {3}, {2, 3}}}) {
    OpCase c;
    c.name = "where " + shape_str(v.c) + " " + shape_str(v.a) + " " + shape_str(v.b);
    c.make_inputs = [v](DType dt) {
      return TensorList{pattern_mask(v.c, 21), uniform(v.a, -2, 2, kFloat64, 22).to(dt),
                        uniform(v.b, -2, 2, kFloat64, 23).to(dt)};
    };
    c.op = [](const TensorList& in) { return where(in[0], in[1], in[2]); };
    c.reference = [v](const std::vector<Ref>& in) {
      Ref out(v.out);
      for (int64_t i = 0; i < out.numel(); ++i) {
        Shape at = unravel(i, v.out);
        out.v[i] = pick(in[0], at) != 0 ? pick(in[1], at) : pick(in[2], at);
      }
      return out;
    };
    c.bad_inputs = {
        {"float condition", [] { where(zeros({2}), zeros({2}), zeros({2})); },
         "[where] condition must be bool, got float32 (2)"},
        {"dtype mismatch", [] { where(pattern_mask({2}, 1), zeros({2}), zeros({2}, kFloat64)); },
         "[where] a and b must have the same dtype, got float32 (2) and float64 (2)"},
        {"shapes that do not broadcast", [] { where(pattern_mask({2}, 1), zeros({3, 2}), zeros({4, 1})); },
         "[where] shapes cannot be broadcast: condition (2), a (3,2), b (4,1)"},
    };
    run_op_case(c);
  }
  // Only the operand that requires grad gets one.
  Tensor a = ones({2}, kFloat64).requires_grad_(), b = zeros({2}, kFloat64);
  Tensor cond = from_vector<bool>({true, false}, {2});
  where(cond, a, b).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1, 0});
  CHECK_FALSE(b.grad().defined());
  // Integer operands are selected too.
  Tensor m = from_vector<bool>({true, false}, {2});
  CHECK(where(m, arange(2.0, kInt64), full({2}, 7, kInt64)).to_vector<int64_t>() == std::vector<int64_t>{0, 7});
}

TEST_CASE("op masked_fill") {
  struct Variant { Shape x, mask, out; double value; };
  for (const Variant& v : {Variant{{3, 4}, {3, 4}, {3, 4}, 7.5}, Variant{{3, 4}, {4}, {3, 4}, -1e9},
                           Variant{{3, 1}, {2, 3, 4}, {2, 3, 4}, 0.25}}) {
    OpCase c;
    c.name = "masked_fill " + shape_str(v.x) + " mask " + shape_str(v.mask);
    c.make_inputs = [v](DType dt) { return TensorList{uniform(v.x, -2, 2, kFloat64, 31).to(dt), pattern_mask(v.mask, 32)}; };
    c.op = [v](const TensorList& in) { return masked_fill(in[0], in[1], v.value); };
    c.reference = [v](const std::vector<Ref>& in) {
      Ref out(v.out);
      for (int64_t i = 0; i < out.numel(); ++i) {
        Shape at = unravel(i, v.out);
        out.v[i] = pick(in[1], at) != 0 ? v.value : pick(in[0], at);
      }
      return out;
    };
    c.bad_inputs = {
        {"float mask", [] { masked_fill(zeros({2}), zeros({2}), 1.0); }, "[masked_fill] mask must be bool, got float32 (2)"},
        {"int64 mask", [] { masked_fill(zeros({2}), zeros({2}, kInt64), 1.0); }, "[masked_fill] mask must be bool, got int64"},
        {"shapes that do not broadcast", [] { masked_fill(zeros({2, 3}), pattern_mask({2}, 1), 1.0); },
         "[masked_fill] shapes cannot be broadcast: (2,3) and (2)"},
    };
    run_op_case(c);
  }
  // Masked positions get exactly zero gradient.
  Tensor x = ones({4}, kFloat64).requires_grad_();
  Tensor mask = from_vector<bool>({true, false, false, true}, {4});
  (masked_fill(x, mask, 3.0) * 2.0).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 2, 2, 0});
}

// ---- on a GPU: operands on different devices are refused with a clear message ---------------------
// (The ops themselves run on CUDA: the op table above is checked against the CPU there, op_harness.h.)
TEST_CASE("op index family refuses operands on different devices") {
  if (!have_gpu()) return;
  Tensor x = zeros({2, 3}).to(Device::cuda());
  Tensor i = idx({0}, {1});  // on the CPU
  Tensor m = pattern_mask({2, 3}, 1);
  CHECK_THROWS_AS(embedding(x, i), DeviceError);
  CHECK_THROWS_AS(index_select(x, 0, i), DeviceError);
  CHECK_THROWS_AS(gather(x, 0, i.reshape({1, 1})), DeviceError);
  CHECK_THROWS_AS(cat({x, zeros({2, 3})}), DeviceError);
  CHECK_THROWS_AS(where(m, x, x), DeviceError);
  CHECK_THROWS_AS(masked_fill(x, m, 0.0), DeviceError);
  check_throws_with([&] { embedding(x, i); }, "[embedding]");
  check_throws_with([&] { where(m, x, x); }, "[where]");
}
