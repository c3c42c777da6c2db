// cpu::sgemm (core/cpu/sgemm.h), relgrad's own float32 GEMM, against a float64 loop reference: odd
// sizes around its tile (12×32 on AVX-512, 6×16 on AVX2), k around 64 and past one block, every storage order of A and
// B, alpha ≠ 1, accumulation, leading dimensions wider than the matrix; then its promises: the same
// bits at any alignment, in any cut of C into row or column tiles (what lets cpu::matmul cut by the
// threads in use) and shared by a team (sgemm_shared), also through matmul at 1, 2 and 3 threads. Without AVX-512 or AVX2 + FMA the kernel is not
// offered and these cases report "skipped".
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cpu/gemm_library.h"
#include "core/cpu/sgemm.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// The kernel's cases start with `if (!have_sgemm()) return;`: without AVX-512 or AVX2 + FMA they log "skipped".
bool have_sgemm() {
  if (cpu::sgemm_available()) return true;
  MESSAGE("skipped: relgrad's sgemm needs an AVX-512F or AVX2 + FMA build");
  return false;
}

// relgrad's kernel as matmul's library for a scope; the library and the thread count put back after.
struct KernelChosen {
  cpu::GemmLibrary before = cpu::gemm_library();
#ifdef _OPENMP
  int threads = omp_get_max_threads();
#endif
  KernelChosen() { cpu::set_gemm_library(cpu::GemmLibrary::Relgrad); }
  ~KernelChosen() {
    cpu::set_gemm_library(before);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
  }
  KernelChosen(const KernelChosen&) = delete;
  KernelChosen& operator=(const KernelChosen&) = delete;
};

// Deterministic values in [-1, 1) (a small LCG: no dependence on the library's RNG).
std::vector<float> values(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

// One product: a (n, k), b (k, m) in the given storage orders with ld = the contiguous extent + pad,
// c (n, m) with ldc = m + 7. Returns "" or a description of the worst element.
std::string check_product(int64_t n, int64_t k, int64_t m, bool a_row, bool b_row, float alpha, bool accumulate,
                          uint32_t seed) {
  const int64_t lda = (a_row ? k : n) + 3, ldb = (b_row ? m : k) + 5, ldc = m + 7;
  const std::vector<float> a = values((a_row ? n : k) * lda, seed), b = values((b_row ? k : m) * ldb, seed + 1);
  const std::vector<float> c0 = values(n * ldc, seed + 2);
  std::vector<float> c = c0;
  cpu::sgemm(a.data(), lda, a_row, b.data(), ldb, b_row, c.data(), ldc, alpha, accumulate, n, k, m);
  auto A = [&](int64_t i, int64_t p) { return double(a_row ? a[i * lda + p] : a[i + p * lda]); };
  auto B = [&](int64_t p, int64_t j) { return double(b_row ? b[p * ldb + j] : b[p + j * ldb]); };
  double worst = 0;
  std::string report;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const double got = c[i * ldc + j];
      if (j >= m) {  // past the matrix: must be untouched
        if (got != c0[i * ldc + j])
          return "wrote past column m at (" + std::to_string(i) + ", " + std::to_string(j) + ")";
        continue;
      }
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += A(i, p) * B(p, j);
        mag += std::fabs(A(i, p) * B(p, j));
      }
      const double base = accumulate ? double(c0[i * ldc + j]) : 0.0;
      const double expected = base + double(alpha) * sum;
      // float32 rounding grows at most ~k·eps with the length of the sum; 1e-6·(k + 2) is ~8× that bound
      const double tol = 1e-6 * double(k + 2) * (std::fabs(alpha) * mag + std::fabs(base)) + 1e-30;
      const double excess = std::fabs(got - expected) / tol;
      if (!(excess <= 1.0) && !(excess <= worst)) {  // NaN counts as a failure
        worst = std::isnan(excess) ? INFINITY : excess;
        report = "(" + std::to_string(i) + ", " + std::to_string(j) + "): got " + std::to_string(got) + " expected " +
                 std::to_string(expected) + " tol " + std::to_string(tol);
      }
    }
  return report;
}

}  // namespace

