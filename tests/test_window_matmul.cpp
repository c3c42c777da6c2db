// The products with a window (autograd/ops/window_matmul.cpp, core/backend/window_matmul.h, the kernel
// core/cpu/sgemm.h: sgemm_window) against their composite twin, masked_fill of the window's outside
// then matmul: the same values on relgrad's kernel (the skipped terms are zeros), whatever the window
// (causal, ragged, empty rows), layout (transposed and head-strided views, broadcast batch), k (past the
// kernel's 256-long blocks) or thread count; float64 gradients against finite differences; the dense
// composite path (float64, another library) to rounding; bad windows refused with their values.
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cpu/gemm_library.h"
#include "attention_testing.h"
#include "core/cpu/sgemm.h"
#include "layers/schemes.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// relgrad's kernel as the library for a scope (the cases that check the skipping path need it).
struct KernelChosen {
  cpu::GemmLibrary before = cpu::gemm_library();
  explicit KernelChosen(cpu::GemmLibrary library = cpu::GemmLibrary::Relgrad) { cpu::set_gemm_library(library); }
  ~KernelChosen() { cpu::set_gemm_library(before); }
  KernelChosen(const KernelChosen&) = delete;
  KernelChosen& operator=(const KernelChosen&) = delete;
};

bool have_kernel() {
  if (cpu::sgemm_available()) return true;
  MESSAGE("skipped: the windowed kernel needs an AVX-512F or AVX2 + FMA build (elsewhere the composite runs, tested below)");
  return false;
}

// A ragged window: row i keeps [lo, hi) drawn from a small LCG, some rows empty, not monotone.
WindowPtr ragged(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<int64_t> lo(static_cast<size_t>(rows)), hi(static_cast<size_t>(rows));
  uint32_t s = seed * 2654435761u + 7u;
  auto next = [&](int64_t bound) {
    s = s * 1664525u + 1013904223u;
    return static_cast<int64_t>((s >> 8) % static_cast<uint32_t>(bound + 1));
  };
  for (int64_t i = 0; i < rows; ++i) {
    int64_t a = next(cols), b = next(cols);
    if (i % 7 == 3) b = a;  // an empty row
    lo[i] = std::min(a, b), hi[i] = std::max(a, b);
  }
  return MatrixWindow::make(rows, cols, lo, hi, "test");
}

std::vector<int64_t> iota_positions(int64_t n, int64_t first) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = first + i;
  return p;
}

// The composite twins.
Tensor outside(const WindowPtr& w, const Tensor& like) { return w->outside(like.device()); }
Tensor scores_twin(const Tensor& a, const Tensor& b, const WindowPtr& w, const Tensor& init = Tensor()) {
  Tensor full = init.defined() ? addmm(init, a, b) : matmul(a, b);
  return masked_fill(full, outside(w, full), 0.0);
}
Tensor apply_twin(const Tensor& x, const Tensor& b, const WindowPtr& w) {
  return matmul(masked_fill(x, outside(w, x), 0.0), b);
}
Tensor apply_t_twin(const Tensor& x, const Tensor& b, const WindowPtr& w) {
  return matmul(masked_fill(x, outside(w, x), 0.0).transpose(-1, -2), b);
}

struct Case {
  const char* what;
  int64_t batch, R, S, k;
  WindowPtr w;
};

std::vector<Case> cases() {
  return {
      {"causal 64 × 64, k 16", 3, 64, 64, 16, MatrixWindow::causal(iota_positions(64, 0), 64, "test")},
      {"causal 40 queries at positions 60.., 100 keys, k 300", 2, 40, 100, 300,
       MatrixWindow::causal(iota_positions(40, 60), 100, "test")},
      {"causal 37 × 37 (odd tiles), k 65", 2, 37, 37, 65, MatrixWindow::causal(iota_positions(37, 0), 37, "test")},
      {"ragged 50 × 70, k 33", 2, 50, 70, 33, ragged(50, 70, 1)},
      {"ragged 13 × 300, k 520 (two k blocks)", 1, 13, 300, 520, ragged(13, 300, 2)},
      {"empty window 24 × 24, k 8", 2, 24, 24, 8, MatrixWindow::make(24, 24, std::vector<int64_t>(24, 5),
                                                                       std::vector<int64_t>(24, 5), "test")},
  };
}

}  // namespace

