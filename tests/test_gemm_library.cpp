// The GEMM library chosen by measurement (core/cpu/gemm_library.h): every library found here gives
// cpu::matmul's products (each storage order, broadcast batches, accumulate, alpha, float32 and
// float64) against a float64 loop, the same bits at 1, 2 and 3 threads; the choice, its margin, the
// RELGRAD_GEMM override and its errors; the cache (written, read back, refused when malformed or made
// for another machine, never an error when it cannot be written).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/wait.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cpu/gemm_library.h"
#include "core/cpu/matmul.h"
#include "file_testing.h"

using namespace relgrad;
using namespace relgrad::testing;
using cpu::GemmChoice;
using cpu::GemmLibrary;

namespace {

std::vector<GemmLibrary> available_libraries() {
  std::vector<GemmLibrary> found;
  for (GemmLibrary library : cpu::kGemmLibraries)
    if (cpu::gemm_library_available(library)) found.push_back(library);
  return found;
}

// Restores the process's library when a test that switched it ends.
struct LibraryRestorer {
  GemmLibrary saved = cpu::gemm_library();
  ~LibraryRestorer() { cpu::set_gemm_library(saved); }
};

// out (batch, n, m) = init + alpha · a (batch|1, n, k) @ b (batch|1, k, m), as float64 loops over the
// operands' values (their logical order, whatever their strides).
std::vector<double> reference(const Tensor& a, const Tensor& b, const Tensor& init, double alpha) {
  Tensor a64 = a.to(kFloat64).contiguous(), b64 = b.to(kFloat64).contiguous();
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const int64_t ba = a64.numel() / (n * k), bb = b64.numel() / (k * m), count = std::max(ba, bb);
  Tensor i64 = init.defined() ? init.to(kFloat64).expand({count, n, m}).contiguous() : Tensor();
  std::vector<double> out(count * n * m);
  const double *A = a64.data_ptr<double>(), *B = b64.data_ptr<double>();
  for (int64_t e = 0; e < count; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += A[((ba == 1 ? 0 : e) * n + i) * k + p] * B[((bb == 1 ? 0 : e) * k + p) * m + j];
        const int64_t o = (e * n + i) * m + j;
        out[o] = alpha * s + (i64.defined() ? i64.data_ptr<double>()[o] : 0.0);
      }
  return out;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

struct Product {
  const char* name;
  Tensor a, b, init;
  double alpha;
};

// Products covering each storage order, a broadcast batch, addmm's init, alpha, ragged tiles.
std::vector<Product> products(DType dt) {
  Tensor a = uniform({3, 70, 45}, -1, 1, dt, 1), b = uniform({3, 45, 33}, -1, 1, dt, 2);
  Tensor at = uniform({3, 45, 70}, -1, 1, dt, 3).transpose(-1, -2);  // column-major (70, 45)
  Tensor bt = uniform({3, 33, 45}, -1, 1, dt, 4).transpose(-1, -2);  // column-major (45, 33)
  Tensor big_a = uniform({300, 129}, -1, 1, dt, 5), big_b = uniform({129, 257}, -1, 1, dt, 6);
  return {
      {"row @ row", a, b, Tensor(), 1.0},
      {"col @ row", at, b, Tensor(), 1.0},
      {"row @ col", a, bt, Tensor(), 1.0},
      {"col @ col", at, bt, Tensor(), 1.0},
      {"broadcast b", a, uniform({1, 45, 33}, -1, 1, dt, 7), Tensor(), 1.0},
      {"addmm init, alpha", a, bt, uniform({33}, -1, 1, dt, 8), 0.37},
      {"tiled 300x129x257", big_a, big_b, uniform({300, 257}, -1, 1, dt, 9), 1.0},
      {"strided slice (copied)", uniform({3, 140, 90}, -1, 1, dt, 10).slice(1, 0, 140, 2).slice(2, 0, 90, 2), b,
       Tensor(), 1.0},
  };
}

Tensor product(const Product& p) {
  Shape batch = p.a.dim() == 3 || p.b.dim() == 3 ? Shape{3} : Shape{};
  return cpu::matmul(p.a, p.b, batch, "test", p.init, p.alpha);
}

}  // namespace

TEST_CASE("gemm library: names and parsing") {
  for (GemmLibrary library : cpu::kGemmLibraries) {
    CHECK(cpu::parse_gemm_library(cpu::gemm_library_name(library)) == library);
    if (cpu::gemm_library_available(library)) CHECK_FALSE(cpu::gemm_library_kernel(library).empty());
    else CHECK(cpu::gemm_library_kernel(library).empty());
  }
  for (const char* bad : {"", "auto", "Eigen", "mkl", "openblas ", "blas"}) CHECK_FALSE(cpu::parse_gemm_library(bad));
  CHECK(cpu::gemm_library_available(GemmLibrary::Eigen));
  CHECK(cpu::gemm_library_kernel(GemmLibrary::Eigen).rfind("Eigen 3.", 0) == 0);
}

TEST_CASE("gemm library: the fastest wins, Eigen unless another beats it by the margin") {
  using R = std::vector<cpu::GemmRate>;
  CHECK(cpu::pick_gemm_library(R{}) == GemmLibrary::Eigen);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 100}}) == GemmLibrary::Eigen);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 100}, {GemmLibrary::OpenBLAS, 104}}) == GemmLibrary::Eigen);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 100}, {GemmLibrary::OpenBLAS, 106}}) == GemmLibrary::OpenBLAS);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 100}, {GemmLibrary::OpenBLAS, 150}, {GemmLibrary::BLIS, 160}}) ==
        GemmLibrary::BLIS);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 100}, {GemmLibrary::OpenBLAS, 150}, {GemmLibrary::BLIS, 40}}) ==
        GemmLibrary::OpenBLAS);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 200}, {GemmLibrary::OpenBLAS, 150}}) == GemmLibrary::Eigen);
  CHECK(cpu::pick_gemm_library(R{{GemmLibrary::Eigen, 100}, {GemmLibrary::BLIS, 120}}, 1.25) == GemmLibrary::Eigen);
  // The measurement itself: every available library, a positive rate each.
  const std::vector<cpu::GemmRate> rates = cpu::measure_gemm_libraries();
  CHECK(rates.size() == available_libraries().size());
  for (const cpu::GemmRate& r : rates) CHECK(r.gflops > 0.1);
}

