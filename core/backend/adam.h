// The backend seam for the fused Adam / AdamW update (kernels: core/cpu/adam.h, cuda/adam.h; their
// composite twin, adam_composite_update in train/optim/optim.cpp, is the path for other layouts and
// the test oracle). Same bits on both devices and as the composite.
#pragma once
#include "core/cpu/adam.h"
#include "core/tensor.h"

namespace relgrad::backend {

using cpu::AdamStep;  // the step's hyper-parameters and bias corrections

// True when the fused kernel can run: param, grad, m, v on one device (CPU or GPU), contiguous,
// one float dtype, one shape.
bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v);
// One fused step over a parameter (any shape; param, m and v updated in place); adam_fusable must hold.
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s);

}  // namespace relgrad::backend
