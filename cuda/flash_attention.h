// Fused ("flash") relative attention on the GPU: the raw interface (plain device pointers, no
// Tensor) that core/backend/flash_attention.cpp calls for CUDA operands. The maths, the lookups and
// the tiling are those of the CPU twin, core/cpu/flash_attention.h, which is this kernel's oracle.
// Without CUDA, cuda/no_cuda.cpp throws DeviceError.
#pragma once
#include <cstdint>

#include "core/base/dtype.h"

namespace relgrad::cuda {

// Every array is contiguous and on `device`, except pos_host (a host copy of pos, for planning).
struct FlashArgs {
  DType dtype = DType::Float32;
  int device = 0;
  int64_t B = 0, H = 0, t2 = 0, t1 = 0, D = 0;
  double scale = 1.0;
  bool causal = false;
  const int64_t* pos = nullptr;       // (t2) π(i)
  const int64_t* pos_host = nullptr;  // (t2), host
  const void* q = nullptr;            // (B, H, t2, D)
  const void* k = nullptr;            // (B, H, t1, D)
  const void* v = nullptr;            // (B, H, t1, D)
  const void* qr = nullptr;           // (B, H, t2, D), may be q
  const void* E = nullptr;            // (E_heads, R, D) or null
  int64_t E_heads = 1, R = 0;
  const int64_t* rel_rows = nullptr;  // (W)
  const void* bias = nullptr;         // (bias_heads, Rb) or null
  int64_t bias_heads = 1, Rb = 0;
  const int64_t* bias_rows = nullptr;  // (W)
  const int64_t* rel_rows_host = nullptr;   // (W), host (the fold's row lists are built from it)
  const int64_t* bias_rows_host = nullptr;  // (W), host
  int64_t min_delta = 0, W = 0;
  const bool* pad = nullptr;  // (B, t1) or null
};

// out (B, H, t2, D), lse (B, H, t2).
void flash_attention_forward(const FlashArgs& a, void* out, void* lse);
// dq, dk, dv written; dqr written when non-null, else the relative query gradient is added into dq;
// dE (E_heads, R, D) and dbias (bias_heads, Rb) written when non-null.
void flash_attention_backward(const FlashArgs& a, const void* out, const void* lse, const void* dout, void* dq,
                              void* dk, void* dv, void* dqr, void* dE, void* dbias);

}  // namespace relgrad::cuda