TEST_CASE("sgemm kernel: odd sizes, k around 64 and past one block, every layout, alpha, accumulate, wide ld") {
  if (!have_sgemm()) return;
  const std::pair<int64_t, int64_t> nm[] = {{1, 1},   {1, 300},  {300, 1},  {5, 7},    {12, 32},  {13, 33},
                                            {11, 31}, {25, 17},  {24, 64},  {64, 64},  {100, 255}, {255, 100},
                                            {37, 129}, {300, 300}, {3, 2100},   // 2,100: two blocks of B
                                            {6, 16},  {7, 9},    {18, 8}};  // AVX2's 6×16 tile, one 8-lane vector
  const int64_t ks[] = {1, 63, 64, 65, 257, 1025};  // 257: one block; 1,025: five of 205
  int cases = 0;
  uint32_t seed = 1;
  for (const auto& shape : nm) {
    const int64_t n = shape.first, m = shape.second;
    for (int64_t k : ks)
      for (int layout = 0; layout < 4; ++layout) {
        const bool a_row = layout & 1, b_row = layout & 2;
        // all four (alpha, accumulate) forms on the smaller shapes; one, in turn, on the large ones
        const bool small = n * m * k <= 64 * 64 * 65;
        for (int form = 0; form < 4; ++form) {
          if (!small && form != (cases % 4)) continue;
          const float alpha = form & 1 ? -0.625f : 1.0f;
          const bool accumulate = form & 2;
          const std::string r = check_product(n, k, m, a_row, b_row, alpha, accumulate, seed++);
          CHECK_MESSAGE(r.empty(), "n " << n << " k " << k << " m " << m << " a_row " << a_row << " b_row " << b_row
                                        << " alpha " << alpha << " accumulate " << accumulate << ": " << r);
          ++cases;
        }
      }
  }
  CHECK(cases > 400);
}

// The order of the kernel's arithmetic, which fixes every float32 product's bits on this library:
// each element of C is one chain of FMAs over k in order, its first term a product, where k ≤ 1,024;
// a longer k is cut into ceil(k / 256) blocks as even as possible (the first ones longer by one), each
// such a chain, added to C in order: c = acc · alpha for the first (or fma(acc, alpha, c₀) when
// accumulating), c = fma(acc, alpha, c) for the others. Stated here as a scalar model and compared
// bit for bit, so that a change of the blocking is a visible change of the promise. The model has no
// vector width: an AVX2 build and an AVX-512 one pass it alike, so they give the same bits.
TEST_CASE("sgemm kernel: each element is one FMA chain for k up to 1,024, blocks of at most 256 beyond, bitwise") {
  if (!have_sgemm()) return;
  const int64_t n = 13, m = 37;
  int checked = 0;
  for (int64_t k : {1, 2, 255, 256, 257, 700, 1024, 1025, 1300, 2100})
    for (int form = 0; form < 8; ++form) {
      const bool a_row = form & 1, b_row = form & 2, accumulate = form & 4;
      const float alpha = form & 1 ? 0.3f : 1.0f;
      const int64_t lda = a_row ? k : n, ldb = b_row ? m : k;
      const std::vector<float> a = values(n * k, 40 + form), b = values(k * m, 50 + form), c0 = values(n * m, 60);
      std::vector<float> c = c0;
      cpu::sgemm(a.data(), lda, a_row, b.data(), ldb, b_row, c.data(), m, alpha, accumulate, n, k, m);
      const int64_t blocks = k <= 1024 ? 1 : (k + 255) / 256, kb = (k + blocks - 1) / blocks;
      std::vector<float> model = c0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) {
          auto A = [&](int64_t p) { return a_row ? a[i * lda + p] : a[i + p * lda]; };
          auto B = [&](int64_t p) { return b_row ? b[p * ldb + j] : b[p + j * ldb]; };
          float& out = model[i * m + j];
          for (int64_t p0 = 0; p0 < k; p0 += kb) {
            float acc = A(p0) * B(p0);
            for (int64_t p = p0 + 1; p < std::min(k, p0 + kb); ++p) acc = std::fmaf(A(p), B(p), acc);
            out = p0 == 0 && !accumulate ? acc * alpha : std::fmaf(acc, alpha, out);
          }
        }
      CHECK_MESSAGE(c == model, "k " << k << " a_row " << a_row << " b_row " << b_row << " accumulate " << accumulate);
      ++checked;
    }
  CHECK(checked == 80);
}

