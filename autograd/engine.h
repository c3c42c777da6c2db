// The backward pass. Tensor::backward() calls run_backward.
#pragma once
#include "autograd/node.h"

namespace relgrad {

// Accumulates d(root)/d(leaf) · grad_root into the .grad of every leaf that requires grad and is
// reachable from root. grad_root may be undefined for a one-element root (it is then 1).
void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph);

// grad(outputs, inputs) as torch.autograd.grad: returns d(root)/d(input) for each input without
// touching any .grad. Inputs must require grad. Undefined results mean "not reachable".
TensorList grad(const Tensor& root, const TensorList& inputs, const Tensor& grad_root = Tensor(),
                bool retain_graph = false);

// NaN and Inf counts of a tensor (both 0 for integer and bool tensors); any device, any layout.
// Anomaly detection (autograd/grad_mode.h) and the trainer's checks use it.
struct NonFiniteCount {
  int64_t nan = 0, inf = 0;
  int64_t total() const { return nan + inf; }
};
NonFiniteCount count_nonfinite(const Tensor& t);

}  // namespace relgrad
