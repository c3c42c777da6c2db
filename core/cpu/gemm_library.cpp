#include "core/cpu/gemm_library.h"

// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 transpose helpers (clang
// has no such warning and would warn about the unknown name).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Eigen never starts threads of its own here: cpu::matmul shares out tiles itself.
#define EIGEN_DONT_PARALLELIZE
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include "core/base/error.h"
#include "core/cpu/matmul.h"
#include "core/cpu/sgemm.h"
#include "core/file_io.h"

namespace relgrad::cpu {

namespace {

// ---- the libraries loaded at run time ------------------------------------------------------------

// The CBLAS entry points (the enums are ints in the ABI), so that no cblas.h is needed.
using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                       const float* b, int ldb, float beta, float* c, int ldc);
using Dgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, double alpha, const double* a,
                       int lda, const double* b, int ldb, double beta, double* c, int ldc);

struct LoadedBlas {
  Sgemm sgemm = nullptr;
  Dgemm dgemm = nullptr;
  std::string kernel;  // "" = not loaded
};

void* open_first(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  return nullptr;
}

template <class F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

// Both GEMMs or nothing: a library missing one is treated as absent.
LoadedBlas gemm_entry_points(void* handle) {
  LoadedBlas blas;
  blas.sgemm = symbol<Sgemm>(handle, "cblas_sgemm");
  blas.dgemm = symbol<Dgemm>(handle, "cblas_dgemm");
  if (!blas.sgemm || !blas.dgemm) blas = LoadedBlas();
  return blas;
}

// Sets (value) or removes (null) an environment variable for the life of the object, then puts back
// what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// OpenBLAS reads its environment when it loads, so for the load (then put back):
// - OPENBLAS_CORETYPE is removed: relgrad runs this processor's kernels;
// - OPENBLAS_NUM_THREADS=1: the pthread build then starts no thread pool (the tiles are shared out
//   over OpenMP's threads already, each call runs on its caller). A pool would only idle, and under an
//   address-space limit (tests/test_oom.cpp) a worker whose stack could not be mapped hung the pool's
//   shutdown at exit.
// Called once, under a static's initialisation.
LoadedBlas load_openblas() {
  void* handle = nullptr;
  {
    ScopedEnv native("OPENBLAS_CORETYPE", nullptr), one_thread("OPENBLAS_NUM_THREADS", "1");
    handle = open_first({"libopenblas.so.0", "libopenblas.so"});
  }
  if (!handle) return {};
  LoadedBlas blas = gemm_entry_points(handle);
  auto set_threads = symbol<void (*)(int)>(handle, "openblas_set_num_threads");
  auto config = symbol<char* (*)()>(handle, "openblas_get_config");
  auto core = symbol<char* (*)()>(handle, "openblas_get_corename");
  if (!blas.sgemm || !set_threads || !config || !core) return {};
  set_threads(1);
  blas.kernel = std::string(config()) + ", core: " + core();
  return blas;
}

// BLIS (Debian's libblis4-serial, -pthread or -openmp): its CBLAS layer, set to one thread.
LoadedBlas load_blis() {
  void* handle = open_first({"libblis.so.4", "libblis.so"});
  if (!handle) return {};
  LoadedBlas blas = gemm_entry_points(handle);
  auto set_threads = symbol<void (*)(int64_t)>(handle, "bli_thread_set_num_threads");
  auto version = symbol<const char* (*)()>(handle, "bli_info_get_version_str");
  auto arch_id = symbol<int (*)()>(handle, "bli_arch_query_id");
  auto arch_name = symbol<const char* (*)(int)>(handle, "bli_arch_string");
  if (!blas.sgemm || !set_threads || !version || !arch_id || !arch_name) return {};
  set_threads(1);
  blas.kernel = std::string("BLIS ") + version() + ", kernels: " + arch_name(arch_id());
  return blas;
}

const LoadedBlas& loaded(GemmLibrary library) {
  static const LoadedBlas none, openblas = load_openblas(), blis = load_blis();
  switch (library) {
    case GemmLibrary::OpenBLAS: return openblas;
    case GemmLibrary::BLIS: return blis;
    case GemmLibrary::Eigen:
    case GemmLibrary::Relgrad: break;
  }
  return none;
}

// ---- one tile ----------------------------------------------------------------------------------------

template <class T, int Order>
using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                                  Eigen::OuterStride<>>;