TEST_CASE("sgemm kernel: k = 0 gives zeros, or leaves c as it is when accumulating") {
  if (!have_sgemm()) return;
  std::vector<float> c(6, 3.0f);
  const float dummy = 1.0f;
  cpu::sgemm(&dummy, 1, true, &dummy, 1, true, c.data(), 3, 2.0f, true, 2, 0, 3);
  CHECK(c == std::vector<float>(6, 3.0f));
  cpu::sgemm(&dummy, 1, true, &dummy, 1, true, c.data(), 3, 2.0f, false, 2, 0, 3);
  CHECK(c == std::vector<float>(6, 0.0f));
}

TEST_CASE("sgemm kernel: bitwise the same result whatever the operands' alignment") {
  if (!have_sgemm()) return;
  const int64_t n = 45, k = 70, m = 53;
  std::vector<float> ref;
  for (int shift = 0; shift < 4; ++shift) {  // operands and output start `shift` floats past a fresh buffer
    const std::vector<float> a0 = values(n * k, 7), b0 = values(k * m, 8);
    std::vector<float> a(n * k + shift), b(k * m + shift), c(n * m + shift, 0.0f);
    std::copy(a0.begin(), a0.end(), a.begin() + shift);
    std::copy(b0.begin(), b0.end(), b.begin() + shift);
    cpu::sgemm(a.data() + shift, k, true, b.data() + shift, k, false, c.data() + shift, m, 0.5f, false, n, k, m);
    std::vector<float> got(c.begin() + shift, c.end());
    if (shift == 0) ref = got;
    else CHECK_MESSAGE(got == ref, "shift " << shift);
  }
}

TEST_CASE("sgemm kernel: a product cut into row or column tiles, or shared by 2 or 3 threads, gives one call's bits") {
  if (!have_sgemm()) return;
  CHECK(cpu::gemm_cut_independent(cpu::GemmLibrary::Relgrad));
  // shapes of W1's and W0's products (k past one block in one of them), and odd ones
  struct Shape3 {
    int64_t n, k, m;
  };
  const Shape3 shapes[] = {{4096, 256, 96}, {256, 1100, 200}, {100, 37, 300},
                           {300, 600, 77},  {17, 16, 17},    {30, 300, 2100}};
  int cuts = 0;
  for (const Shape3& s : shapes)
    for (int layout = 0; layout < 4; ++layout) {
      const bool a_row = layout & 1, b_row = layout & 2, accumulate = layout == 1;
      const int64_t lda = a_row ? s.k : s.n, ldb = b_row ? s.m : s.k;
      const std::vector<float> a = values(s.n * s.k, 11 + layout), b = values(s.k * s.m, 12 + layout);
      const std::vector<float> c0 = values(s.n * s.m, 13);
      std::vector<float> whole = c0;
      cpu::sgemm(a.data(), lda, a_row, b.data(), ldb, b_row, whole.data(), s.m, 0.75f, accumulate, s.n, s.k, s.m);
      for (int threads : {2, 3}) {  // one call shared by a team: B packed once, rows handed out
        std::vector<float> shared = c0;
        cpu::sgemm_shared(a.data(), lda, a_row, b.data(), ldb, b_row, shared.data(), s.m, 0.75f, accumulate, s.n, s.k,
                          s.m, threads);
        CHECK_MESSAGE(shared == whole, s.n << "x" << s.k << "x" << s.m << " layout " << layout << " shared by " << threads);
      }
      for (int64_t span : {1, 5, 12, 16, 33, 100}) {
        std::vector<float> rows = c0, cols = c0;
        for (int64_t r = 0; r < s.n; r += span)
          cpu::sgemm(a.data() + r * (a_row ? lda : 1), lda, a_row, b.data(), ldb, b_row, rows.data() + r * s.m, s.m,
                     0.75f, accumulate, std::min(span, s.n - r), s.k, s.m);
        for (int64_t j = 0; j < s.m; j += span)
          cpu::sgemm(a.data(), lda, a_row, b.data() + j * (b_row ? 1 : ldb), ldb, b_row, cols.data() + j, s.m, 0.75f,
                     accumulate, s.n, s.k, std::min(span, s.m - j));
        CHECK_MESSAGE(rows == whole, s.n << "x" << s.k << "x" << s.m << " layout " << layout << " row span " << span);
        CHECK_MESSAGE(cols == whole, s.n << "x" << s.k << "x" << s.m << " layout " << layout << " column span " << span);
        cuts += 2;
      }
    }
  CHECK(cuts == 6 * 4 * 6 * 2);  // every shape, layout and span was cut both ways
}

