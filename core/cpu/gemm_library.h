// The library behind each GEMM tile of cpu::matmul (core/cpu/matmul.cpp), chosen by measurement.
//
// Eigen's GEMM and relgrad's own (core/cpu/sgemm.h, AVX-512 or AVX2 + FMA builds) are compiled in. OpenBLAS (Debian: libopenblas0) and BLIS (libblis4-serial) are loaded
// at run time with dlopen when installed, so a build needs neither and a machine may have either.
// Which one a process uses is decided once, on the first product:
//   1. RELGRAD_GEMM=eigen|openblas|blis|relgrad in the environment: that one (an error if it cannot be loaded);
//      RELGRAD_GEMM=auto or unset: go on;
//   2. the choice cached for this processor and these libraries (<cache dir>/gemm-choice-<hash>.txt), if any;
//   3. otherwise measure: each available library runs the same float32 products on the calling thread
//      (shapes of a transformer step: a Linear, the feed-forward's up projection, Q·Kᵀ and P·V tiles),
//      timed in thread CPU time (another process on the core does not count), best of several rounds;
//      the fastest wins, Eigen unless another is at least kGemmMargin faster, and the choice is cached
//      so that every later process on this machine takes the same one (same library, same bits).
// <cache dir>: $RELGRAD_CACHE_DIR, else $XDG_CACHE_HOME/relgrad, else $HOME/.cache/relgrad; a cache
// that cannot be read or written is measured around, never an error (`relgrad --version` says which).
//
// Every library is called single-threaded, one call per tile, so results do not depend on the thread
// count whichever is chosen (docs/design.md, "Threads"); different libraries differ in the last bits.
// OpenBLAS is loaded with OPENBLAS_CORETYPE removed from the environment for the load, so it runs the
// kernels of this processor, not those a benchmark environment forces on PyTorch's copy.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/name_table.h"

namespace relgrad::cpu {

// Relgrad: relgrad's own kernel (core/cpu/sgemm.h), float32 only (its double tiles are Eigen's),
// offered where the build has AVX-512F or AVX2 with FMA.
enum class GemmLibrary { Eigen, OpenBLAS, BLIS, Relgrad };
inline constexpr GemmLibrary kGemmLibraries[] = {GemmLibrary::Eigen, GemmLibrary::OpenBLAS, GemmLibrary::BLIS,
                                                 GemmLibrary::Relgrad};
inline constexpr NameTable<GemmLibrary, 4> kGemmLibraryNames{{{GemmLibrary::Eigen, "eigen"},
                                                              {GemmLibrary::OpenBLAS, "openblas"},
                                                              {GemmLibrary::BLIS, "blis"},
                                                              {GemmLibrary::Relgrad, "relgrad"}}};
// A library other than Eigen is chosen only when at least this much faster (1.05 = 5 %): near a tie
// the dependency-free one, and a margin that noise rarely crosses.
inline constexpr double kGemmMargin = 1.05;

// "eigen", "openblas", "blis", "relgrad" (the RELGRAD_GEMM values, kGemmLibraryNames); parse_gemm_library is their inverse.
const char* gemm_library_name(GemmLibrary library);
std::optional<GemmLibrary> parse_gemm_library(std::string_view name);

// Whether the library can be called here (Eigen always; relgrad's with AVX-512; the others once dlopen
// found them).
bool gemm_library_available(GemmLibrary library);
// Its version and the kernels it runs on this machine: "Eigen 3.4.0, SIMD: …, AVX2, FMA",
// "OpenBLAS 0.3.21 … , core: Zen", "BLIS 0.9.0, kernels: zen3"; "" when not available.
std::string gemm_library_kernel(GemmLibrary library);

// The measured rate of one library: GFLOP per CPU-second over the measurement's products.
struct GemmRate {
  GemmLibrary library;
  double gflops = 0;
};
// Each available library's rate on this machine, measured now on the calling thread (a few ms each).
std::vector<GemmRate> measure_gemm_libraries();
// The fastest of `rates`, Eigen unless another is ≥ margin × Eigen's rate (Eigen when rates is empty).
GemmLibrary pick_gemm_library(const std::vector<GemmRate>& rates, double margin = kGemmMargin);

// The decision and how it was reached, for `relgrad --version` and the benchmarks.
struct GemmChoice {
  GemmLibrary library = GemmLibrary::Eigen;
  std::string how;              // "RELGRAD_GEMM=openblas", "measured, cached in …", "cached in …", …
  std::vector<GemmRate> rates;  // the measurement, when one was made or cached
};
// The decision procedure above, with the environment given (tests call it with their own values):
// `requested` is RELGRAD_GEMM's value (null or "auto": decide), `cache_dir` where the choice is kept
// ("" = no cache). Throws relgrad::Error naming RELGRAD_GEMM for an unknown or unavailable library.
GemmChoice choose_gemm_library(const char* requested, const std::string& cache_dir);
// The cache directory from the environment ("" when none can be named).
std::string gemm_cache_dir();
// The cache file in `cache_dir` for this machine and build: gemm-choice-<hash>.txt, the hash that of
// the processor, core count and libraries' kernels, Eigen's SIMD flags among them. One file per such
// key, so two builds with other flags (a Release and a sanitizer build) keep their own choices
// instead of overwriting one file and measuring again in turn, which could flip a near tie.
std::string gemm_cache_file(const std::string& cache_dir);
// The cache file's text for this machine and choice, and its reading: the library a text written for
// this machine (same processor, same libraries and versions) names, or nothing (another machine, an
// older format, a malformed or truncated file).
std::string format_gemm_cache(const GemmChoice& choice);
std::optional<GemmChoice> parse_gemm_cache(std::string_view text);

// This process's choice: choose_gemm_library(getenv("RELGRAD_GEMM"), gemm_cache_dir()) on the first
// call, then the same answer (thread-safe). The first product calls it.
const GemmChoice& gemm_choice();
// The library cpu::matmul's tiles call now: gemm_choice().library unless set_gemm_library changed it.
GemmLibrary gemm_library();
// Make every later product use `library` (tests and benchmarks compare libraries in one process).
// Not while a product runs. Throws relgrad::Error when it is not available.
void set_gemm_library(GemmLibrary library);

// Whether the library's float32 tiles give every element of C the same bits whichever tile of C a call
// covers (relgrad's kernel: k blocked by k alone; its float64 tiles are Eigen's, which do not). cpu::matmul then cuts products by the threads in use, not the cores;
// the others' element results may depend on the tile's shape (OpenBLAS's small-matrix kernels,
// Eigen's and BLIS's blocking), so their cut depends on the machine alone.
bool gemm_cut_independent(GemmLibrary library);

// One tile: c (n, m), row-major with rows ldc apart, = alpha · a (n, k) @ b (k, m), or c += … when
// accumulate. a and b are row-major (rows ld apart) or column-major (columns ld apart, a transposed
// view) as the flags say. Single-threaded, on the calling thread, through `library`.
void gemm_tile(GemmLibrary library, bool a_row_major, bool b_row_major, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, int64_t n, int64_t k, int64_t m, float alpha, bool accumulate);
void gemm_tile(GemmLibrary library, bool a_row_major, bool b_row_major, const double* a, int64_t lda,
               const double* b, int64_t ldb, double* c, int64_t ldc, int64_t n, int64_t k, int64_t m, double alpha,
               bool accumulate);

}  // namespace relgrad::cpu
