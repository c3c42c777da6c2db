// Adam / AdamW's update as one CUDA kernel over a parameter (core/backend/adam.cpp calls it for CUDA
// parameters; the CPU twin is core/cpu/adam.h, the composite twin adam_composite_update in
// train/optim/optim.cpp). Per element, in the exact order of the composite and of the CPU kernel, each
// operation an explicitly rounded IEEE one (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn and their
// double forms: no FMA contraction, no approximate division or square root), so the GPU gives the
// same bits as the CPU:
//   AdamW: p = p · (1 − lr·wd)          Adam: g = g + p · wd
//   m = m · β1 + g · (1 − β1);  v = v · β2 + (g · (1 − β2)) · g
//   p = p + (m / (sqrt(v) / sqrt(bc2) + eps)) · (−lr / bc1)
#pragma once
#include <cstdint>

#include "core/base/dtype.h"

namespace relgrad::cuda {

struct AdamParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double bias_correction1 = 1.0, bias_correction2 = 1.0;  // 1 − β^t for this parameter's step t
  bool decoupled = false;                                  // AdamW (weight decay on p) or Adam (L2 in g)
};

// param, grad, m, v: n elements each, contiguous, on `device`, float32 or float64 (`dtype`); param,
// m and v are updated in place.
void adam_step(DType dtype, void* param, const void* grad, void* m, void* v, int64_t n, const AdamParams& s,
               int device);

}  // namespace relgrad::cuda