// c_in: the values C starts from read from elsewhere (a Linear layer's bias, one row for all rows; or a
// matrix of its own stride), where cpu::matmul would otherwise copy init into C first. The promise is
// those bits, for sgemm, sgemm_shared and sgemm_window, without C being read (C starts as NaN).
TEST_CASE("sgemm kernel: C's starting values read from c_in give the bits of copying them into C first") {
  if (!have_sgemm()) return;
  struct Shape3 {
    int64_t n, k, m;
  };
  const Shape3 shapes[] = {{37, 300, 77}, {100, 37, 300}, {13, 600, 33}, {40, 40, 40}, {5, 0, 7}};
  const float nan = std::nanf("");
  int checked = 0;
  for (const Shape3& s : shapes)
    for (int layout = 0; layout < 4; ++layout)
      for (int64_t ld_in : {int64_t(0), s.m + 3}) {  // a bias row, or a matrix rows m + 3 apart
        const bool a_row = layout & 1, b_row = layout & 2;
        const int64_t lda = a_row ? s.k : s.n, ldb = b_row ? s.m : s.k;
        const std::vector<float> a = values(std::max<int64_t>(1, s.n * s.k), 21 + layout);
        const std::vector<float> b = values(std::max<int64_t>(1, s.k * s.m), 22 + layout);
        const std::vector<float> in = values((ld_in ? s.n : 1) * (s.m + 3), 23);
        std::vector<float> copied(s.n * s.m);  // the old road: c_in copied into C, then accumulate
        for (int64_t i = 0; i < s.n; ++i)
          for (int64_t j = 0; j < s.m; ++j) copied[i * s.m + j] = in[i * ld_in + j];
        std::vector<float> want = copied;
        cpu::sgemm(a.data(), lda, a_row, b.data(), ldb, b_row, want.data(), s.m, 0.75f, true, s.n, s.k, s.m);
        std::vector<float> got(s.n * s.m, nan);
        cpu::sgemm(a.data(), lda, a_row, b.data(), ldb, b_row, got.data(), s.m, 0.75f, true, s.n, s.k, s.m, in.data(),
                   ld_in);
        CHECK_MESSAGE(got == want, s.n << "x" << s.k << "x" << s.m << " layout " << layout << " ld_in " << ld_in);
        std::vector<float> shared(s.n * s.m, nan);
        cpu::sgemm_shared(a.data(), lda, a_row, b.data(), ldb, b_row, shared.data(), s.m, 0.75f, true, s.n, s.k, s.m,
                          2, in.data(), ld_in);
        CHECK_MESSAGE(shared == want, s.n << "x" << s.k << "x" << s.m << " layout " << layout << " shared");
        // sgemm_window: a causal Output window (compared inside it: outside is unspecified) and a
        // Left window with empty rows (every element defined; some tiles have no term in a block)
        std::vector<int64_t> lo(s.n, 0), hi(s.n), lo_left(s.n), hi_left(s.n);
        for (int64_t i = 0; i < s.n; ++i) {
          hi[i] = std::min(i + 1, s.m);
          lo_left[i] = std::min(s.k, (i * 7) % 50);
          hi_left[i] = i % 5 == 2 ? lo_left[i] : std::min(s.k, lo_left[i] + 1 + (i * 13) % 80);
        }
        for (WindowOn on : {WindowOn::Output, WindowOn::Left}) {
          cpu::GemmWindow w;
          w.on = on;
          w.lo = on == WindowOn::Output ? lo.data() : lo_left.data();
          w.hi = on == WindowOn::Output ? hi.data() : hi_left.data();
          std::vector<float> window_want = copied, window_got(s.n * s.m, nan);
          cpu::sgemm_window(a.data(), lda, a_row, b.data(), ldb, b_row, window_want.data(), s.m, 0.75f, true, s.n, s.k,
                            s.m, w);
          cpu::sgemm_window(a.data(), lda, a_row, b.data(), ldb, b_row, window_got.data(), s.m, 0.75f, true, s.n, s.k,
                            s.m, w, in.data(), ld_in);
          bool same = true;
          for (int64_t i = 0; i < s.n; ++i)
            for (int64_t j = 0; j < s.m; ++j)
              if ((on == WindowOn::Left || j < hi[i]) && !(window_got[i * s.m + j] == window_want[i * s.m + j]))
                same = false;
          CHECK_MESSAGE(same, s.n << "x" << s.k << "x" << s.m << " layout " << layout << " window "
                                  << (on == WindowOn::Output ? "Output" : "Left") << " ld_in " << ld_in);
          ++checked;
        }
      }
  CHECK(checked == 5 * 4 * 2 * 2);
}

