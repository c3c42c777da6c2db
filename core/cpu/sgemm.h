// relgrad's own float32 GEMM, one of the libraries behind cpu::matmul's tiles (core/cpu/gemm_library.h:
// "relgrad", chosen by measurement like the others). Built for AVX-512F or for AVX2 with FMA
// (core/cpu/sgemm_simd.h); with neither (a build without -march=native) sgemm_available() is false and
// it is never chosen. Both widths give the same bits: the arithmetic below does not depend on the width.
//
// What sets it apart: every element of C is computed the same way whatever part of C a call covers.
// k is cut into blocks whose bounds depend on k alone (one up to 1,024, else at most 256 long, as even
// as possible); within a
// block each element is one chain of FMAs over p in order, in a register, then scaled by alpha and
// added to C (or stored, for the first block without accumulate). So a product cut into row or column
// tiles gives the same bits as one call, at any alignment: cpu::matmul can cut it by the threads in
// use rather than the machine's cores (fewer cuts, each operand packed fewer times) and still give
// results that do not depend on the thread count (tests/test_sgemm.cpp checks this bitwise).
//
// Blocking (per call, single-threaded): B is packed in blocks of k's block × 2,048 (columns) into panels
// of kNR columns (AVX-512 32, AVX2 16; each kb × kNR panel meets a block of A's rows from L1 or L2); A
// goes kMR rows per micro-tile (AVX-512: 12 × 32 of C in 24 zmm accumulators; AVX2: 6 × 16 in 12 ymm), in
// blocks of rows that stay in L2, packed where a block meets enough B panels to pay for it and read in
// place otherwise. A product of at most 48 rows reads a row-major B in place too (its panels would meet
// too few tiles of A to pay for packing).
#pragma once
#include <cstdint>
#include <string>

#include "core/window.h"

namespace relgrad::cpu {

// True when built with AVX-512F or AVX2 + FMA (else sgemm throws and the library is not offered).
bool sgemm_available();
// What runs: "relgrad AVX-512, 12x32 tiles, …" or "relgrad AVX2, 6x16 tiles, …"; "" where not available.
std::string sgemm_kernel();

// c (n, m), row stride ldc = alpha · a (n, k) @ b (k, m)          (accumulate = false)
//                      or c + alpha · a @ b                       (accumulate = true),
//                      or c_in + alpha · a @ b                    (accumulate, c_in given).
// c_in (n, m), rows ldc_in apart (0: one row for every row of C, as a Linear layer's bias), holds the
// values C starts from: the first k block adds to them where it would add to C's own, so the result is
// the same bits as copying c_in into C first and accumulating, without that pass over C.
// a is row-major (a[i·lda + p]) or column-major (a[i + p·lda]); likewise b (b[p·ldb + j] or
// b[p + j·ldb]). Single-threaded (cpu::matmul shares tiles out, one call each).
void sgemm(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major, float* c,
           int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m, const float* c_in = nullptr,
           int64_t ldc_in = 0);

// The same product shared by `threads` OpenMP threads (started here; not from inside a parallel
// region): all of B packed once, by all of them (a scratch of k × m floats, kept by the calling
// thread), then blocks of C handed out. The same bits as sgemm(), since no element's arithmetic
// depends on who computes it. cpu::matmul uses it for one large product (a Linear's), where tiles of
// separate calls would each pack B, or A, again.
void sgemm_shared(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major,
                  float* c, int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m, int threads,
                  const float* c_in = nullptr, int64_t ldc_in = 0);

// A product whose operand or result is a matrix X that is zero outside a window (attention's causal
// scores and weights): row i of X holds its entries at columns [lo[i], hi[i]). sgemm_window computes
// only the micro-tiles of C and the terms of each sum that the window leaves, with the same arithmetic
// as sgemm on the rest: the elements it computes equal sgemm's on X with zeros outside the window
// (as values: a skipped term is a zero that sgemm would have added). X is
//   Output          C itself: only C's window is computed; C's other elements are left unspecified
//                   (a tile that straddles the window's edge writes all of itself);
//   Left            A: C = (A ∘ W) · B, A's entries outside the window never count (they are not read
//                   as terms: packing puts zeros in their place);
//   LeftTransposed  Aᵀ: A (n, k) = Xᵀ, X (k, n), C = (X ∘ W)ᵀ · B.
// For LeftTransposed, col_lo[j] and col_hi[j] bound the rows of X's column j inside the window
// (every i with lo[i] ≤ j < hi[i] lies in [col_lo[j], col_hi[j]); empty: col_lo ≥ col_hi).
struct GemmWindow {
  WindowOn on = WindowOn::Output;
  const int64_t* lo = nullptr;  // per row of X
  const int64_t* hi = nullptr;
  const int64_t* col_lo = nullptr;  // per column of X (LeftTransposed)
  const int64_t* col_hi = nullptr;
};

// sgemm of the window's part of the product (above), single-threaded, with sgemm's arguments.
void sgemm_window(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major,
                  float* c, int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m,
                  const GemmWindow& window, const float* c_in = nullptr, int64_t ldc_in = 0);

}  // namespace relgrad::cpu
