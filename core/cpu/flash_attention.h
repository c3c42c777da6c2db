// Fused ("flash") relative attention on the CPU: the raw kernels behind
// core/backend/flash_attention.cpp, on plain buffers, no autograd. Every (B, H, T, D) operand (q, k,
// v, qr, out, dout, dq, dk, dv, dqr) comes with its own row strides (HeadLayout), so the heads of a
// (B, T, H·D) projection are read and written in place, seen as (B, H, T, D) without a copy; the
// arithmetic does not depend on the layout (the same bits as contiguous buffers).
//
// For query i at position π(i) (on the key axis) and key j, with δ = j − π(i):
//   s_ij = scale · (q_i·k_j + qr_i·E[row(δ)]) + bias[brow(δ)]        (the E term only when row(δ) ≥ 0,
//                                                                      the bias only when brow(δ) ≥ 0)
//   s_ij = −inf when (causal and j > π(i)) or key j is padding
//   out_i = Σ_j softmax_j(s_i)·v_j,   lse_i = log Σ_j exp(s_ij)        (a row with no visible key: 0, −inf)
// row(δ) = rel_rows[δ − min_delta] and brow(δ) = bias_rows[δ − min_delta]: per-distance lookups that
// encode every scheme (full-range skewed tables, Shaw's clipped table, T5 buckets, ALiBi distances).
//
// Tiling (the algorithm the CUDA kernels in cuda/flash_attention_{forward,backward}.cu mirror): a query tile
// [i0, i0 + BQ) against a key tile [j0, j0 + BK) reaches the distances
//   δ ∈ [j0 − π_max, j0 + BK − 1 − π_min]          (π_max, π_min over the query tile)
// that is BK + π_max − π_min table rows ("the window"; BQ + BK − 1 for left or right alignment). The
// kernel multiplies the query tile by the distinct table rows of that window (one small GEMM, rows
// shared by many distances, such as Shaw's clipped edges, are multiplied once) and picks each
// (i, j)'s entry from it: the skew is an index computation, nothing of size (t2, t1) is stored.
// Softmax is online (running max and sum per query row), so memory is O(t·D).
//
// Backward recomputes the probabilities tile by tile from lse. Every task owns what it writes (no
// atomics) and every sum runs in a fixed order, so results do not depend on the thread count. It runs
// one of two loop orders (core/cpu/flash_attention_backward.cpp; the same gradients to rounding):
//   one pass, a task per (b, h): key tiles in order and, for each, the query tiles that see it in
//     order; a visible tile's S, P, dP and ds = P ∘ (dP − rowsum) are formed once and give dv, dk (the
//     key tile's buffers), dq and dqr (added into the task's own rows) and the tables' share (below).
//   two passes, which form each tile's S, P, dP and ds twice:
//     A  per (b, h, query tile):  dq (and dqr, the relative query's gradient) and the tables' share;
//     B  per (b, h, key tile):    dk, dv.
// The tables' share of a task, from the ds it forms: Σ ds per distance (the bias) and Σ scale·ds·qr per
// table row (E), into task-local buffers, which are then added into (H, W) and dE in increasing task
// order (a wave of tasks at a time, to bound memory); dbias folds distances into bias columns, heads
// then δ in order.
// The one pass does less work but has only B·H tasks: it runs when B·H ≥ kFlashOnePassTasksPerCore ×
// the machine's cores (omp_get_num_procs, not the thread count, so a thread count never changes a
// bit), the two passes (B·H·(t2/64) and B·H·(t1/64) tasks) when fewer would leave cores idle.
// set_flash_backward forces one (tests run both on any machine; bench/bench_flash.cpp compares them:
// in the W1 shapes the one pass takes 0.60–0.70× the two passes' time, docs/benchmarks.md).
#pragma once
#include <cstdint>