// Through the ops: init read in place (a contiguous bias; a batch of scores' initial values) against
// the same values in a layout the kernel does not read in place (column stride 2), which matmul copies
// into C first.
TEST_CASE("sgemm kernel through addmm and window_scores: init read in place gives the bits of init copied") {
  if (!have_sgemm()) return;
  const KernelChosen chosen;
  Generator gen(17);
  const Tensor x = randn({3, 50, 96}, {}, &gen), w = randn({96, 130}, {}, &gen);
  const Tensor bias_pairs = randn({130, 2}, {}, &gen);
  const Tensor bias_strided = bias_pairs.select(1, 0), bias = bias_strided.clone();
  CHECK(bias_strided.stride(0) == 2);
  CHECK(addmm(bias, x, w).to_vector<float>() == addmm(bias_strided, x, w).to_vector<float>());
  const Tensor rows = randn({3, 50, 1}, {}, &gen);  // one value per row: column stride 0, copied first
  CHECK(addmm(rows, x, w).to_vector<float>() == addmm(rows.expand({3, 50, 130}).clone(), x, w).to_vector<float>());
  const Tensor q = randn({2, 3, 70, 16}, {}, &gen), k = randn({2, 3, 70, 16}, {}, &gen);
  const Tensor init_pairs = randn({3, 70, 70, 2}, {}, &gen);  // broadcast over the batch's first dim
  const Tensor init_strided = init_pairs.select(3, 0), init = init_strided.clone();
  const Tensor kt = k.transpose(-1, -2);
  CHECK(addmm(init, q, kt).to_vector<float>() == addmm(init_strided, q, kt).to_vector<float>());
  std::vector<int64_t> positions(70);
  for (int64_t i = 0; i < 70; ++i) positions[i] = i;
  const WindowPtr causal = MatrixWindow::causal(positions, 70, "test");
  CHECK(window_scores(q, kt, causal, init).to_vector<float>() ==
        window_scores(q, kt, causal, init_strided).to_vector<float>());
}

