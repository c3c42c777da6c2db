// Op table for layer_norm and rms_norm: references are plain loops over each normalised row in
// float64; the fused kernels are also checked against their composite twin (mean, rsqrt, ...) on
// sizes large enough for the multi-threaded paths, and for run-to-run identical dweight/dbias.
#include <cmath>
#include <limits>

#include "op_harness.h"
#include "thread_count.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// y = normalise(x) * w + b over rows of N = numel(normalized_shape); w, b may be null.
Ref ref_norm(const Ref& x, int64_t N, const Ref* w, const Ref* b, double eps, bool rms) {
  Ref y(x.shape);
  for (int64_t r = 0; r < x.numel() / N; ++r) {
    const double* xr = x.v.data() + r * N;
    double mu = 0, ss = 0;
    if (!rms) {
      for (int64_t i = 0; i < N; ++i) mu += xr[i];
      mu /= N;
    }
    for (int64_t i = 0; i < N; ++i) ss += (xr[i] - mu) * (xr[i] - mu);
    const double rstd = 1.0 / std::sqrt(ss / N + eps);
    for (int64_t i = 0; i < N; ++i)
      y.v[r * N + i] = (xr[i] - mu) * rstd * (w ? w->v[i] : 1.0) + (b ? b->v[i] : 0.0);
  }
  return y;
}

// One table row: x of shape `xs` normalised over `ns`, with weight and/or bias when asked.
OpCase norm_case(const std::string& name, Shape xs, Shape ns, bool with_w, bool with_b, double eps, bool rms) {
  OpCase c;
  c.name = name;
  c.shapes = {xs};
  if (with_w) c.shapes.push_back(ns);
  if (with_b) c.shapes.push_back(ns);
  const int64_t N = shape_numel(ns);
  c.op = [=](const TensorList& in) {
    Tensor w = with_w ? in[1] : Tensor(), b = with_b ? in[with_w ? 2 : 1] : Tensor();
    return rms ? rms_norm(in[0], ns, w, eps) : layer_norm(in[0], ns, w, b, eps);
  };
  c.reference = [=](const std::vector<Ref>& in) {
    // eps = -1: the float64 machine epsilon (its float32 value changes the result far below tolerance)
    const double e = eps < 0 ? std::numeric_limits<double>::epsilon() : eps;
    return ref_norm(in[0], N, with_w ? &in[1] : nullptr, with_b ? &in[with_w ? 2 : 1] : nullptr, e, rms);
  };
  return c;
}

Tensor f64(const Shape& s, uint64_t seed = 1) { return uniform(s, -2, 2, kFloat64, seed); }

// The composite twin of layer_norm / rms_norm, built from other ops (its backward comes from theirs).
Tensor composite_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, bool rms) {
  Tensor xm = rms ? x : sub(x, mean(x, {-1}, true));
  Tensor y = mul(xm, rsqrt(add(mean(mul(xm, xm), {-1}, true), eps)));
  y = mul(y, w);
  return rms ? y : add(y, b);
}

}  // namespace

TEST_CASE("op layer_norm affine") {
  OpCase c = norm_case("layer_norm (4,6) over (6) with weight and bias", {4, 6}, {6}, true, true, 1e-5, false);
  c.bad_inputs = {
      {"trailing dims", [] { layer_norm(f64({2, 3}), {4}); },
       "[layer_norm] normalized_shape (4) does not match the last dims of input (2,3) (expected an input of shape (*,4))"},
      {"too few dims", [] { layer_norm(f64({3}), {2, 3}); }, "[layer_norm] normalized_shape (2,3) does not match"},
      {"empty normalized_shape", [] { layer_norm(f64({3}), {}); }, "[layer_norm] normalized_shape must have at least one dim"},
      {"weight shape", [] { layer_norm(f64({2, 4}), {4}, f64({5})); },
       "[layer_norm] weight of shape (5) does not match normalized_shape (4) (input (2,4))"},
      {"bias shape", [] { layer_norm(f64({2, 4}), {4}, f64({4}), f64({2, 2})); },
       "[layer_norm] bias of shape (2,2) does not match normalized_shape (4)"},
      {"weight dtype", [] { layer_norm(f64({2, 4}), {4}, f64({4}).to(kFloat32)); },
       "[layer_norm] weight is float32 but input is float64"},
      {"int64 input", [] { layer_norm(arange(4.0, kInt64), {4}); }, "[layer_norm] expected a floating tensor"},
  };
  run_op_case(c);
}

