// Linear: y = x Wᵀ + b, weight (out, in) as PyTorch, initialised as nn.Linear:
// W, b ~ U(−1/√in, 1/√in). x (..., in) → y (..., out). The transposed weight goes to the GEMM as a
// view (no copy).
#pragma once
#include "layers/module.h"

namespace relgrad {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Tensor weight;  // (out, in)
  Tensor bias;    // (out), or undefined
  int64_t in_features, out_features;
};

}  // namespace relgrad