TEST_CASE("gemm library: every library found computes matmul's products, the same bits at 1, 2 and 3 threads") {
  LibraryRestorer restore;
  for (GemmLibrary library : available_libraries()) {
    cpu::set_gemm_library(library);
    CHECK(cpu::gemm_library() == library);
    for (DType dt : {kFloat32, kFloat64}) {
      const double tol = dt == kFloat32 ? 2e-5 : 1e-13;
      for (const Product& p : products(dt)) {
        CAPTURE(cpu::gemm_library_name(library));
        CAPTURE(p.name);
        CAPTURE(dtype_name(dt));
        const std::vector<double> want = reference(p.a, p.b, p.init, p.alpha);
        const std::vector<double> got = values<double>(product(p).to(kFloat64));
        REQUIRE(got.size() == want.size());
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
        CHECK(worst <= tol * std::sqrt(double(p.a.size(-1))));
      }
#ifdef _OPENMP
      const int saved = omp_get_max_threads();
      const Product p = products(dt)[6];  // tiled: several tiles shared out between the threads
      std::vector<std::vector<double>> runs;
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        runs.push_back(values<double>(product(p).to(kFloat64)));
      }
      omp_set_num_threads(saved);
      CHECK(runs[0] == runs[1]);  // bit for bit
      CHECK(runs[0] == runs[2]);
#endif
    }
  }
}

TEST_CASE("gemm library: RELGRAD_GEMM names a library, or is refused naming itself") {
  for (GemmLibrary library : available_libraries()) {
    const GemmChoice c = cpu::choose_gemm_library(cpu::gemm_library_name(library), "");
    CHECK(c.library == library);
    CHECK(c.how == std::string("RELGRAD_GEMM=") + cpu::gemm_library_name(library));
  }
  CHECK_THROWS_WITH_AS(cpu::choose_gemm_library("blas", ""),
                       "[gemm] RELGRAD_GEMM=blas: expected auto, eigen, openblas, blis or relgrad", Error);
  for (GemmLibrary library : cpu::kGemmLibraries)
    if (!cpu::gemm_library_available(library))
      CHECK_THROWS_WITH_AS(cpu::choose_gemm_library(cpu::gemm_library_name(library), ""),
                           doctest::Contains(library == GemmLibrary::Relgrad ? "needs an AVX-512F or AVX2 + FMA build"
                                                                             : "could not be loaded (Debian: apt-get install"),
                           Error);
  // The relgrad command reports it as an error (exit code 1), and --help does not choose at all.
  TempDir dir;
  const std::string err = dir.file("err");
  const std::string cmd = std::string("RELGRAD_GEMM=blas '") + RELGRAD_CLI_PATH + "' --version >/dev/null 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(read_bytes(err) == "relgrad: error: [gemm] RELGRAD_GEMM=blas: expected auto, eigen, openblas, blis or relgrad\n");
  const std::string help = std::string("RELGRAD_GEMM=blas '") + RELGRAD_CLI_PATH + "' --help >/dev/null 2>&1";
  CHECK(std::system(help.c_str()) == 0);
}