TEST_CASE("op layer_norm no affine") {
  run_op_case(norm_case("layer_norm (3,5) over (5)", {3, 5}, {5}, false, false, 1e-5, false));
}

TEST_CASE("op layer_norm weight only") {
  run_op_case(norm_case("layer_norm (3,5) over (5) with weight", {3, 5}, {5}, true, false, 1e-5, false));
}

TEST_CASE("op layer_norm 2d normalized_shape") {
  run_op_case(norm_case("layer_norm (2,3,4) over (3,4) with weight and bias", {2, 3, 4}, {3, 4}, true, true, 1e-5, false));
  run_op_case(norm_case("layer_norm (2,3,4) over (3,4)", {2, 3, 4}, {3, 4}, false, false, 1e-3, false));
}

TEST_CASE("op rms_norm affine") {
  OpCase c = norm_case("rms_norm (4,6) over (6) with weight", {4, 6}, {6}, true, false, 1e-6, true);
  c.bad_inputs = {
      {"trailing dims", [] { rms_norm(f64({2, 3}), {2}); },
       "[rms_norm] normalized_shape (2) does not match the last dims of input (2,3)"},
      {"weight shape", [] { rms_norm(f64({2, 4}), {4}, f64({4, 1})); },
       "[rms_norm] weight of shape (4,1) does not match normalized_shape (4)"},
  };
  run_op_case(c);
}

TEST_CASE("op rms_norm no affine with default eps") {
  run_op_case(norm_case("rms_norm (3,5) over (5), eps = machine epsilon", {3, 5}, {5}, false, false, -1, true));
}

TEST_CASE("op rms_norm 2d normalized_shape") {
  run_op_case(norm_case("rms_norm (2,3,4) over (3,4) with weight", {2, 3, 4}, {3, 4}, true, false, 1e-6, true));
}

TEST_CASE("op norm non-contiguous input") {
  // x is a transposed view: (5, 3) viewed from a contiguous (3, 5); normalised over its last dim.
  for (bool rms : {false, true}) {
    INFO("rms ", rms);
    Tensor base = f64({3, 5});
    Tensor x = base.t();
    CHECK_FALSE(x.is_contiguous());
    Tensor w = f64({3}, 2), b = f64({3}, 3);
    Tensor y = rms ? rms_norm(x, {3}, w, 1e-5) : layer_norm(x, {3}, w, b, 1e-5);
    Ref rw(w), rb(b);
    CHECK_CLOSE(y, ref_norm(Ref(x), 3, &rw, rms ? nullptr : &rb, 1e-5, rms).tensor(), 1e-12, 1e-10);
    Tensor xg = base.clone().requires_grad_();
    auto r = gradcheck([rms](const TensorList& in) {
      Tensor xt = in[0].t();
      return rms ? rms_norm(xt, {3}, in[1], 1e-5) : layer_norm(xt, {3}, in[1], in[2], 1e-5);
    }, {xg, w.clone().requires_grad_(), b.clone().requires_grad_()});
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("op norm fused kernels match the composite twin on large inputs") {
  // (64, 1024): large enough that the kernels run rows on several threads.
  for (bool rms : {false, true}) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("rms ", rms, " dtype ", dtype_name(dt));
      Tensor x = uniform({64, 1024}, -3, 3, dt, 1).requires_grad_();
      Tensor w = uniform({1024}, 0.5, 1.5, dt, 2).requires_grad_(), b = uniform({1024}, -1, 1, dt, 3).requires_grad_();
      Tensor xc = x.detach().clone().requires_grad_(), wc = w.detach().clone().requires_grad_(),
             bc = b.detach().clone().requires_grad_();
      Tensor y = rms ? rms_norm(x, {1024}, w, 1e-5) : layer_norm(x, {1024}, w, b, 1e-5);
      Tensor yc = composite_norm(xc, wc, bc, 1e-5, rms);
      const double atol = dt == kFloat64 ? 1e-10 : 2e-4, rtol = dt == kFloat64 ? 1e-9 : 1e-3;
      CHECK_CLOSE(y, yc, atol, rtol);
      Tensor g = uniform({64, 1024}, -1, 1, dt, 4);
      y.backward(g);
      yc.backward(g);
      CHECK_CLOSE(x.grad(), xc.grad(), atol, rtol);
      CHECK_CLOSE(w.grad(), wc.grad(), atol * 10, rtol);
      if (!rms) CHECK_CLOSE(b.grad(), bc.grad(), atol * 10, rtol);
    }
  }
}