TEST_CASE("sgemm kernel through matmul: the same bits at 1, 2 and 3 threads, and as one call per batch entry") {
  if (!have_sgemm()) return;
  const KernelChosen chosen;
  Generator gen(5);
  // a Linear's tall product (cut into row tiles at 2 and 3 threads) and a batch of attention products
  const Tensor x = randn({700, 96}, {}, &gen), w = randn({200, 96}, {}, &gen);
  const Tensor q = randn({3, 4, 40, 16}, {}, &gen), k = randn({3, 4, 40, 16}, {}, &gen);
  std::vector<float> ref_linear, ref_scores;
  for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    const std::vector<float> linear = matmul(x, w.transpose(0, 1)).to_vector<float>();
    const std::vector<float> scores = matmul(q, k.transpose(-1, -2)).to_vector<float>();
    if (threads == 1) {
      ref_linear = linear;
      ref_scores = scores;
      // one kernel call per batch entry gives the same bits as matmul's tiles
      std::vector<float> direct(700 * 200);
      cpu::sgemm(x.data_ptr<float>(), 96, true, w.data_ptr<float>(), 96, false, direct.data(), 200, 1.0f, false, 700,
                 96, 200);
      CHECK(direct == linear);
    } else {
      CHECK_MESSAGE(linear == ref_linear, threads << " threads");
      CHECK_MESSAGE(scores == ref_scores, threads << " threads");
    }
  }
}

// A Linear layer's transposed weight gets its gradient in the weight's own layout, (gᵀ·x)ᵀ
// (autograd/ops/matmul.cpp): dense, so the engine keeps it without a copy, and on relgrad's kernel the
// same bits as the product xᵀ·g of a contiguous (in, out) weight (each element one chain over the rows).
TEST_CASE("sgemm kernel: a transposed weight's gradient is dense and the bits of the contiguous weight's") {
  if (!have_sgemm()) return;
  const KernelChosen chosen;
  Generator gen(23);
  const Tensor x = randn({4, 75, 96}, {}, &gen), g = randn({4, 75, 130}, {}, &gen), bias = randn({130}, {}, &gen);
  Tensor w = randn({130, 96}, {}, &gen).requires_grad_();           // (out, in), used as wᵀ
  Tensor w_in_out = w.detach().transpose(0, 1).contiguous().requires_grad_();  // (in, out), used as it is
  addmm(bias, x, w.transpose(0, 1)).backward(g);
  addmm(bias, x, w_in_out).backward(g);
  CHECK(w.grad().is_contiguous());
  CHECK(w.grad().to_vector<float>() == w_in_out.grad().transpose(0, 1).contiguous().to_vector<float>());
}

// relgrad's float64 tiles are Eigen's, whose elements can depend on the tile: they keep the cores' cut,
// so float64 products stay the same bits at any thread count with the library chosen.
TEST_CASE("sgemm kernel chosen: float64 products (Eigen's tiles) the same bits at 1, 2 and 3 threads") {
  if (!have_sgemm()) return;
  const KernelChosen chosen;
  Generator gen(9);
  const std::pair<Tensor, Tensor> products[] = {
      {randn({100, 37}, TensorOptions(kFloat64), &gen), randn({37, 300}, TensorOptions(kFloat64), &gen)},
      {randn({256, 64}, TensorOptions(kFloat64), &gen), randn({64, 1000}, TensorOptions(kFloat64), &gen)},
      {randn({64, 544}, TensorOptions(kFloat64), &gen), randn({544, 256}, TensorOptions(kFloat64), &gen)},
      {randn({300, 1000}, TensorOptions(kFloat64), &gen), randn({1000, 77}, TensorOptions(kFloat64), &gen)}};
  for (const std::pair<Tensor, Tensor>& product : products) {
    const Tensor &a = product.first, &b = product.second;  // (not a structured binding: CHECK_MESSAGE's lambda captures them)
    std::vector<double> ref;
    for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
      omp_set_num_threads(threads);
#endif
      const std::vector<double> got = matmul(a, b).to_vector<double>();
      if (threads == 1) ref = got;
      else CHECK_MESSAGE(got == ref, shape_str(a.shape()) << " @ " << shape_str(b.shape()) << ", " << threads << " threads");
    }
  }
}