TEST_CASE("gemm library: the choice is measured once, cached, and measured again when the cache does not fit") {
  TempDir dir;
  const std::string cache_dir = dir.file("cache/relgrad"), path = cpu::gemm_cache_file(cache_dir);
  CHECK(path.rfind(cache_dir + "/gemm-choice-", 0) == 0);
  const GemmChoice first = cpu::choose_gemm_library("auto", cache_dir);
  CHECK(cpu::choose_gemm_library(nullptr, cache_dir).library == first.library);
  if (available_libraries().size() == 1) {  // Eigen alone: nothing to measure or cache
    CHECK(first.library == GemmLibrary::Eigen);
    CHECK(first.how.rfind("the only one found", 0) == 0);
    CHECK_FALSE(std::filesystem::exists(path));
    return;
  }
  CHECK(first.how == "measured, cached in " + path);
  CHECK(first.rates.size() == available_libraries().size());
  CHECK(first.library == cpu::pick_gemm_library(first.rates));
  const std::string text = read_bytes(path);
  CHECK(text == cpu::format_gemm_cache(first));
  // Read back: the same choice, not measured again.
  const GemmChoice second = cpu::choose_gemm_library("auto", cache_dir);
  CHECK(second.library == first.library);
  CHECK(second.how == "measured before, cached in " + path);
  CHECK(second.rates.size() == first.rates.size());
  // A cache that names a library not measured fastest is still obeyed: it is this machine's choice.
  GemmChoice other = first;
  other.library = GemmLibrary::Eigen;
  write_bytes(path, cpu::format_gemm_cache(other));
  CHECK(cpu::choose_gemm_library("auto", cache_dir).library == GemmLibrary::Eigen);
  // Another machine's cache (another processor line) is measured over and replaced.
  std::string foreign = cpu::format_gemm_cache(other);
  foreign.replace(foreign.find("machine: ") + 9, 0, "Another CPU ");
  write_bytes(path, foreign);
  const GemmChoice remeasured = cpu::choose_gemm_library("auto", cache_dir);
  CHECK(remeasured.how == "measured, cached in " + path);
  CHECK(read_bytes(path) == cpu::format_gemm_cache(remeasured));
  // Every truncation and many byte flips of a valid file: parsed or refused, never a crash, and never
  // a library that is not available.
  const std::string valid = cpu::format_gemm_cache(first);
  for (size_t cut = 0; cut < valid.size(); ++cut) {
    const auto parsed = cpu::parse_gemm_cache(valid.substr(0, cut));
    if (parsed) CHECK(cpu::gemm_library_available(parsed->library));
  }
  for (size_t i = 0; i < valid.size(); i += 3)
    for (char flip : {'\0', '\n', 'x', ' ', '9'}) {
      std::string bad = valid;
      bad[i] = flip;
      const auto parsed = cpu::parse_gemm_cache(bad);
      if (parsed) CHECK(cpu::gemm_library_available(parsed->library));
    }
  CHECK_FALSE(cpu::parse_gemm_cache(""));
  CHECK_FALSE(cpu::parse_gemm_cache("relgrad gemm-choice 2\n"));
  // A cache directory that cannot be made (a file stands in its way): measured, not cached, no error.
  write_bytes(dir.file("blocked"), "x");
  const GemmChoice uncached = cpu::choose_gemm_library("auto", dir.file("blocked") + "/relgrad");
  CHECK(uncached.how.rfind("measured (not cached: ", 0) == 0);
  CHECK(uncached.library == cpu::pick_gemm_library(uncached.rates));
}

TEST_CASE("gemm library: processes that start together without a cache take turns and agree") {
  if (available_libraries().size() == 1) {  // nothing to measure: every process takes Eigen at once
    CHECK(cpu::choose_gemm_library("auto", "").library == GemmLibrary::Eigen);
    return;
  }
  TempDir dir;
  const std::string cache = dir.file("cache");
  // Four relgrad processes at once (as mpirun's ranks start), each printing its GEMM line.
  std::string cmd;
  for (int i = 0; i < 4; ++i)
    cmd += std::string("RELGRAD_CACHE_DIR='") + cache + "' '" + RELGRAD_CLI_PATH + "' --version > '" +
           dir.file("out" + std::to_string(i)) + "' 2>&1 & ";
  cmd += "wait";
  REQUIRE(std::system(cmd.c_str()) == 0);
  int measured = 0, read_back = 0;
  std::string library_line;
  for (int i = 0; i < 4; ++i) {
    const std::string out = read_bytes(dir.file("out" + std::to_string(i)));
    const size_t at = out.find("\nGEMM: ");
    REQUIRE(at != std::string::npos);
    const std::string line = out.substr(at + 7, out.find(" (", at) - at - 7);  // the library and its kernels
    if (library_line.empty()) library_line = line;
    CHECK(line == library_line);  // every process the same library
    measured += out.find("(measured, cached in ") != std::string::npos;
    read_back += out.find("(measured before, cached in ") != std::string::npos;
  }
  CHECK(measured == 1);  // one measured; the others waited for its turn and read its choice
  CHECK(read_back == 3);
}