TEST_CASE("window products: the same values as the composite on relgrad's kernel, forward and backward") {
  if (!have_kernel()) return;
  KernelChosen kernel;
  uint64_t seed = 10;
  for (const Case& c : cases()) {
    INFO(c.what);
    const Tensor a = uniform({c.batch, c.R, c.k}, -1, 1, kFloat32, ++seed).requires_grad_(true);
    // b as a transposed view (.., k, S), as attention's kᵀ
    const Tensor bt = uniform({c.batch, c.S, c.k}, -1, 1, kFloat32, ++seed).requires_grad_(true);
    const Tensor init = uniform({c.batch, c.R, c.S}, -1, 1, kFloat32, ++seed).requires_grad_(true);
    const Tensor x = uniform({c.batch, c.R, c.S}, -1, 1, kFloat32, ++seed).requires_grad_(true);
    const Tensor v = uniform({c.batch, c.S, c.k}, -1, 1, kFloat32, ++seed).requires_grad_(true);
    const Tensor u = uniform({c.batch, c.R, c.k}, -1, 1, kFloat32, ++seed).requires_grad_(true);
    const TensorList inputs{a, bt, init, x, v, u};
    using Fn = std::function<Tensor()>;
    const std::vector<std::pair<Fn, Fn>> pairs = {
        {[&] { return window_scores(a, bt.transpose(-1, -2), c.w); },
         [&] { return scores_twin(a, bt.transpose(-1, -2), c.w); }},
        {[&] { return window_scores(a, bt.transpose(-1, -2), c.w, init); },
         [&] { return scores_twin(a, bt.transpose(-1, -2), c.w, init); }},
        {[&] { return window_apply(x, v, c.w); }, [&] { return apply_twin(x, v, c.w); }},
        {[&] { return window_apply_t(x, u, c.w); }, [&] { return apply_t_twin(x, u, c.w); }},
    };
    for (size_t p = 0; p < pairs.size(); ++p) {
      INFO("product " << p);
      const Tensor got = pairs[p].first(), want = pairs[p].second();
      CHECK_CLOSE(got, want, 0.0, 0.0);  // equal values (a skipped term is a zero the dense sum adds)
      const Tensor weights = uniform(got.shape(), -1, 1, kFloat32, 99);
      const TensorList g1 = grad(sum(mul(got, weights)), inputs);
      const TensorList g2 = grad(sum(mul(want, weights)), inputs);
      for (size_t i = 0; i < inputs.size(); ++i) {
        INFO("gradient of input " << i);
        REQUIRE(g1[i].defined() == g2[i].defined());
        if (g1[i].defined()) CHECK_CLOSE(g1[i], g2[i], 1e-6, 1e-6);
      }
    }
  }
}

