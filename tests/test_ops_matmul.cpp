// Op table for matmul and bmm. The reference is PyTorch's matmul rule written as plain loops over
// float64 (1-D promotion, batch broadcasting); transposed (column-major) operands, which the kernel
// maps without a copy, must give the same values and gradients as contiguous ones.
#include <algorithm>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/backend/matmul.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// matmul(a, b) with PyTorch semantics, as loops.
Ref ref_matmul(const Ref& a, const Ref& b) {
  Shape as = a.shape, bs = b.shape;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);  // (k) → (1, k)
  if (b_vec) bs.push_back(1);           // (k) → (k, 1)
  const int64_t n = as[as.size() - 2], k = as.back(), m = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t nb = std::max(ab.size(), bb.size());
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    int64_t da = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1;
    int64_t db = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
    batch[i] = std::max(da, db);
  }
  // Flat index of batch entry `idx` within an operand's own (possibly shorter, size-1) batch dims.
  auto batch_flat = [&](const Shape& own, const Shape& idx) {
    int64_t flat = 0;
    for (size_t d = 0; d < own.size(); ++d) flat = flat * own[d] + (own[d] == 1 ? 0 : idx[nb - own.size() + d]);
    return flat;
  };
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);
  Ref out(out_shape);
  for (int64_t e = 0; e < shape_numel(batch); ++e) {
    Shape idx = unravel(e, batch);
    const int64_t ea = batch_flat(ab, idx), eb = batch_flat(bb, idx);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a.v[(ea * n + i) * k + p] * b.v[(eb * k + p) * m + j];
        out.v[(e * n + i) * m + j] = s;
      }
  }
  if (a_vec) out.shape.erase(out.shape.end() - 2);  // the values' order is unchanged
  if (b_vec) out.shape.pop_back();
  return out;
}

OpCase matmul_case(const std::string& name, Shape sa, Shape sb) {
  OpCase c;
  c.name = name;
  c.shapes = {std::move(sa), std::move(sb)};
  c.op = [](const TensorList& in) { return matmul(in[0], in[1]); };
  c.reference = [](const std::vector<Ref>& in) { return ref_matmul(in[0], in[1]); };
  return c;
}

Tensor f64(const Shape& s, uint64_t seed = 1) { return uniform(s, -2, 2, kFloat64, seed); }
Tensor f32(const Shape& s, uint64_t seed = 1) { return uniform(s, -2, 2, kFloat32, seed); }

}  // namespace

TEST_CASE("op matmul 2d") {
  OpCase c = matmul_case("matmul (3,4) @ (4,5)", {3, 4}, {4, 5});
  c.bad_inputs = {
      {"inner dims", [] { matmul(f64({2, 3}), f64({4, 5})); }, "[matmul] inner dimensions differ: (2,3) @ (4,5)"},
      {"inner dims 1-d", [] { matmul(f64({3}), f64({4})); }, "[matmul] inner dimensions differ: (3) @ (4)"},
      {"0-d left", [] { matmul(scalar_tensor(2.0, kFloat64), f64({3})); },
       "[matmul] both arguments need at least 1 dimension, got () @ (3)"},
      {"0-d right", [] { matmul(f64({3, 2}), scalar_tensor(2.0, kFloat64)); }, "need at least 1 dimension"},
      {"dtype mismatch", [] { matmul(f32({2, 3}), f64({3, 4})); },
       "[matmul] dtypes differ: float32 (2,3) and float64 (3,4)"},
      {"int64 operands", [] { matmul(arange(6.0, kInt64).reshape({2, 3}), arange(6.0, kInt64).reshape({3, 2})); },
       "[matmul] expected a floating tensor"},
      {"batch dims", [] { matmul(f64({2, 3, 4}), f64({5, 4, 6})); },
       "[matmul] batch dimensions cannot be broadcast: (2,3,4) @ (5,4,6)"},
  };
  run_op_case(c);
}

TEST_CASE("op matmul 2d single row and column") {
  run_op_case(matmul_case("matmul (1,4) @ (4,1)", {1, 4}, {4, 1}));
  run_op_case(matmul_case("matmul (5,1) @ (1,3)", {5, 1}, {1, 3}));
}

TEST_CASE("op matmul batched") { run_op_case(matmul_case("matmul (2,3,4) @ (2,4,5)", {2, 3, 4}, {2, 4, 5})); }

TEST_CASE("op matmul batched broadcast") {
  run_op_case(matmul_case("matmul (2,1,3,4) @ (3,4,5)", {2, 1, 3, 4}, {3, 4, 5}));
  run_op_case(matmul_case("matmul (1,3,4) @ (2,4,2)", {1, 3, 4}, {2, 4, 2}));
}