namespace relgrad::cpu {

// Tile sizes of the CPU kernels (the CUDA kernels use their own).
// kFlashBlockDelta: distances (or table rows) per item of the backward's parallel fold.
constexpr int64_t kFlashBlockQ = 64, kFlashBlockK = 64, kFlashBlockDelta = 32;
// The backward's per-task table-gradient buffers are held for a wave of consecutive tasks at a time:
// at most this many elements in all (16 MiB of float32), unless that leaves fewer than 4 tasks per
// thread. The fold is a running sum in task order, so where the waves cut changes no bit.
constexpr int64_t kFlashFoldBudget = int64_t(1) << 22;
// The backward runs in one pass when it has at least this many (b, h) tasks per core.
constexpr int64_t kFlashOnePassTasksPerCore = 2;

// The backward's loop order: Auto picks by the rule above.
enum class FlashBackward { Auto, TwoPass, OnePass };
// Forces a loop order on every later flash_backward of the process (Auto: back to the rule). For tests
// and benchmarks; not to be called while a backward runs.
void set_flash_backward(FlashBackward path);
// The loop order flash_backward takes for B·H tasks on this machine: OnePass or TwoPass.
FlashBackward flash_backward_choice(int64_t B, int64_t H);

// Where the rows of one (B, H, T, D) operand lie: row (b, h, i) starts b·b + h·h + i·t elements after
// the operand's pointer, its D entries consecutive. The contiguous layout is (H·T·D, T·D, D); the
// heads of a (B, T, H·D) tensor, its (B, T, H, D) view transposed, are (T·H·D, D, H·D).
struct HeadLayout {
  int64_t b = 0, h = 0, t = 0;
  int64_t at(int64_t bi, int64_t hi, int64_t i) const { return bi * b + hi * h + i * t; }
  static HeadLayout contiguous(int64_t H, int64_t T, int64_t D) { return {H * T * D, T * D, D}; }
};

// The layouts of a call's (B, H, T, D) operands: q, qr, out, dout, dq, dqr have T = t2; k, v, dk, dv t1.
struct FlashLayout {
  HeadLayout q, k, v, qr, out, dout, dq, dk, dv, dqr;
  static FlashLayout contiguous(int64_t H, int64_t t2, int64_t t1, int64_t D) {
    const HeadLayout s = HeadLayout::contiguous(H, t2, D), l = HeadLayout::contiguous(H, t1, D);
    return {s, l, l, s, s, s, s, l, l, s};
  }
};

template <class T>
struct FlashProblem {
  int64_t B = 0, H = 0, t2 = 0, t1 = 0, D = 0;
  double scale = 1.0;
  bool causal = false;
  const int64_t* pos = nullptr;  // (t2) π(i)
  const T* q = nullptr;          // (B, H, t2, D) in layout.q
  const T* k = nullptr;          // (B, H, t1, D) in layout.k
  const T* v = nullptr;          // (B, H, t1, D) in layout.v
  const T* qr = nullptr;         // (B, H, t2, D) in layout.qr: query of the relative term (may be q itself)
  const T* E = nullptr;          // (E_heads, R, D), E_heads 1 (shared) or H; null = no table
  int64_t E_heads = 1, R = 0;
  const int64_t* rel_rows = nullptr;  // (W) table row for δ = min_delta + w, −1 = no term
  const T* bias = nullptr;            // (bias_heads, Rb); null = no bias
  int64_t bias_heads = 1, Rb = 0;
  const int64_t* bias_rows = nullptr;  // (W) bias column for δ = min_delta + w, −1 = no bias
  int64_t min_delta = 0, W = 0;
  const bool* pad = nullptr;  // (B, t1) true = padding key; null = none
  FlashLayout layout;         // of q, k, v, qr and of the outputs below; FlashLayout::contiguous for plain buffers
};

// out (B, H, t2, D) in layout.out, lse (B, H, t2) contiguous.
template <class T>
void flash_forward(const FlashProblem<T>& p, T* out, T* lse);

// dout (B, H, t2, D) → dq, dk, dv (shapes of q, k, v; written, not accumulated); each (B, H, T, D)
// operand in its layout (out from the forward, lse contiguous). dqr: the gradient
// of qr, written when non-null; when null, the relative term's query gradient is added into dq
// (qr is q). dE (E_heads, R, D) and dbias (bias_heads, Rb): written when non-null.
template <class T>
void flash_backward(const FlashProblem<T>& p, const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv, T* dqr,
                    T* dE, T* dbias);

}  // namespace relgrad::cpu