TEST_CASE("op norm dweight and dbias do not depend on the thread count") {
#ifdef _OPENMP
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    const ThreadCount n(threads);
    Tensor x = uniform({1000, 96}, -2, 2, kFloat32, 1).requires_grad_();
    Tensor w = uniform({96}, 0.5, 1.5, kFloat32, 2).requires_grad_(), b = zeros({96}).requires_grad_();
    layer_norm(x, {96}, w, b).backward(uniform({1000, 96}, -1, 1, kFloat32, 3));
    std::vector<float> r = w.grad().to_vector<float>(), rb = b.grad().to_vector<float>();
    r.insert(r.end(), rb.begin(), rb.end());
    results.push_back(r);
  }
  CHECK(results[0] == results[1]);  // bit for bit
  CHECK(results[0] == results[2]);
#endif
}

// The kernels sum eight rows' statistics side by side (core/cpu/norm.h, kNormRowGroup); each row's sums
// stay one chain in element order, so a row normalised among others gives the bits it gets alone:
// layer_norm and rms_norm, the fused residual norm, and the input's gradient, over 21 rows (two groups of
// eight and five rows alone), float32 and float64.
TEST_CASE("op norm kernels: a row among others gets the bits it gets alone, forward and backward") {
  const int64_t R = 21, N = 300;
  for (bool rms : {false, true})
    for (DType dt : {kFloat32, kFloat64}) {
      INFO("rms ", rms, " dtype ", dtype_name(dt));
      Tensor x = uniform({R, N}, -3, 3, dt, 11), branch = uniform({R, N}, -1, 1, dt, 12);
      Tensor w = uniform({N}, 0.5, 1.5, dt, 13), b = uniform({N}, -1, 1, dt, 14), g = uniform({R, N}, -1, 1, dt, 15);
      auto norm = [&](const Tensor& in) { return rms ? rms_norm(in, {N}, w, 1e-5) : layer_norm(in, {N}, w, b, 1e-5); };
      Tensor xg = x.clone().requires_grad_();
      Tensor all = norm(xg);
      all.backward(g);
      Tensor fused = rms ? residual_rms_norm(x, branch, {N}, w, 1e-5).out : residual_layer_norm(x, branch, {N}, w, b, 1e-5).out;
      for (int64_t r = 0; r < R; ++r) {
        Tensor row = x.slice(0, r, r + 1).clone().requires_grad_();
        Tensor alone = norm(row);
        alone.backward(g.slice(0, r, r + 1).clone());
        CHECK_MESSAGE(bitwise_equal(all.detach().slice(0, r, r + 1).contiguous(), alone.detach()), "row " << r);
        CHECK_MESSAGE(bitwise_equal(xg.grad().slice(0, r, r + 1).contiguous(), row.grad()), "dx row " << r);
        Tensor sum_row = add(x.slice(0, r, r + 1), branch.slice(0, r, r + 1));
        CHECK_MESSAGE(bitwise_equal(fused.slice(0, r, r + 1).contiguous(), norm(sum_row).detach()), "fused row " << r);
      }
    }
}

TEST_CASE("op norm saved tensors: modifying the input in place is caught") {
  // Inputs that need no copy are saved as aliases, so autograd's version check applies.
  Tensor x = f64({2, 4}).requires_grad_();
  Tensor h = mul(x, 1.0);
  Tensor y = layer_norm(h, {4});
  {
    NoGradGuard no_grad;
    h.mul_(2.0);
  }
  check_throws_with([&] { y.sum().backward(); }, "modified by an in-place operation");
}