TEST_CASE("op matmul batched @ 2d (rows folded into one GEMM)") {
  run_op_case(matmul_case("matmul (2,3,4) @ (4,5)", {2, 3, 4}, {4, 5}));
}

TEST_CASE("op matmul 2d @ batched") { run_op_case(matmul_case("matmul (3,4) @ (2,4,5)", {3, 4}, {2, 4, 5})); }

TEST_CASE("op matmul 1d") {
  run_op_case(matmul_case("matmul (4) @ (4)", {4}, {4}));
  run_op_case(matmul_case("matmul (4) @ (4,3)", {4}, {4, 3}));
  run_op_case(matmul_case("matmul (3,4) @ (4)", {3, 4}, {4}));
  run_op_case(matmul_case("matmul (4) @ (2,4,3)", {4}, {2, 4, 3}));
  run_op_case(matmul_case("matmul (2,3,4) @ (4)", {2, 3, 4}, {4}));
  CHECK(matmul(f64({4}), f64({4})).dim() == 0);
}

TEST_CASE("op matmul empty dims") {
  CHECK(matmul(f64({0, 3}), f64({3, 2})).shape() == Shape{0, 2});
  Tensor z = matmul(f64({2, 0}), f64({0, 3}));  // an empty sum: zeros
  CHECK_CLOSE(z, zeros({2, 3}, kFloat64), 0, 0);
}

TEST_CASE("op matmul transposed operands") {
  // A column-major operand is x.transpose(-1, -2) of a contiguous x: its values are those of
  // x.transpose(-1, -2).contiguous(). All four layout pairs, 2-D and batched, both dtypes.
  for (DType dt : {kFloat64, kFloat32}) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      for (bool batched : {false, true}) {
        INFO("dtype ", dtype_name(dt), " transposed a ", ta, " transposed b ", tb, " batched ", batched);
        Shape pre = batched ? Shape{3} : Shape{};
        auto make = [&](int64_t r, int64_t c, bool transposed, uint64_t seed) {
          Shape s = pre;
          s.push_back(transposed ? c : r);
          s.push_back(transposed ? r : c);
          Tensor x = uniform(s, -2, 2, dt, seed);
          return transposed ? x.transpose(-1, -2) : x;
        };
        Tensor a = make(6, 9, ta, 1).requires_grad_(), b = make(9, 7, tb, 2).requires_grad_();
        CHECK(a.is_contiguous() == !ta);
        Tensor ac = a.detach().contiguous().requires_grad_(), bc = b.detach().contiguous().requires_grad_();
        Tensor y = matmul(a, b), yc = matmul(ac, bc);
        Tolerance tol = tolerance_for(dt);
        CHECK_CLOSE(y, yc, tol.atol, tol.rtol);
        CHECK_CLOSE(y, ref_matmul(Ref(a), Ref(b)).tensor(), tol.atol, tol.rtol);
        Tensor g = uniform(y.shape(), -1, 1, dt, 3);
        y.backward(g);
        yc.backward(g);
        CHECK_CLOSE(a.grad(), ac.grad(), tol.atol, tol.rtol);
        CHECK_CLOSE(b.grad(), bc.grad(), tol.atol, tol.rtol);
      }
    }
  }
}

