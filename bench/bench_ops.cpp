// Ops benchmark: what relgrad's op layer costs on top of the raw kernels it calls.
//   - matmul in GFLOP/s through relgrad, next to raw Eigen (an Eigen::Map GEMM over the same
//     buffers, into a preallocated output) in the same run, and their ratio;
//   - elementwise ops and softmax in GB/s (bytes read + written), next to memcpy of a buffer
//     the size of the output (read + write counted), into a preallocated and into a fresh buffer.
// Each figure is the median of several timed repetitions after warm-up calls. Threads come from
// OMP_NUM_THREADS (OpenMP's default: all cores). Run from a Release build:
//   OMP_NUM_THREADS=1 ./build/bench/bench_ops
// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 helpers (as core/cpu/matmul.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <sys/resource.h>

#include "relgrad.h"

using namespace relgrad;

namespace {

// Median seconds of `reps` calls of f, after `warmup` untimed ones.
double median_seconds(const std::function<void()>& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Medians of f and g timed alternately (f, g, f, g, ...): on a shared machine a burst of load from
// elsewhere then lands on both sides alike, so their ratio stays meaningful.
std::pair<double, double> median_pair(const std::function<void()>& f, const std::function<void()>& g, int warmup,
                                      int reps) {
  for (int i = 0; i < warmup; ++i) { f(); g(); }
  std::vector<double> tf, tg;
  auto time = [](const std::function<void()>& h) {
    auto start = std::chrono::steady_clock::now();
    h();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int i = 0; i < reps; ++i) {
    tf.push_back(time(f));
    tg.push_back(time(g));
  }
  std::sort(tf.begin(), tf.end());
  std::sort(tg.begin(), tg.end());
  return {tf[reps / 2], tg[reps / 2]};
}

// Minor page faults of this process so far: a fresh output buffer that the OS has not mapped yet
// costs one fault per 4 KiB page on first write, which can rival the op itself.
long minor_faults() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Keeps the compiler from removing a computation whose result is otherwise unused.
inline void escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// One matmul row: batch × (n×k)·(k×m), float32; b_transposed reads b as a (m, k) tensor's transpose.
void bench_matmul(const char* label, int64_t batch, int64_t n, int64_t k, int64_t m, bool b_transposed) {
  Generator gen(1);
  Shape sa = batch > 1 ? Shape{batch, n, k} : Shape{n, k};
  Shape sb = b_transposed ? (batch > 1 ? Shape{batch, m, k} : Shape{m, k}) : (batch > 1 ? Shape{batch, k, m} : Shape{k, m});
  Tensor a = randn(sa, kFloat32, &gen), b_store = randn(sb, kFloat32, &gen);
  Tensor b = b_transposed ? b_store.transpose(-1, -2) : b_store;  // a view: no copy
  Tensor c = empty({batch, n, m}, kFloat32);                      // raw Eigen's preallocated output
  const float* ap = a.data_ptr<float>();
  const float* bp = b_store.data_ptr<float>();
  float* cp = c.data_ptr<float>();
  auto raw_one = [&](int64_t e) {
    Eigen::Map<const RowMajor> A(ap + e * n * k, n, k);
    Eigen::Map<RowMajor> C(cp + e * n * m, n, m);
    if (b_transposed) C.noalias() = A * Eigen::Map<const ColMajor>(bp + e * k * m, k, m);
    else C.noalias() = A * Eigen::Map<const RowMajor>(bp + e * k * m, k, m);
  };
  auto raw = [&] {
    if (batch == 1) {
      raw_one(0);  // one GEMM: Eigen spreads it over its own OpenMP threads
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t e = 0; e < batch; ++e) raw_one(e);  // one GEMM per thread, as a user would write it
    }
  };
  NoGradGuard no_grad;
  auto rel = [&] { Tensor y = matmul(a, b); escape(y.raw_data()); };
  const double flops = 2.0 * batch * n * k * m;
  // Warm up until a relgrad call no longer page-faults (at most 50 pairs). relgrad allocates each
  // output afresh, and until glibc's heap has settled (about 10 calls here) the new buffer can land
  // on pages never touched before and pay a fault per 4 KiB page, up to a third of the GEMM's time
  // on this VM. A training loop lives in the settled state; the `faults` column checks it.
  for (int i = 0; i < 50; ++i) {
    const long f0 = minor_faults();
    raw();
    rel();
    if (i >= 3 && minor_faults() == f0) break;
  }
  const long faults_before = minor_faults();
  auto [t_raw, t_rel] = median_pair(raw, rel, 0, 21);
  const double faults_per_call = static_cast<double>(minor_faults() - faults_before) / 21;  // raw's are 0
  // Results must agree (relgrad's output vs raw Eigen's).
  Tensor y = matmul(a, b);
  raw();
  double max_diff = 0;
  std::vector<float> yv = y.contiguous().to_vector<float>();
  for (size_t i = 0; i < yv.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(yv[i] - cp[i])));
  std::printf("| %-30s | %8.1f | %8.1f | %5.1f%% | %.1e | %6.0f |\n", label, flops / t_rel * 1e-9, flops / t_raw * 1e-9,
              100.0 * t_raw / t_rel, max_diff, faults_per_call);
}

