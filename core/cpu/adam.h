// Adam / AdamW's update as one pass over a parameter (core/backend/adam.cpp calls it for CPU
// parameters). Its composite twin in train/optim/optim.cpp, the same update written with tensor ops,
// is the path for other layouts and the test oracle: tests/test_optim.cpp checks the two agree bit
// for bit.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace relgrad::cpu {

struct AdamStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double bias_correction1 = 1.0, bias_correction2 = 1.0;  // 1 − β^t for this parameter's step t
  bool decoupled = false;                                  // AdamW (weight decay on p) or Adam (L2 in g)
};

// True when the fused kernel can run: every tensor on the CPU, contiguous, one float dtype, one shape.
bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v);

// param, grad, m, v (any shape, all the same; param, m, v updated in place). Per element, in the
// exact order of the composite (every scalar rounded to the tensor's dtype first, no FMA
// contraction: the library is compiled with -ffp-contract=off, CMakeLists.txt), so both give identical bits:
//   AdamW: p = p · (1 − lr·wd)          Adam: g = g + p · wd
//   m = m · β1 + g · (1 − β1);  v = v · β2 + (g · (1 − β2)) · g
//   p = p + (m / (sqrt(v) / sqrt(bc2) + eps)) · (−lr / bc1)
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s);

// One parameter's update, for adam_steps (adam_fusable must hold for its four tensors).
struct AdamJob {
  Tensor param, grad, m, v;
  AdamStep step;
};

// Every job's update in one parallel region, the parameters cut into chunks shared out among the
// threads (PyTorch's multi-tensor `foreach` Adam): each element's arithmetic is adam_step's, so the
// bits are the same at any thread count and as one adam_step per parameter.
void adam_steps(const std::vector<AdamJob>& jobs);

}  // namespace relgrad::cpu
