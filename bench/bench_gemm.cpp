// GEMM alternatives on the shapes of the W1/W2 training workloads (bench/bench_train.cpp), to see
// whether Eigen's GEMM is what limits training; float32, in one process, timed alternately rep by rep:
//   Eigen     Eigen 3.4's GEMM on Maps of the operands (what cpu::matmul did for every product);
//   sgemm     relgrad's AVX-512 kernel (bench/sgemm_kernel.h), called directly;
//   matmul    relgrad's public matmul (output allocation included; Eigen, since cpu::matmul does
//             not dispatch to sgemm: its output buffer is also colder than the others');
//   OpenBLAS  cblas_sgemm, loaded at run time with dlopen (relgrad itself never links a BLAS).
// Batched shapes run their GEMMs in turn on the calling thread (matmul spreads them over the OpenMP
// threads). GFLOP/s = 2·n·k·m·batch / median time of 15 reps (after 2 warm-up reps).
// Clock: RELGRAD_BENCH_CLOCK=wall (default) or cpu — per-thread CPU time, the only fair figure on
// a machine shared with other jobs; meaningful at OMP_NUM_THREADS=1 (it counts the calling thread).
// Debian's libopenblas0-pthread reads OPENBLAS_CORETYPE at load: run with `env -u OPENBLAS_CORETYPE`
// for its AVX-512 kernels.
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 env -u OPENBLAS_CORETYPE ./build-bench/bench/bench_gemm
#include <dlfcn.h>
#include <time.h>

// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 helpers (as core/cpu/matmul.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/sgemm_kernel.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

// cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

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

template <int Order>
using Map = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                       Eigen::OuterStride<>>;
using OutMap = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// c (n, m) = a @ b through Eigen, a and b in the storage orders given (as cpu::matmul maps them).
void eigen_gemm(const float* a, int64_t lda, bool a_row, const float* b, int64_t ldb, bool b_row, float* c, int64_t n,
                int64_t k, int64_t m) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  OutMap out(c, n, m);
  const Eigen::OuterStride<> sa(lda), sb(ldb);
  if (a_row && b_row) out.noalias() = Map<R>(a, n, k, sa) * Map<R>(b, k, m, sb);
  else if (a_row) out.noalias() = Map<R>(a, n, k, sa) * Map<C>(b, k, m, sb);
  else if (b_row) out.noalias() = Map<C>(a, n, k, sa) * Map<R>(b, k, m, sb);
  else out.noalias() = Map<C>(a, n, k, sa) * Map<C>(b, k, m, sb);
}

}  // namespace

int main() {
  const char* clock_env = std::getenv("RELGRAD_BENCH_CLOCK");
  cpu_clock = clock_env && std::strcmp(clock_env, "cpu") == 0;
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW);
  SgemmFn blas = lib ? reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm")) : nullptr;
  if (!blas) std::printf("(OpenBLAS not found: Debian's libopenblas0-pthread provides libopenblas.so.0)\n");
  if (!cpu::sgemm_is_fast()) std::printf("(built without AVX-512: sgemm is Eigen)\n");
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
      {"edge 4 × (1024x256)·(256x1024)", 4, 1024, 256, 1024, false, false},
  };
  std::printf("clock: %s\n", cpu_clock ? "per-thread CPU time" : "wall");
  std::printf("| shape | Eigen | sgemm | matmul | OpenBLAS | sgemm ÷ Eigen | sgemm ÷ OpenBLAS |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
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
    std::vector<double> t_eigen, t_sgemm, t_matmul, t_blas;
    for (int rep = 0; rep < 17; ++rep) {
      double t0 = now();
      for (int64_t e = 0; e < s.batch; ++e)
        eigen_gemm(ap + e * as, lda, !s.a_transposed, bp + e * bs, ldb, !s.b_transposed, cp + e * cs, s.n, s.k, s.m);
      double t1 = now();
      for (int64_t e = 0; e < s.batch; ++e)
        cpu::sgemm(ap + e * as, lda, !s.a_transposed, bp + e * bs, ldb, !s.b_transposed, cp + e * cs, s.m, 1.0f, false,
                   s.n, s.k, s.m);
      double t2 = now();
      {
        Tensor out = s.batch == 1 ? matmul(a_used.select(0, 0), b_used.select(0, 0)) : matmul(a_used, b_used);
      }
      double t3 = now();
      if (blas)
        for (int64_t e = 0; e < s.batch; ++e)
          blas(kRowMajor, s.a_transposed ? kTrans : kNoTrans, s.b_transposed ? kTrans : kNoTrans, int(s.n), int(s.m),
               int(s.k), 1.0f, ap + e * as, int(lda), bp + e * bs, int(ldb), 0.0f, cp + e * cs, int(s.m));
      double t4 = now();
      if (rep >= 2) {
        t_eigen.push_back(t1 - t0);
        t_sgemm.push_back(t2 - t1);
        t_matmul.push_back(t3 - t2);
        t_blas.push_back(t4 - t3);
      }
    }
    const double ge = flop / median(t_eigen) / 1e9, gs = flop / median(t_sgemm) / 1e9;
    const double gm = flop / median(t_matmul) / 1e9, gb = blas ? flop / median(t_blas) / 1e9 : 0.0;
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", s.what, ge, gs, gm, gb, gs / ge,
                blas ? gs / gb : 0.0);
  }
  return 0;
}
