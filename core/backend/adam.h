// The backend seam for the fused Adam / AdamW update (kernels: core/cpu/adam.h, cuda/adam.h; their
// composite twin, adam_composite_update in train/optim/optim.cpp, is the path for other layouts and
// the test oracle). Same bits on both devices and as the composite.
#pragma once
#include "core/cpu/adam.h"
#include "core/tensor.h"

namespace relgrad::backend {

using cpu::AdamStep;  // the step's hyper-parameters and bias corrections
using cpu::AdamJob;   // one parameter's four tensors and its step

// True when the fused kernel can run: param, grad, m, v on one device (CPU or GPU), contiguous,
// one float dtype, one shape.
bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v);
// Several parameters' fused steps (any shapes; param, m and v updated in place): the CPU ones in one
// parallel region (cpu::adam_steps), the GPU ones one launch each. adam_fusable must hold for every job.
void adam_steps(const std::vector<AdamJob>& jobs);

}  // namespace relgrad::backend