template <class T, int OrderA, int OrderB>
void eigen_gemm(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, int64_t n, int64_t k, int64_t m,
                T alpha, bool accumulate) {
  ConstMatrixMap<T, OrderA> A(a, n, k, Eigen::OuterStride<>(lda));
  ConstMatrixMap<T, OrderB> B(b, k, m, Eigen::OuterStride<>(ldb));
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned, Eigen::OuterStride<>>
      C(c, n, m, Eigen::OuterStride<>(ldc));
  if (accumulate) C.noalias() += (alpha * A) * B;  // Eigen folds alpha into the GEMM kernel
  else if (alpha == T(1)) C.noalias() = A * B;
  else C.noalias() = (alpha * A) * B;
}

template <class T>
void tile(GemmLibrary library, bool a_row_major, bool b_row_major, const T* a, int64_t lda, const T* b, int64_t ldb,
          T* c, int64_t ldc, int64_t n, int64_t k, int64_t m, T alpha, bool accumulate) {
  if constexpr (std::is_same_v<T, float>)
    if (library == GemmLibrary::Relgrad) {
      sgemm(a, lda, a_row_major, b, ldb, b_row_major, c, ldc, alpha, accumulate, n, k, m);
      return;
    }
  const LoadedBlas& blas = loaded(library);
  constexpr int64_t kIntMax = 2147483647;  // CBLAS takes int sizes; larger tiles go to Eigen
  if (blas.sgemm && std::max({n, k, m, lda, ldb, ldc}) <= kIntMax) {
    // Row-major CBLAS; a column-major operand is its transpose, row-major.
    constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
    const int ta = a_row_major ? kNoTrans : kTrans, tb = b_row_major ? kNoTrans : kTrans;
    const T beta = accumulate ? T(1) : T(0);
    if constexpr (std::is_same_v<T, float>)
      blas.sgemm(kRowMajor, ta, tb, int(n), int(m), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
    else
      blas.dgemm(kRowMajor, ta, tb, int(n), int(m), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
    return;
  }
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  auto f = a_row_major ? (b_row_major ? eigen_gemm<T, R, R> : eigen_gemm<T, R, C>)
                       : (b_row_major ? eigen_gemm<T, C, R> : eigen_gemm<T, C, C>);
  f(a, lda, b, ldb, c, ldc, n, k, m, alpha, accumulate);
}

// ---- the measurement -----------------------------------------------------------------------------

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// c (n, m) = a (n, k) @ b (k, m), b stored as the flag says: the products of a transformer step at the
// default training sizes (d_model 256, d_ff 1024, head dim 64, 256 positions).
struct MeasuredProduct {
  int64_t n, k, m;
  bool b_row_major;
};
constexpr MeasuredProduct kMeasured[] = {
    {256, 256, 768, false},   // x @ Wᵀ of the q, k, v projection (W (768, 256) read transposed)
    {256, 256, 1024, false},  // the feed-forward's up projection
    {256, 64, 256, false},    // Q·Kᵀ of one head (K (256, 64) read transposed)
    {256, 256, 64, true},     // P·V
};
constexpr int kRounds = 5;  // after one warm-up round; each product's best round counts

// The library's GFLOP per CPU-second over kMeasured.
double measure_rate(GemmLibrary library) {
  double flops = 0, seconds = 0;
  for (const MeasuredProduct& p : kMeasured) {
    std::vector<float> a(p.n * p.k), b(p.k * p.m), c(p.n * p.m);
    uint32_t state = 12345;  // any values away from zero and denormals
    for (float* buf : {a.data(), b.data()})
      for (size_t i = 0, size = buf == a.data() ? a.size() : b.size(); i < size; ++i) {
        state = state * 1664525u + 1013904223u;
        buf[i] = 0.5f + float(state >> 8) / float(1 << 24);
      }
    const int64_t ldb = p.b_row_major ? p.m : p.k;
    double best = 1e30;
    for (int round = 0; round <= kRounds; ++round) {
      const double t0 = thread_cpu_seconds();
      tile<float>(library, true, p.b_row_major, a.data(), p.k, b.data(), ldb, c.data(), p.m, p.n, p.k, p.m, 1.0f,
                  false);
      const double t = thread_cpu_seconds() - t0;
      if (round > 0) best = std::min(best, t);
    }
    flops += 2.0 * double(p.n) * double(p.k) * double(p.m);
    seconds += std::max(best, 1e-9);
  }
  return flops / seconds * 1e-9;
}

// ---- the cache -----------------------------------------------------------------------------------

constexpr const char* kCacheHeader = "relgrad gemm-choice 1";

// What a cached choice must have been measured on: this processor, its core count, and each
// library's version and kernels (a new OpenBLAS, or BLIS installed since, means measuring again).
std::string machine_key() {
  std::string key = cpu_model_name() + " | cores " + std::to_string(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  for (GemmLibrary library : kGemmLibraries) key += std::string(" | ") + gemm_library_kernel(library);
  return key;
}

// 16 hex digits of the key's 64-bit FNV-1a hash: the cache file's name (gemm_cache_file).
std::string machine_key_hash(const std::string& key) {
  const uint64_t h = fnv1a64(key.data(), key.size());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::atomic<int> g_override{-1};  // set_gemm_library's library, -1 = the choice's

// An exclusive flock on <cache dir>/gemm-choice.lock for the life of the object, waited for; none
// (and no error) when the directory cannot be made or the file opened: the choice is then only made
// without the turn.
class CacheTurn {
 public:
  explicit CacheTurn(const std::string& cache_dir) {
    if (cache_dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    fd_ = ::open((cache_dir + "/gemm-choice.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~CacheTurn() {
    if (fd_ >= 0) ::close(fd_);  // closing the file releases the lock
  }
  CacheTurn(const CacheTurn&) = delete;
  CacheTurn& operator=(const CacheTurn&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

const char* gemm_library_name(GemmLibrary library) { return kGemmLibraryNames.name(library); }

std::optional<GemmLibrary> parse_gemm_library(std::string_view name) { return kGemmLibraryNames.find(name); }

bool gemm_library_available(GemmLibrary library) {
  if (library == GemmLibrary::Relgrad) return sgemm_available();
  return library == GemmLibrary::Eigen || loaded(library).sgemm != nullptr;
}

bool gemm_cut_independent(GemmLibrary library) { return library == GemmLibrary::Relgrad; }

std::string gemm_library_kernel(GemmLibrary library) {
  if (library == GemmLibrary::Relgrad) return sgemm_kernel();
  if (library != GemmLibrary::Eigen) return loaded(library).kernel;
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + ", SIMD: " + Eigen::SimdInstructionSetsInUse();
}

std::vector<GemmRate> measure_gemm_libraries() {
  std::vector<GemmRate> rates;
  for (GemmLibrary library : kGemmLibraries)
    if (gemm_library_available(library)) rates.push_back({library, measure_rate(library)});
  return rates;
}

GemmLibrary pick_gemm_library(const std::vector<GemmRate>& rates, double margin) {
  double eigen = 0;
  for (const GemmRate& r : rates)
    if (r.library == GemmLibrary::Eigen) eigen = r.gflops;
  GemmLibrary best = GemmLibrary::Eigen;
  double best_rate = eigen;
  for (const GemmRate& r : rates)
    if (r.library != GemmLibrary::Eigen && r.gflops >= margin * eigen && r.gflops > best_rate) {
      best = r.library;
      best_rate = r.gflops;
    }
  return best;
}

std::string format_gemm_cache(const GemmChoice& choice) {
  std::ostringstream out;
  out << kCacheHeader << "\nmachine: " << machine_key() << "\nchoice: " << gemm_library_name(choice.library) << "\n";
  for (const GemmRate& r : choice.rates) out << "rate: " << gemm_library_name(r.library) << " " << r.gflops << "\n";
  return out.str();
}

std::optional<GemmChoice> parse_gemm_cache(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != kCacheHeader) return std::nullopt;
  if (!std::getline(in, line) || line != "machine: " + machine_key()) return std::nullopt;
  if (!std::getline(in, line) || line.rfind("choice: ", 0) != 0) return std::nullopt;
  const std::optional<GemmLibrary> library = parse_gemm_library(std::string_view(line).substr(8));
  if (!library || !gemm_library_available(*library)) return std::nullopt;
  GemmChoice choice;
  choice.library = *library;
  while (std::getline(in, line)) {  // "rate: <library> <GFLOP/s>", for the record
    std::istringstream fields(line);
    std::string tag, name;
    double gflops = 0;
    if (!(fields >> tag >> name >> gflops) || tag != "rate:" || !parse_gemm_library(name)) return std::nullopt;
    choice.rates.push_back({*parse_gemm_library(name), gflops});
  }
  return choice;
}

std::string gemm_cache_file(const std::string& cache_dir) {
  return cache_dir + "/gemm-choice-" + machine_key_hash(machine_key()) + ".txt";
}

std::string gemm_cache_dir() {
  if (const char* dir = std::getenv("RELGRAD_CACHE_DIR"); dir && *dir) return dir;
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return std::string(dir) + "/relgrad";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/relgrad";
  return "";
}

GemmChoice choose_gemm_library(const char* requested, const std::string& cache_dir) {
  if (requested && *requested && std::string_view(requested) != "auto") {
    const std::optional<GemmLibrary> library = parse_gemm_library(requested);
    if (!library)
      throw Error(std::string("[gemm] RELGRAD_GEMM=") + requested + ": expected auto, eigen, openblas, blis or relgrad");
    if (!gemm_library_available(*library))
      throw Error(std::string("[gemm] RELGRAD_GEMM=") + requested +
                  (*library == GemmLibrary::Relgrad ? ": relgrad's kernel needs an AVX-512F or AVX2 + FMA build (-march=native on such a CPU)"
                   : std::string(": the library could not be loaded (Debian: ") +
                         (*library == GemmLibrary::OpenBLAS ? "apt-get install libopenblas0" : "apt-get install libblis4-serial") +
                         ")"));
    return {*library, std::string("RELGRAD_GEMM=") + requested, {}};
  }
  if (std::none_of(std::begin(kGemmLibraries), std::end(kGemmLibraries),
                   [](GemmLibrary l) { return l != GemmLibrary::Eigen && gemm_library_available(l); }))
    return {GemmLibrary::Eigen, "the only one found (libopenblas0 or libblis4-serial would be measured against it)", {}};
  const std::string path = cache_dir.empty() ? "" : gemm_cache_file(cache_dir);
  // Processes that start together on a machine without a cache (mpirun's ranks, ctest -j) take turns:
  // the first measures and writes, the others then read its choice, so all use the same library.
  CacheTurn turn(cache_dir);
  if (!path.empty()) try {
      if (std::optional<GemmChoice> cached = parse_gemm_cache(read_file(path, "gemm choice", 1 << 16))) {
        cached->how = "measured before, cached in " + path;
        return *cached;
      }
    } catch (const std::exception&) {  // no cache yet, or unreadable: measure
    }
  GemmChoice choice;
  choice.rates = measure_gemm_libraries();
  choice.library = pick_gemm_library(choice.rates);
  if (path.empty()) {
    choice.how = "measured (not cached: no RELGRAD_CACHE_DIR, XDG_CACHE_HOME or HOME)";
    return choice;
  }
  try {
    std::filesystem::create_directories(cache_dir);  // throws where a file stands in the way
    write_file_atomic(path, format_gemm_cache(choice), "gemm choice");
    choice.how = "measured, cached in " + path;
  } catch (const std::exception& e) {
    choice.how = std::string("measured (not cached: ") + e.what() + ")";
  }
  return choice;
}

const GemmChoice& gemm_choice() {
  static const GemmChoice choice = choose_gemm_library(std::getenv("RELGRAD_GEMM"), gemm_cache_dir());
  return choice;
}

GemmLibrary gemm_library() {
  const int forced = g_override.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<GemmLibrary>(forced) : gemm_choice().library;
}

void set_gemm_library(GemmLibrary library) {
  if (!gemm_library_available(library))
    throw Error(std::string("[gemm] set_gemm_library(") + gemm_library_name(library) + "): not available here");
  g_override.store(static_cast<int>(library), std::memory_order_relaxed);
}

void gemm_tile(GemmLibrary library, bool a_row_major, bool b_row_major, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, int64_t n, int64_t k, int64_t m, float alpha, bool accumulate) {
  tile(library, a_row_major, b_row_major, a, lda, b, ldb, c, ldc, n, k, m, alpha, accumulate);
}
void gemm_tile(GemmLibrary library, bool a_row_major, bool b_row_major, const double* a, int64_t lda,
               const double* b, int64_t ldb, double* c, int64_t ldc, int64_t n, int64_t k, int64_t m, double alpha,
               bool accumulate) {
  tile(library, a_row_major, b_row_major, a, lda, b, ldb, c, ldc, n, k, m, alpha, accumulate);
}

}  // namespace relgrad::cpu
