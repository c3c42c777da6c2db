// A float32 GEMM for the small and medium products of attention: batches of
// (L×D)·(D×L) and (L×L)·(L×D) with D = 64 and L ≤ 1024, where Eigen's general GEMM has per-call
// packing and zero-fill costs (docs/benchmarks.md, bench/bench_gemm.cpp).
//
// With AVX-512 (built with -march=native on such a machine): a 12×32 register tile of C updated by
// broadcast FMAs; A is read in place (12 rows, either storage order), B is packed once per call into
// 64-byte aligned panels of 32 columns in thread_local scratch (no allocation once a thread's buffer
// has grown). k is not blocked: every output element is one chain of FMAs over p = 0, 1, …, k−1 in
// that order, then scaled by alpha and added to C — so a result depends neither on the thread count
// nor on the operands' addresses.
// It is not bitwise equal to Eigen's (different summation blocking); Eigen is its test oracle.
// Without AVX-512, sgemm() calls Eigen and sgemm_is_fast() says false.
// The library does not call it (it measured at about 1% of a W1 step, docs/benchmarks.md); it lives
// in bench/ for bench/bench_gemm.cpp and is tested by tests/test_sgemm_kernel.cpp.
//
// Not called by cpu::matmul (yet): 1.2–1.5× Eigen when the operands are in L2/L3
// (bench/bench_gemm), but only ~1.04× inside a W1 training step, where these products stream their
// (B, H, L, L) operand from DRAM and both GEMMs are bandwidth-bound (docs/benchmarks.md, "A hand-written kernel for the attention products").
#pragma once
#include <cstdint>

namespace relgrad::cpu {

// True when sgemm() is the AVX-512 kernel (not the Eigen fallback).
bool sgemm_is_fast();

// c (n, m), row stride ldc = alpha · a (n, k) @ b (k, m)          (accumulate = false)
//                      or c + alpha · a @ b                       (accumulate = true).
// a is row-major (a[i·lda + p]) or column-major (a[i + p·lda]); likewise b (b[p·ldb + j] or
// b[p + j·ldb]). Single-threaded (a caller spreads a batch over threads, one call each).
void sgemm(const float* a, int64_t lda, bool a_row_major, const float* b, int64_t ldb, bool b_row_major, float* c,
           int64_t ldc, float alpha, bool accumulate, int64_t n, int64_t k, int64_t m);

}  // namespace relgrad::cpu
