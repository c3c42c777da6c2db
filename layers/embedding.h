// Embedding: a lookup table, as nn.Embedding. weight (V, C) ~ N(0, 1) as PyTorch initialises it;
// the padding row (when padding_idx >= 0) starts at zero and never receives a gradient, so it stays
// zero under training. indices int64 (...) → (..., C).
#pragma once
#include "layers/module.h"

namespace relgrad {

class Embedding : public Module {
 public:
  // padding_idx = -1: no padding row (PyTorch's None).
  Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1, Generator* generator = nullptr);
  Tensor forward(const Tensor& indices) const;
  Tensor operator()(const Tensor& indices) const { return forward(indices); }

  Tensor weight;  // (V, C)
  int64_t num_embeddings, embedding_dim, padding_idx;
};

}  // namespace relgrad