TEST_CASE("op matmul transposed operands gradcheck") {
  // gradcheck through a transposed view: the gradient must flow back through the transpose.
  Tensor a = f64({4, 3}).requires_grad_(), b = f64({5, 4}, 2).requires_grad_();
  auto r = gradcheck([](const TensorList& in) { return matmul(in[0].transpose(0, 1), in[1].t()); }, {a, b});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("op matmul large shapes against the reference") {
  // Big enough for Eigen's blocked kernels and for the batch to be spread over threads.
  struct Case { Shape a, b; };
  for (const Case& c : {Case{{130, 200}, {200, 90}}, Case{{8, 70, 130}, {130, 90}}, Case{{8, 70, 130}, {8, 130, 90}},
                        Case{{4, 1, 33, 65}, {5, 65, 17}}}) {
    INFO("shapes ", shape_str(c.a), " @ ", shape_str(c.b));
    Tensor a = f64(c.a, 11), b = f64(c.b, 12);
    Ref expected = ref_matmul(Ref(a), Ref(b));
    CHECK_CLOSE(matmul(a, b), expected.tensor(), 1e-11, 1e-10);
    CHECK_CLOSE(matmul(a.to(kFloat32), b.to(kFloat32)), expected.tensor(), 2e-4, 1e-4);
  }
}

TEST_CASE("op matmul gradient of broadcast operand is summed over the batch") {
  Tensor a = f64({2, 3, 4, 5}).requires_grad_(), b = f64({5, 6}, 2).requires_grad_();
  matmul(a, b).sum().backward();
  // d(sum(A B))/dB[p, j] = sum over all rows of A[.., p]
  Ref ra(a), gb(Shape{5, 6});
  for (int64_t r = 0; r < 24; ++r)
    for (int64_t p = 0; p < 5; ++p)
      for (int64_t j = 0; j < 6; ++j) gb.v[p * 6 + j] += ra.v[r * 5 + p];
  CHECK_CLOSE(b.grad(), gb.tensor(), 1e-12, 1e-10);
}

TEST_CASE("op bmm") {
  OpCase c;
  c.name = "bmm (2,3,4) @ (2,4,5)";
  c.shapes = {{2, 3, 4}, {2, 4, 5}};
  c.op = [](const TensorList& in) { return bmm(in[0], in[1]); };
  c.reference = [](const std::vector<Ref>& in) { return ref_matmul(in[0], in[1]); };
  c.bad_inputs = {
      {"2-d", [] { bmm(f64({3, 4}), f64({4, 5})); }, "[bmm] expected 3-D tensors (B,n,k) @ (B,k,m), got (3,4) @ (4,5)"},
      {"no broadcast", [] { bmm(f64({1, 3, 4}), f64({2, 4, 5})); }, "[bmm] batch sizes differ: (1,3,4) @ (2,4,5)"},
      {"inner dims", [] { bmm(f64({2, 3, 4}), f64({2, 5, 5})); }, "[bmm] inner dimensions differ: (2,3,4) @ (2,5,5)"},
      {"dtype", [] { bmm(f64({2, 3, 4}), f32({2, 4, 5})); }, "[bmm] dtypes differ"},
  };
  run_op_case(c);
}

TEST_CASE("op matmul method and requires_grad only on one side") {
  Tensor a = f64({3, 4}), b = f64({4, 2}, 2).requires_grad_();
  Tensor y = a.matmul(b);
  CHECK(y.requires_grad());
  y.sum().backward();
  CHECK_FALSE(a.grad().defined());
  CHECK(b.grad().shape() == Shape{4, 2});
}

TEST_CASE("op matmul tiles: every layout and cut against the reference, bit-identical for any thread count") {
  // cpu::matmul cuts a product into row tiles (n >= m) or column tiles (m > n) by its shape alone and
  // shares them over the threads (core/cpu/matmul.cpp, plan_tiles). Shapes big enough for several
  // tiles with a ragged last one, each operand row- or column-major, plain and addmm form; the
  // result must match the float64 loops and be the same bits at 1, 2 and 3 threads.
  struct Case { int64_t batch, n, k, m; };
  for (const Case& c : {Case{1, 300, 70, 90}, Case{1, 90, 70, 300}, Case{3, 150, 40, 130}, Case{1, 517, 257, 33}}) {
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      INFO("batch ", c.batch, " n ", c.n, " k ", c.k, " m ", c.m, " transposed a ", ta, " transposed b ", tb);
      auto make = [&](int64_t r, int64_t cols, bool transposed, uint64_t seed) {
        Shape s = c.batch > 1 ? Shape{c.batch} : Shape{};
        s.push_back(transposed ? cols : r);
        s.push_back(transposed ? r : cols);
        Tensor x = uniform(s, -2, 2, kFloat32, seed);
        return transposed ? x.transpose(-1, -2) : x;
      };
      Tensor a = make(c.n, c.k, ta, 21), b = make(c.k, c.m, tb, 22), bias = uniform({c.m}, -1, 1, kFloat32, 23);
      Ref expected = ref_matmul(Ref(a), Ref(b));
      std::vector<std::vector<float>> plain, fused;
#ifdef _OPENMP
      const int saved = omp_get_max_threads();
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
#else
      for (int threads : {1}) {
        (void)threads;
#endif
        Tensor y = matmul(a, b), z = addmm(bias, a, b, 0.5);
        CHECK_CLOSE(y, expected.tensor(), 2e-4, 1e-4);
        CHECK_CLOSE(z, add(mul(expected.tensor(), 0.5), bias.to(kFloat64)), 2e-4, 1e-4);
        plain.push_back(y.to_vector<float>());
        fused.push_back(z.to_vector<float>());
      }
#ifdef _OPENMP
      omp_set_num_threads(saved);
#endif
      for (size_t i = 1; i < plain.size(); ++i) {
        CHECK(plain[i] == plain[0]);  // bit for bit
        CHECK(fused[i] == fused[0]);
      }
    }
  }
}

