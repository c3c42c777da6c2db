// GEMM alternatives on the shapes of the training workloads W1/W2 (bench/bench_train.cpp) and W0 (the
// default run); float32, in one process, timed alternately rep by rep:
//   eigen, openblas, blis, relgrad  each GEMM library relgrad can call (core/cpu/gemm_library.h) that
//             is found here (relgrad: its own AVX-512 kernel, core/cpu/sgemm.h), through
//             cpu::gemm_tile: one call per batch entry, on the calling thread, as cpu::matmul's tiles
//             call it;
//   matmul <library>  relgrad's public matmul (output allocation included) through each library in
//             turn (cpu::set_gemm_library), on the OpenMP threads: its tiles, or for relgrad's kernel
//             one shared call (core/cpu/sgemm.h); the machine's own choice is named in the heading.
// Batched shapes run their GEMMs in turn on the calling thread (matmul spreads them over the OpenMP
// threads). With OMP_NUM_THREADS=2 and the wall clock, the matmul columns compare the libraries at
// 2 threads. GFLOP/s = 2·n·k·m·batch / median time of 15 reps (after 2 warm-up reps).
// Clock: RELGRAD_BENCH_CLOCK=wall (default) or cpu — per-thread CPU time, the only fair figure on
// a machine shared with other jobs; meaningful at OMP_NUM_THREADS=1 (it counts the calling thread).
//   OMP_NUM_THREADS=1 RELGRAD_BENCH_CLOCK=cpu ./build-bench/bench/bench_gemm
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu/gemm_library.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

