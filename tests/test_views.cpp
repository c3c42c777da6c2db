// Views share storage (no copy), have the right strides, and pass gradients back; each view op is
// also a row of the op table (naive reference = index arithmetic on the input).
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {
// Reference for any view: out[idx] = in[map(idx)].
Ref gather_ref(const Ref& in, const Shape& out_shape, const std::function<Shape(const Shape&)>& map) {
  Ref out(out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.v[i] = in.at(map(unravel(i, out_shape)));
  return out;
}
OpCase view_case(const std::string& name, Shape in_shape, std::function<Tensor(const Tensor&)> op, Shape out_shape,
                 std::function<Shape(const Shape&)> map) {
  OpCase c;
  c.name = name;
  c.shapes = {in_shape};
  c.op = [op](const TensorList& in) { return op(in[0]); };
  c.reference = [out_shape, map](const std::vector<Ref>& in) { return gather_ref(in[0], out_shape, map); };
  return c;
}
}  // namespace

TEST_CASE("op reshape and view") {
  auto flat = [](Shape from, Shape to) {
    return [from, to](const Shape& idx) {
      int64_t f = 0;
      for (size_t d = 0; d < to.size(); ++d) f = f * to[d] + idx[d];
      return unravel(f, from);
    };
  };
  run_op_case(view_case("reshape", {2, 3, 4}, [](const Tensor& x) { return x.reshape({4, -1}); }, {4, 6}, flat({2, 3, 4}, {4, 6})));
  run_op_case(view_case("flatten", {2, 3, 4}, [](const Tensor& x) { return x.flatten(1); }, {2, 12}, flat({2, 3, 4}, {2, 12})));
  run_op_case(view_case("reshape to scalar", {1, 1}, [](const Tensor& x) { return x.reshape({}); }, {}, flat({1, 1}, {})));
  Tensor x = arange(24.0, kFloat64).reshape({2, 3, 4});
  Tensor v = x.view({6, 4});
  CHECK(v.impl()->storage == x.impl()->storage);
  CHECK(v.strides() == Shape{4, 1});
  // a transposed tensor cannot be viewed, but can be reshaped (copy)
  Tensor t = x.transpose(0, 2);
  check_throws_with([&] { t.view({24}); }, "[view] cannot view a tensor of shape (4,3,2)");
  Tensor r = t.reshape({24});
  CHECK(r.to_vector<double>()[1] == 12.0);  // t[0,0,1] = x[1,0,0]
  check_throws_with([&] { x.reshape({5, -1}); }, "[reshape] shape (5,-1) is invalid for input of shape (2,3,4)");
  check_throws_with([&] { x.reshape({-1, -1}); }, "only one dimension can be -1");
  // a view over a size-1 dim with an arbitrary stride is still a view
  Tensor s = x.narrow(1, 1, 1);
  CHECK(s.view({2, 4}).impl()->storage == x.impl()->storage);
}

TEST_CASE("op permute and transpose") {
  run_op_case(view_case("permute", {2, 3, 4}, [](const Tensor& x) { return x.permute({2, 0, 1}); }, {4, 2, 3},
                        [](const Shape& i) { return Shape{i[1], i[2], i[0]}; }));
  run_op_case(view_case("transpose", {2, 3}, [](const Tensor& x) { return x.transpose(-1, 0); }, {3, 2},
                        [](const Shape& i) { return Shape{i[1], i[0]}; }));
  Tensor x = zeros({2, 3, 4});
  CHECK(x.permute({2, 0, 1}).strides() == Shape{1, 12, 4});
  check_throws_with([&] { x.permute({0, 1}); }, "[permute] got 2 dims (0,1) for a tensor of shape (2,3,4)");
  check_throws_with([&] { x.permute({0, 0, 1}); }, "[permute] repeated dim");
  check_throws_with([&] { x.transpose(0, 3); }, "[transpose] dim 3 out of range for a tensor of 3 dimensions");
}

TEST_CASE("op narrow slice select") {
  run_op_case(view_case("narrow", {4, 5}, [](const Tensor& x) { return x.narrow(1, 1, 3); }, {4, 3},
                        [](const Shape& i) { return Shape{i[0], i[1] + 1}; }));
  run_op_case(view_case("slice step", {7, 3}, [](const Tensor& x) { return x.slice(0, 1, 7, 2); }, {3, 3},
                        [](const Shape& i) { return Shape{1 + 2 * i[0], i[1]}; }));
  run_op_case(view_case("slice negative clamps", {6}, [](const Tensor& x) { return x.slice(0, -4, 100); }, {4},
                        [](const Shape& i) { return Shape{i[0] + 2}; }));
  run_op_case(view_case("select", {3, 4, 2}, [](const Tensor& x) { return x.select(1, -1); }, {3, 2},
                        [](const Shape& i) { return Shape{i[0], 3, i[1]}; }));
  Tensor x = zeros({3, 4});
  check_throws_with([&] { x.narrow(1, 2, 3); }, "[narrow] start 2 length 3 out of range for dim 1 of size 4");
  check_throws_with([&] { x.select(0, 3); }, "[select] index 3 out of range for dim 0 of size 3");
  check_throws_with([&] { x.slice(0, 0, 2, 0); }, "[slice] step must be positive");
  check_throws_with([&] { scalar_tensor(1.0).select(0, 0); }, "[select] cannot select from a 0-d tensor");
}

TEST_CASE("op expand squeeze unsqueeze") {
  run_op_case(view_case("expand", {3, 1}, [](const Tensor& x) { return x.expand({2, 3, 4}); }, {2, 3, 4},
                        [](const Shape& i) { return Shape{i[1], 0}; }));
  run_op_case(view_case("squeeze", {3, 1, 2, 1}, [](const Tensor& x) { return x.squeeze(); }, {3, 2},
                        [](const Shape& i) { return Shape{i[0], 0, i[1], 0}; }));
  run_op_case(view_case("squeeze dim", {3, 1, 2}, [](const Tensor& x) { return x.squeeze(1); }, {3, 2},
                        [](const Shape& i) { return Shape{i[0], 0, i[1]}; }));
  run_op_case(view_case("unsqueeze", {3, 2}, [](const Tensor& x) { return x.unsqueeze(-1); }, {3, 2, 1},
                        [](const Shape& i) { return Shape{i[0], i[1]}; }));
  Tensor e = zeros({3, 1}).expand({2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(zeros({3, 2}).squeeze(0).shape() == Shape{3, 2});  // not size 1: unchanged, as PyTorch
  check_throws_with([] { zeros({3, 2}).expand({3, 3}); }, "[expand] cannot expand shape (3,2) to (3,3)");
  check_throws_with([] { zeros({3}).unsqueeze(3); }, "[unsqueeze] dim 3 out of range");
}

TEST_CASE("op contiguous clone to") {
  run_op_case(view_case("contiguous", {3, 4}, [](const Tensor& x) { return x.t().contiguous(); }, {4, 3},
                        [](const Shape& i) { return Shape{i[1], i[0]}; }));
  run_op_case(view_case("clone", {2, 2}, [](const Tensor& x) { return x.clone(); }, {2, 2}, [](const Shape& i) { return i; }));
  Tensor x = arange(6.0, kFloat64).reshape({2, 3});
  CHECK(x.contiguous().same(x));  // already contiguous: no copy
  Tensor c = x.clone();
  CHECK(c.impl()->storage != x.impl()->storage);
  // to(dtype): values convert, gradient converts back
  Tensor leaf = x.clone().requires_grad_();
  Tensor f = leaf.to(kFloat32);
  CHECK(f.dtype() == kFloat32);
  (f * 2.0).sum().backward();
  CHECK(leaf.grad().dtype() == kFloat64);
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>(6, 2.0));
  CHECK(from_vector<double>({1.7, -1.7}, {2}).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, -1});
}

TEST_CASE("views share storage and see writes") {
  Tensor x = zeros({2, 3}, kFloat64);
  Tensor row = x.select(0, 1);
  row.fill_(5.0);
  CHECK(x.to_vector<double>() == std::vector<double>{0, 0, 0, 5, 5, 5});
  Tensor col = x.select(1, 0);
  col.add_(1.0);
  CHECK(x.to_vector<double>() == std::vector<double>{1, 0, 0, 6, 5, 5});
  CHECK(x.version() == 2);  // both in-place ops bumped the shared version counter
}