TEST_CASE("window products: operands read in place (head views, broadcast batch) and any thread count") {
  if (!have_kernel()) return;
  KernelChosen kernel;
  const int64_t B = 2, H = 3, T = 45, D = 16;
  const WindowPtr w = MatrixWindow::causal(iota_positions(T, 0), T, "test");
  // (B, T, H·D) projections viewed as (B, H, T, D) heads, as MultiHeadAttention's q, k, v
  const Tensor qp = uniform({B, T, H * D}, -1, 1, kFloat32, 3), kp = uniform({B, T, H * D}, -1, 1, kFloat32, 4);
  const Tensor q = qp.view({B, T, H, D}).permute({0, 2, 1, 3}), k = kp.view({B, T, H, D}).permute({0, 2, 1, 3});
  const Tensor table = uniform({H, T, D}, -1, 1, kFloat32, 5);  // broadcast over B
  const Tensor x = uniform({B, H, T, T}, -1, 1, kFloat32, 6);
  std::vector<Tensor> runs;
  for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
#endif
    runs.push_back(window_scores(q, k.transpose(-1, -2), w));
    runs.push_back(window_scores(q, table.transpose(-1, -2), w));
    runs.push_back(window_apply(x, k, w));
    runs.push_back(window_apply_t(x, q, w));
#ifdef _OPENMP
    omp_set_num_threads(before);
#endif
  }
  CHECK_CLOSE(runs[0], scores_twin(q, k.transpose(-1, -2), w), 0.0, 0.0);
  CHECK_CLOSE(runs[1], scores_twin(q, table.transpose(-1, -2), w), 0.0, 0.0);
  CHECK_CLOSE(runs[2], apply_twin(x, k, w), 0.0, 0.0);
  CHECK_CLOSE(runs[3], apply_t_twin(x, q, w), 0.0, 0.0);
  for (size_t i = 4; i < runs.size(); ++i) CHECK_MESSAGE(bitwise_equal(runs[i], runs[i % 4]), "run " << i);
}

TEST_CASE("window products: float64 gradients against finite differences, and the composite path") {
  const WindowPtr w = ragged(9, 11, 3);
  const Tensor a = uniform({2, 9, 5}, -1, 1, kFloat64, 1).requires_grad_(true);
  const Tensor b = uniform({2, 5, 11}, -1, 1, kFloat64, 2).requires_grad_(true);
  const Tensor init = uniform({9, 11}, -1, 1, kFloat64, 3).requires_grad_(true);  // broadcast over the batch
  const Tensor x = uniform({2, 9, 11}, -1, 1, kFloat64, 4).requires_grad_(true);
  const Tensor v = uniform({11, 4}, -1, 1, kFloat64, 5).requires_grad_(true);  // broadcast
  const Tensor u = uniform({2, 9, 4}, -1, 1, kFloat64, 6).requires_grad_(true);
  auto r1 = gradcheck([&](const TensorList& in) { return window_scores(in[0], in[1], w, in[2]); }, {a, b, init});
  CHECK_MESSAGE(r1.ok, r1.message);
  auto r2 = gradcheck([&](const TensorList& in) { return window_apply(in[0], in[1], w); }, {x, v});
  CHECK_MESSAGE(r2.ok, r2.message);
  auto r3 = gradcheck([&](const TensorList& in) { return window_apply_t(in[0], in[1], w); }, {x, u});
  CHECK_MESSAGE(r3.ok, r3.message);
  // the dense composite path (float64 always takes it) against the twins
  const Tolerance tol = tolerance_for(kFloat64);
  CHECK_CLOSE(window_scores(a, b, w, init), scores_twin(a, b, w, init), tol.atol, tol.rtol);
  CHECK_CLOSE(window_apply(x, v, w), apply_twin(x, v, w), tol.atol, tol.rtol);
  CHECK_CLOSE(window_apply_t(x, u, w), apply_t_twin(x, u, w), tol.atol, tol.rtol);
  // float32 on another library: the composite too
  KernelChosen eigen(cpu::GemmLibrary::Eigen);
  const Tensor xf = x.detach().to(kFloat32), vf = v.detach().to(kFloat32);
  CHECK_CLOSE(window_apply(xf, vf, w), apply_twin(xf, vf, w), 1e-6, 1e-6);
}