struct Case {
  const char* what;
  int64_t batch, n, k, m;
  bool a_transposed;  // a given as (k, n): Pᵀ, dSᵀ
  bool b_transposed;  // b given as (m, k): Kᵀ, Vᵀ, a Linear layer's weight
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool cpu_clock = false;
double now() {
  timespec t;
  clock_gettime(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main() {
  const char* clock_env = std::getenv("RELGRAD_BENCH_CLOCK");
  cpu_clock = clock_env && std::strcmp(clock_env, "cpu") == 0;
  std::vector<cpu::GemmLibrary> libraries;
  for (cpu::GemmLibrary library : cpu::kGemmLibraries)
    if (cpu::gemm_library_available(library)) libraries.push_back(library);
  const Case cases[] = {
      {"Linear qkv (4096x256)·(768x256)ᵀ", 1, 4096, 256, 768, false, true},
      {"FFN up (4096x256)·(1024x256)ᵀ", 1, 4096, 256, 1024, false, true},
      {"FFN down (4096x1024)·(256x1024)ᵀ", 1, 4096, 1024, 256, false, true},
      {"dW (256x4096)·(4096x1024)", 1, 256, 4096, 1024, false, false},
      {"W1 Q·Kᵀ 64 × (256x64)·(256x64)ᵀ", 64, 256, 64, 256, false, true},
      {"W1 P·V 64 × (256x256)·(256x64)", 64, 256, 256, 64, false, false},
      {"W1 dP = dO·Vᵀ 64 × (256x64)·(256x64)ᵀ", 64, 256, 64, 256, false, true},
      {"W1 dV = Pᵀ·dO 64 × (256x256)ᵀ·(256x64)", 64, 256, 256, 64, true, false},
      {"W1 dQ = dS·K 64 × (256x256)·(256x64)", 64, 256, 256, 64, false, false},
      {"W1 dK = dSᵀ·Q 64 × (256x256)ᵀ·(256x64)", 64, 256, 256, 64, true, false},
      {"W2 Q·Kᵀ 64 × (128x64)·(128x64)ᵀ", 64, 128, 64, 128, false, true},
      {"W2 P·V 64 × (128x128)·(128x64)", 64, 128, 128, 64, false, false},
      {"W2 dV = Pᵀ·dO 64 × (128x128)ᵀ·(128x64)", 64, 128, 128, 64, true, false},
      {"small 256 × (64x64)·(64x64)", 256, 64, 64, 64, false, false},
      // W0, the default run (configs/default.toml): 32 sequences of up to 17 positions, d_model 64,
      // 4 heads of 16, d_ff 256.
      {"W0 Linear (544x64)·(64x64)ᵀ", 1, 544, 64, 64, false, true},
      {"W0 FFN up (544x64)·(256x64)ᵀ", 1, 544, 64, 256, false, true},
      {"W0 FFN down (544x256)·(64x256)ᵀ", 1, 544, 256, 64, false, true},
      {"W0 dW (544x256)ᵀ·(544x64)", 1, 256, 544, 64, true, false},
      {"W0 Q·Kᵀ 128 × (17x16)·(17x16)ᵀ", 128, 17, 16, 17, false, true},
      {"W0 P·V 128 × (17x17)·(17x16)", 128, 17, 17, 16, false, false},
      {"W0 dV = Pᵀ·dO 128 × (17x17)ᵀ·(17x16)", 128, 17, 17, 16, true, false},
      {"edge 4 × (1024x256)·(256x1024)", 4, 1024, 256, 1024, false, false},
  };
  std::printf("clock: %s; matmul's library: %s (%s)\n", cpu_clock ? "per-thread CPU time" : "wall",
              cpu::gemm_library_name(cpu::gemm_library()), cpu::gemm_choice().how.c_str());
  std::printf("| shape |");
  for (cpu::GemmLibrary library : libraries) std::printf(" %s |", cpu::gemm_library_name(library));
  for (cpu::GemmLibrary library : libraries) std::printf(" matmul %s |", cpu::gemm_library_name(library));
  std::printf("\n|---|");
  for (size_t i = 0; i < 2 * libraries.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const Case& s : cases) {
    Generator gen(1);
    Tensor a = s.a_transposed ? randn({s.batch, s.k, s.n}, {}, &gen) : randn({s.batch, s.n, s.k}, {}, &gen);
    Tensor b = s.b_transposed ? randn({s.batch, s.m, s.k}, {}, &gen) : randn({s.batch, s.k, s.m}, {}, &gen);
    Tensor a_used = s.a_transposed ? a.transpose(1, 2) : a, b_used = s.b_transposed ? b.transpose(1, 2) : b;
    Tensor c = empty({s.batch, s.n, s.m});
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* cp = c.data_ptr<float>();
    const int64_t lda = s.a_transposed ? s.n : s.k, ldb = s.b_transposed ? s.k : s.m;
    const int64_t as = s.n * s.k, bs = s.k * s.m, cs = s.n * s.m;
    const double flop = 2.0 * s.batch * s.n * s.k * s.m;
    // times[0 .. L) each library's tiles, then [L .. 2L) matmul through each library
    const size_t L = libraries.size();
    std::vector<std::vector<double>> times(2 * L);
    for (int rep = 0; rep < 17; ++rep) {
      std::vector<double> t(2 * L);
      for (size_t l = 0; l < libraries.size(); ++l) {
        const double t0 = now();
        for (int64_t e = 0; e < s.batch; ++e)
          cpu::gemm_tile(libraries[l], !s.a_transposed, !s.b_transposed, ap + e * as, lda, bp + e * bs, ldb,
                         cp + e * cs, s.m, s.n, s.k, s.m, 1.0f, false);
        t[l] = now() - t0;
      }
      for (size_t l = 0; l < L; ++l) {
        cpu::set_gemm_library(libraries[l]);
        const double t0 = now();
        {
          Tensor out = s.batch == 1 ? matmul(a_used.select(0, 0), b_used.select(0, 0)) : matmul(a_used, b_used);
        }
        t[L + l] = now() - t0;
      }
      if (rep >= 2)
        for (size_t i = 0; i < t.size(); ++i) times[i].push_back(t[i]);
    }
    std::printf("| %s |", s.what);
    for (const std::vector<double>& ts : times) std::printf(" %.1f |", flop / median(ts) / 1e9);
    std::printf("\n");
  }
  return 0;
}