// One memory-bound row: op(inputs) → output, `bytes` = bytes read + written per call.
void bench_bandwidth(const char* label, const std::function<Tensor()>& op, double bytes) {
  try {
    NoGradGuard no_grad;
    const long f0 = minor_faults();
    double t = median_seconds([&] { Tensor y = op(); escape(y.raw_data()); }, 3, 11);
    std::printf("| %-30s | %8.1f | %6.0f |\n", label, bytes / t * 1e-9, (minor_faults() - f0) / 14.0);
  } catch (const Error& e) {
    std::printf("| %-30s | skipped: %s | |\n", label, e.what());
  }
}

}  // namespace

int main() {
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  std::printf("relgrad bench_ops: %d OpenMP thread(s) (OMP_NUM_THREADS=%s), Eigen %d.%d.%d, SIMD: %s\n\n", threads,
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset", EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse());

  std::printf("matmul, float32, median of 21, timed alternately (GFLOP/s; ratio = relgrad / raw Eigen; max |diff| of the outputs;\n"
              "faults = minor page faults per timed relgrad call)\n\n");
  std::printf("| %-30s | %8s | %8s | %6s | %7s | %6s |\n", "shape", "relgrad", "Eigen", "ratio", "diff", "faults");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(8, '-').c_str(), std::string(9, '-').c_str(),
              std::string(8, '-').c_str());
  bench_matmul("(4096x256)*(256x768)", 1, 4096, 256, 768, false);
  bench_matmul("(4096x256)*(256x1024)", 1, 4096, 256, 1024, false);
  bench_matmul("(4096x1024)*(1024x256)", 1, 4096, 1024, 256, false);
  bench_matmul("64 x (256x64)*(64x256)", 64, 256, 64, 256, false);
  bench_matmul("(4096x256)*(768x256)^T view", 1, 4096, 256, 768, true);

  // 2^25 floats = 128 MiB per tensor: far beyond the L2 caches; relgrad allocates each output afresh.
  const int64_t N = int64_t(1) << 25;
  const double fb = 4.0 * N;  // bytes in one float32 tensor
  Generator gen(2);
  Tensor x = randn({N}, kFloat32, &gen), z = randn({N}, kFloat32, &gen);
  Tensor rows = x.view({N / 1024, 1024});
  std::vector<char> src(static_cast<size_t>(fb), 1), dst(static_cast<size_t>(fb), 0);
  std::printf("\nmemory-bound ops, float32, %lld elements (%.0f MiB per tensor), median of 11 (GB/s of bytes read + written;\n"
              "faults = minor page faults per call, warm-up included)\n\n",
              static_cast<long long>(N), fb / (1 << 20));
  std::printf("| %-30s | %8s | %6s |\n", "op", "GB/s", "faults");
  std::printf("|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(10, '-').c_str(), std::string(8, '-').c_str());
  long f0 = minor_faults();
  double t_copy = median_seconds([&] { std::memcpy(dst.data(), src.data(), src.size()); }, 3, 11);
  std::printf("| %-30s | %8.1f | %6.0f |\n", "memcpy (preallocated dst)", 2 * fb / t_copy * 1e-9, (minor_faults() - f0) / 14.0);
  f0 = minor_faults();
  double t_fresh = median_seconds([&] {
    char* d = static_cast<char*>(std::malloc(src.size()));
    std::memcpy(d, src.data(), src.size());
    escape(d);
    std::free(d);
  }, 3, 11);
  std::printf("| %-30s | %8.1f | %6.0f |\n", "memcpy (fresh malloc dst)", 2 * fb / t_fresh * 1e-9, (minor_faults() - f0) / 14.0);
  bench_bandwidth("add(x, z)", [&] { return add(x, z); }, 3 * fb);
  bench_bandwidth("mul(x, z)", [&] { return mul(x, z); }, 3 * fb);
  bench_bandwidth("gelu(x)", [&] { return gelu(x); }, 2 * fb);
  bench_bandwidth("exp(x)", [&] { return exp(x); }, 2 * fb);
  bench_bandwidth("softmax(x (32768,1024), -1)", [&] { return softmax(rows, -1); }, 2 * fb);
  return 0;
}
