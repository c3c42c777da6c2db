#include "layers/embedding.h"

namespace relgrad {

Embedding::Embedding(int64_t V, int64_t C, int64_t padding, Generator* generator)
    : num_embeddings(V), embedding_dim(C), padding_idx(padding) {
  RG_CHECK_T(ShapeError, V > 0 && C > 0, "Embedding", "num_embeddings and embedding_dim must be positive, got ", V,
             " and ", C);
  RG_CHECK_T(IndexError, padding == -1 || (padding >= 0 && padding < V), "Embedding", "padding_idx ", padding,
             " out of range for num_embeddings ", V, " (use -1 for none)");
  Tensor w;
  {
    NoGradGuard no_grad;
    w = randn({V, C}, kFloat32, generator);  // (V, C)
    if (padding >= 0) w.select(0, padding).zero_();
  }
  weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) const {
  RG_CHECK(indices.defined(), "Embedding", "indices is an undefined tensor");
  // Checked here too so the message names the layer, not only the op.
  RG_CHECK_T(DTypeError, indices.dtype() == kInt64, "Embedding", "indices must be int64, got ",
             dtype_name(indices.dtype()), " ", shape_str(indices.shape()));
  return embedding(weight, indices, padding_idx);  // (..., C)
}

}  // namespace relgrad