TEST_CASE("op matmul: gradients of head views come back in their layout, the same bits as through copies") {
  // Attention's q, k, v are (B, H, L, D) views of (B, L, H·D) projections; matmul's backward writes dq,
  // dk (from kᵀ) and dv in those views' layout (autograd/ops/matmul.cpp), so the permute's and the
  // reshape's backwards are views, not copies. The twin: the same graph with each head view copied
  // (contiguous) before the products, whose gradients come back contiguous. float32 and float64.
  const int64_t B = 2, L = 5, H = 3, D = 4;
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dt));
    Tensor x = uniform({3, B, L, H * D}, -1, 1, dt, 11);  // the q, k and v projections' outputs
    Tensor g = uniform({B, L, H * D}, -1, 1, dt, 12);
    auto attend = [&](const Tensor& xl, bool copies) {
      auto head = [&](int64_t i) {
        Tensor h = xl.select(0, i).reshape({B, L, H, D}).permute({0, 2, 1, 3});
        return copies ? h.contiguous() : h;
      };
      Tensor q = head(0), k = head(1), v = head(2);
      Tensor out = matmul(softmax(matmul(q, k.transpose(-1, -2)), -1), v);  // (B, H, L, D)
      return out.permute({0, 2, 1, 3}).reshape({B, L, H * D});
    };
    Tensor x1 = x.clone().requires_grad_(), x2 = x.clone().requires_grad_();
    sum(mul(attend(x1, false), g)).backward();
    sum(mul(attend(x2, true), g)).backward();
    CHECK(bitwise_equal(x1.grad(), x2.grad()));
    // The gradients reaching the head views themselves (grad(), which hands them over as the
    // backwards made them): dense in the views' layout, not contiguous; the twin's contiguous.
    Tensor x3 = x.clone().requires_grad_();
    Tensor q = x3.select(0, 0).reshape({B, L, H, D}).permute({0, 2, 1, 3});
    Tensor k = x3.select(0, 1).reshape({B, L, H, D}).permute({0, 2, 1, 3});
    const TensorList dqk = grad(sum(matmul(q, k.transpose(-1, -2))), {q, k}, Tensor(), /*retain_graph=*/true);
    CHECK(dqk[0].strides() == q.strides());
    CHECK(dqk[1].strides() == k.strides());
    CHECK_FALSE(dqk[0].is_contiguous());
    const Tensor qc = q.contiguous(), kc = k.contiguous();
    const TensorList twin = grad(sum(matmul(qc, kc.transpose(-1, -2))), {qc, kc});
    CHECK(twin[0].is_contiguous());
    CHECK(bitwise_equal(dqk[0].contiguous(), twin[0]));
    CHECK(bitwise_equal(dqk[1].contiguous(), twin[1]));
  }
}

TEST_CASE("backend matmul: the output to write into has the product's shape and unit column stride") {
  // The backward's gradients in their operand's layout go through it (autograd/ops/matmul.cpp).
  Tensor a = uniform({2, 3}, -1, 1, kFloat64, 21), b = uniform({3, 4}, -1, 1, kFloat64, 22);
  // (2, 4), rows 16 apart, each starting on a 64-byte line as a fresh tensor does (Eigen's small
  // products round an element by where the output starts: core/cpu/matmul.h)
  Tensor rows_apart = zeros({2, 16}, TensorOptions(kFloat64)).narrow(1, 8, 4);
  Tensor got = backend::matmul(a, b, {}, "matmul", Tensor(), 1.0, kFloat32, rows_apart);
  CHECK(got.data_ptr<double>() == rows_apart.data_ptr<double>());
  CHECK(bitwise_equal(got.contiguous(), matmul(a, b)));
  check_throws_with([&] { backend::matmul(a, b, {}, "matmul", Tensor(), 1.0, kFloat32, zeros({4, 2}, TensorOptions(kFloat64))); },
                    "[matmul] an output of shape (2,4) and unit column stride, without init, got (4,2)");
  check_throws_with([&] {
    backend::matmul(a, b, {}, "matmul", Tensor(), 1.0, kFloat32, zeros({4, 2}, TensorOptions(kFloat64)).transpose(0, 1));
  }, "[matmul] an output of shape (2,4) and unit column stride, without init, got (2,4)");
  check_throws_with([&] { backend::matmul(a, b, {}, "matmul", zeros({4}, TensorOptions(kFloat64)), 1.0, kFloat32, rows_apart); },
                    "[matmul] an output of shape (2,4) and unit column stride, without init");
}
