// The backend seam for fused relative attention (kernels: core/cpu/flash_attention.h,
// cuda/flash_attention.h). autograd/ops/flash_attention.cpp checks the arguments into a FlashPlan
// and passes each (B, H, T, D) operand through flash_operand; these entries fill the kernels' argument
// blocks and allocate the outputs on q's device. On the CPU the kernels read and write every
// (B, H, T, D) operand in its own layout: the heads of a (B, T, H·D) projection, transposed views, are
// read in place, out is allocated as (B, t2, H, D) memory seen as (B, H, t2, D), and each gradient of
// q, k, v, qr in its operand's order, so that merging the heads back into (B, T, H·D) is a view, not a
// copy, in both directions. The CUDA kernels take contiguous operands and give contiguous outputs.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace relgrad::backend {

// Everything the kernels need, checked once, on the operands' device (lookups and positions also
// on the host for the checks and the CUDA planning). The device copies of pos, rel_rows and bias_rows
// come from a cache keyed by content (core/device_cache.h): no copy to the GPU after the first call.
struct FlashPlan {
  int64_t B = 0, H = 0, t2 = 0, t1 = 0, D = 0;
  double scale = 1;
  bool causal = false;
  Tensor pos;  // int64 (t2), on the device
  std::vector<int64_t> pos_host, rel_host, bias_host;
  Tensor rel_rows, bias_rows, pad;  // on the device (contiguous)
  int64_t E_heads = 1, R = 0, bias_heads = 1, Rb = 0, W = 0, min_delta = 0;
};

// What the kernels read a (B, H, T, D) operand from: on the CPU the tensor itself (no copy) when its
// rows are D consecutive elements at least D apart (cpu::HeadLayout: contiguous, or the heads of a
// (B, T, H·D) tensor), else a contiguous copy; on a GPU always contiguous. Undefined stays undefined.
Tensor flash_operand(const Tensor& t);

// q (B, H, t2, D), k and v (B, H, t1, D), and the optional (undefined) relative query qr (B, H, t2, D),
// all from flash_operand, relative table E (E_heads, R, D) and bias table (bias_heads, Rb), contiguous
// → out (B, H, t2, D) (on the CPU a view of (B, t2, H, D) memory) and the per-row logsumexp lse
// (B, H, t2), contiguous, the backward recomputes the probabilities from.
struct FlashForward {
  Tensor out, lse;
};
FlashForward flash_forward(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                           const Tensor& E, const Tensor& bias);
// The gradients of q, k, v (always), of qr (when want_qr), E ((E_heads, R, D), when want_E) and the
// bias table ((bias_heads, Rb), when want_bias) from the forward's operands, out, lse and g (from
// flash_operand). On the CPU dq, dk, dv, dqr are laid out as q, k, v, qr: heads inside time
// ((B, T, H, D) memory) where the operand has them so, else contiguous (B, H, T, D).
struct FlashGrads {
  Tensor dq, dk, dv, dqr, dE, dbias;
};
FlashGrads flash_backward(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                          const Tensor& E, const Tensor& bias, const Tensor& out, const Tensor& lse, const Tensor& g,
                          bool want_qr, bool want_E, bool want_bias);

// Whether the fused kernels train faster than the composite path for a call of B·H heads over t1 keys
// on `device`, by this machine's kernels (measured: docs/benchmarks.md, "The fused tiles on the chosen
// GEMM"): on the CPU, where the backward runs in one pass (B·H ≥ 2 tasks per core) over at least
// kFlashFasterMinKeys keys and the tiles' GEMM is not Eigen's (OpenBLAS's or BLIS's, chosen by
// measurement, is 1.3-2.5x it on 64-wide tiles); never on a GPU (memory decides there).
inline constexpr int64_t kFlashFasterMinKeys = 512;
bool flash_faster(int64_t B, int64_t H, int64_t t1, const Device& device);

}  // namespace relgrad::backend
