// GEMM alternatives on the shapes of the W1/W2 training workloads (issue 7: "if Eigen's GEMM is the
// limit, measure the alternatives"): relgrad's matmul (Eigen 3.4, compiled -march=native) next to
// OpenBLAS's cblas_sgemm, loaded at run time with dlopen (so relgrad itself never links a BLAS), in
// the same process, timed alternately call by call. float32, row-major, GFLOP/s = 2·n·k·m / time.
// Threads from OMP_NUM_THREADS (OpenBLAS's from OPENBLAS_NUM_THREADS, set equal by run_train.sh;
// Debian's libopenblas0-pthread reads OPENBLAS_CORETYPE at load: run with `env -u OPENBLAS_CORETYPE`
// for its AVX-512 kernels).
//   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 env -u OPENBLAS_CORETYPE ./build-bench/bench/bench_gemm
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "relgrad.h"

using namespace relgrad;

namespace {

// cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Shape3 {
  const char* what;
  int64_t batch, n, k, m;
  bool b_transposed;  // b given as (m, k): a Linear layer's weight
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW);
  SgemmFn sgemm = lib ? reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm")) : nullptr;
  if (!sgemm) std::printf("(OpenBLAS not found: Debian's libopenblas0-pthread provides libopenblas.so.0)\n");
  const Shape3 shapes[] = {
      {"Linear qkv (4096x256)·(768x256)ᵀ", 1, 4096, 256, 768, true},
      {"FFN up (4096x256)·(1024x256)ᵀ", 1, 4096, 256, 1024, true},
      {"FFN down (4096x1024)·(256x1024)ᵀ", 1, 4096, 1024, 256, true},
      {"dW (256x4096)·(4096x1024)", 1, 256, 4096, 1024, false},
      {"Q·Kᵀ 64 × (256x64)·(256x64)ᵀ", 64, 256, 64, 256, true},
      {"P·V 64 × (256x256)·(256x64)", 64, 256, 256, 64, false},
  };
  std::printf("| shape | relgrad (Eigen) GFLOP/s | OpenBLAS GFLOP/s | Eigen ÷ OpenBLAS |\n|---|---:|---:|---:|\n");
  for (const Shape3& s : shapes) {
    Generator gen(1);
    Tensor a = randn({s.batch, s.n, s.k}, {}, &gen);
    Tensor b = s.b_transposed ? randn({s.batch, s.m, s.k}, {}, &gen) : randn({s.batch, s.k, s.m}, {}, &gen);
    Tensor b_used = s.b_transposed ? b.transpose(1, 2) : b;
    Tensor c = empty({s.batch, s.n, s.m});
    const double flop = 2.0 * s.batch * s.n * s.k * s.m;
    std::vector<double> t_eigen, t_blas;
    for (int rep = 0; rep < 12; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      Tensor out = s.batch == 1 ? matmul(a.select(0, 0), b_used.select(0, 0)) : matmul(a, b_used);
      auto t1 = std::chrono::steady_clock::now();
      if (sgemm) {
        for (int64_t e = 0; e < s.batch; ++e)
          sgemm(kRowMajor, kNoTrans, s.b_transposed ? kTrans : kNoTrans, int(s.n), int(s.m), int(s.k), 1.0f,
                a.data_ptr<float>() + e * s.n * s.k, int(s.k), b.data_ptr<float>() + e * s.k * s.m,
                int(s.b_transposed ? s.k : s.m), 0.0f, c.data_ptr<float>() + e * s.n * s.m, int(s.m));
      }
      auto t2 = std::chrono::steady_clock::now();
      if (rep >= 2) {
        t_eigen.push_back(std::chrono::duration<double>(t1 - t0).count());
        t_blas.push_back(std::chrono::duration<double>(t2 - t1).count());
      }
    }
    const double ge = flop / median(t_eigen) / 1e9, gb = sgemm ? flop / median(t_blas) / 1e9 : 0.0;
    std::printf("| %s | %.1f | %.1f | %.2f |\n", s.what, ge, gb, sgemm ? ge / gb : 0.0);
  }
  return 0;
}