TEST_CASE("window products: bad windows and operands are refused with their values") {
  check_throws_with([] { MatrixWindow::make(2, 4, {0, 3}, {1, 2}, "test"); },
                    "window row 1 keeps columns [3, 2), which is not within [0, 4]");
  check_throws_with([] { MatrixWindow::make(2, 4, {0, 0}, {1, 5}, "test"); },
                    "window row 1 keeps columns [0, 5)");
  check_throws_with([] { MatrixWindow::make(3, 4, {0}, {1}, "test"); }, "needs 3 row ranges, got 1 and 1");
  const WindowPtr w = MatrixWindow::causal(iota_positions(4, 0), 4, "test");
  const Tensor a = zeros({4, 3}), b = zeros({3, 5});
  check_throws_with([&] { window_scores(a, b, w); }, "[window_scores] the window is (4, 4) but the windowed matrix is (4, 5)");
  check_throws_with([&] { window_apply(a, b, w); }, "[window_apply] the window is (4, 4) but the windowed matrix is (4, 3)");
  check_throws_with([&] { window_apply_t(zeros({4, 4}), zeros({3, 2}), w); }, "[window_apply_t] xᵀ @ b needs");
  check_throws_with([&] { window_scores(a, b, nullptr); }, "[window_scores] called without a window");
  check_throws_with([&] { window_scores(a, zeros({3, 4}, kFloat64), w); }, "dtypes differ");
  {
    AutocastGuard bf16(kBFloat16);
    check_throws_with([&] { window_apply(zeros({4, 4}), zeros({4, 2}), w); },
                      "[window_apply] has no 16-bit (autocast) form; call it outside autocast");
  }
}

TEST_CASE("window products: the causal window and its column bounds") {
  const WindowPtr w = MatrixWindow::causal({2, 3, 9}, 6, "test");  // positions past the keys clamp to them
  CHECK(w->lo == std::vector<int64_t>{0, 0, 0});
  CHECK(w->hi == std::vector<int64_t>{3, 4, 6});
  CHECK(w->col_lo == std::vector<int64_t>{0, 0, 0, 1, 2, 2});
  CHECK(w->col_hi == std::vector<int64_t>{3, 3, 3, 3, 3, 3});
  CHECK(w->density() == doctest::Approx(13.0 / 18.0));
  const Tensor out = w->outside(Device::cpu());
  CHECK(out.to_vector<bool>() == std::vector<bool>{false, false, false, true, true, true,    //
                                                   false, false, false, false, true, true,   //
                                                   false, false, false, false, false, false});
}

TEST_CASE("window products: causal attention skips the future with the same values, for every scheme") {
  if (!have_kernel()) return;
  KernelChosen kernel;
  const int64_t C = 32, H = 4, B = 2, t = 75;
  const Tensor x = uniform({B, t, C}, -1, 1, kFloat32, 5);
  for (const SchemeEntry& entry : positional_schemes()) {
    for (int mode = 0; mode < 2; ++mode) {  // 0: causal self-attention; 1: the same with padded keys
      INFO(entry.name << " mode " << mode);
      PositionalConfig config;
      config.scheme = entry.name;
      const std::string place = "decoder_self";
      Generator init(3);
      auto scheme = entry.make ? entry.make({config, place, C, H, C / H, true, &init}) : nullptr;
      auto m = std::make_shared<MultiHeadAttention>(C, H, scheme, 0.0, true, &init);
      AttentionOptions o;
      o.causal = true;
      if (mode == 1) {
        std::vector<bool> pad(static_cast<size_t>(B * t), false);
        for (int64_t j = 0; j < t; ++j) pad[t + j] = j >= t - 9;
        o.key_padding_mask = from_vector<bool>(pad, {B, t});
      }
      m->core = AttentionCore::Composite;
      m->skip_masked_products = false;
      const TensorList dense = layer_run(*m, x, x, o);
      m->skip_masked_products = true;
      const uint64_t made = m->causal_windows.misses();
      const TensorList skipped = layer_run(*m, x, x, o);
      CHECK(m->causal_windows.misses() + m->causal_windows.hits() > made);  // the window path ran
      REQUIRE(dense.size() == skipped.size());
      for (size_t i = 0; i < dense.size(); ++i) {
        INFO("tensor " << i);
        CHECK_CLOSE(skipped[i], dense[i], 0.0, 0.0);
      }
    }
  }
}
