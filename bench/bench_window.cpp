// The products with a window (autograd/ops.h: window_scores, window_apply, window_apply_t) against the
// dense products they replace in causal attention, on W1's attention shapes (bench/bench_train.cpp:
// 4,096 tokens a step, 4 heads of 64, so B·H = 64·256/L matrices of L × L), float32, in one process,
// each pair timed alternately rep by rep (median of 21 after 2 warm-up reps):
//   scores        q·kᵀ                    matmul            against window_scores
//   scores+term   term + q·kᵀ             addmm             against window_scores with init
//   apply         P·v (P zero outside)    matmul            against window_apply
//   apply_t       Pᵀ·dO                   matmul(Pᵀ, ·)     against window_apply_t
//   band          q·Eᵀ (a table's band)   matmul            against window_scores on the relative band
// The skipping path runs on relgrad's kernel only (AVX-512; it is set here when available), and the
// figure is the dense time over the windowed one.
//   OMP_NUM_THREADS=1 RELGRAD_BENCH_CLOCK=cpu ./build/bench/bench_window [--lengths 256,1024]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu/gemm_library.h"
#include "core/cpu/matmul.h"
#include "core/cpu/sgemm.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

bool cpu_clock = false;
double now() {
  timespec t;
  clock_gettime(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of a and b, timed alternately.
std::pair<double, double> alternate(const std::function<void()>& a, const std::function<void()>& b) {
  std::vector<double> ta, tb;
  for (int rep = 0; rep < 23; ++rep) {
    double t0 = now();
    a();
    double t1 = now();
    b();
    double t2 = now();
    if (rep >= 2) ta.push_back(1e3 * (t1 - t0)), tb.push_back(1e3 * (t2 - t1));
  }
  return {median(ta), median(tb)};
}

}  // namespace

int main(int argc, char** argv) {
  const char* clock_env = std::getenv("RELGRAD_BENCH_CLOCK");
  cpu_clock = clock_env && std::strcmp(clock_env, "cpu") == 0;
  std::vector<int64_t> lengths = {256, 1024};
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--lengths") == 0) {
      lengths.clear();
      std::stringstream in(argv[i + 1]);
      for (std::string item; std::getline(in, item, ',');) lengths.push_back(std::stoll(item));
    }
  if (!cpu::sgemm_available()) {
    std::printf("relgrad's kernel needs AVX-512F or AVX2 + FMA: the window products compute the dense composite here\n");
    return 0;
  }
  cpu::set_gemm_library(cpu::GemmLibrary::Relgrad);
  std::printf("clock: %s; %s\n\n", cpu_clock ? "per-thread CPU time" : "wall", cpu::cpu_model_name().c_str());
  std::printf("| L | matrices | product | dense ms | window ms | dense ÷ window |\n|---:|---:|---|---:|---:|---:|\n");
  NoGradGuard no_grad;
  for (int64_t L : lengths) {
    const int64_t count = std::max<int64_t>(1, 4096 / L) * 4, D = 64;
    std::vector<int64_t> positions(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) positions[i] = i;
    const WindowPtr w = MatrixWindow::causal(positions, L, "bench_window");
    // The band a causal relative table's trimmed rows leave: query i reads rows [L − 1 − i, L).
    std::vector<int64_t> band_lo(static_cast<size_t>(L)), band_hi(static_cast<size_t>(L), L);
    for (int64_t i = 0; i < L; ++i) band_lo[i] = L - 1 - i;
    const WindowPtr band = MatrixWindow::make(L, L, band_lo, band_hi, "bench_window");
    Generator g(1);
    const Tensor q = rand({count, L, D}, kFloat32, &g), k = rand({count, L, D}, kFloat32, &g);
    const Tensor term = rand({count, L, L}, kFloat32, &g), table = rand({L, D}, kFloat32, &g);
    const Tensor p = masked_fill(rand({count, L, L}, kFloat32, &g), w->outside(Device::cpu()), 0.0);
    struct Row {
      const char* what;
      std::function<void()> dense, window;
    };
    const Row rows[] = {
        {"scores", [&] { matmul(q, k.transpose(-1, -2)); }, [&] { window_scores(q, k.transpose(-1, -2), w); }},
        {"scores+term", [&] { addmm(term, q, k.transpose(-1, -2)); },
         [&] { window_scores(q, k.transpose(-1, -2), w, term); }},
        {"apply", [&] { matmul(p, k); }, [&] { window_apply(p, k, w); }},
        {"apply_t", [&] { matmul(p.transpose(-1, -2), q); }, [&] { window_apply_t(p, q, w); }},
        {"band", [&] { matmul(q, table.transpose(-1, -2)); }, [&] { window_scores(q, table.transpose(-1, -2), band); }},
    };
    for (const Row& r : rows) {
      const auto [dense, window] = alternate(r.dense, r.window);
      std::printf("| %lld | %lld | %s | %.2f | %.2f | %.2f |\n", static_cast<long long>(L),
                  static_cast<long long>(count), r.what, dense, window, dense / window);
    }
  }
  return 0;
}
