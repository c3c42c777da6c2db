// MultiHeadAttention for self- and cross-attention on (B, T, C) inputs, with an optional positional
// scheme (layers/positional.h). Masked positions (causal, key padding) get exactly zero weight and
// zero gradient whatever the scheme wrote there.
//
//   query (B, t2, C), key_value (B, t1, C) → output (B, t2, C) [, weights (B, H, t2, t1)]
#pragma once
#include <memory>

#include "layers/linear.h"
#include "layers/positional.h"

namespace relgrad {

struct AttentionOptions {
  bool causal = false;             // key j is visible to query i iff j ≤ π(i)
  Tensor key_padding_mask;         // optional bool (B, t1): true = padding, never attended
  bool need_weights = false;       // also return the attention weights (before dropout)
  Alignment alignment = Alignment::Left;  // π(i) for relative terms and the causal mask
  Tensor query_positions;          // optional explicit π(i), int64 (t2)
};

struct AttentionOutput {
  Tensor output;   // (B, t2, C)
  Tensor weights;  // (B, H, t2, t1) when need_weights
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t embed_dim, int64_t num_heads, std::shared_ptr<PositionalScheme> positional = nullptr,
                     double dropout = 0.0, bool bias = true, Generator* init_generator = nullptr);
  // Self-attention: forward(x, x, options). Cross-attention: forward(decoder_x, encoder_out, options).
  AttentionOutput forward(const Tensor& query, const Tensor& key_value, const AttentionOptions& options = {});

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  Generator* dropout_generator = nullptr;  // null: the default generator
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
  std::shared_ptr<PositionalScheme> positional;
};

// The attention core on split heads, for schemes and tests: q (B,H,t2,D), k and v (B,H,t1,D) →
// (output (B,H,t2,D), weights (B,H,t2,t1)). `mask` is bool, broadcastable to (B,H,t2,t1), true = hidden.
AttentionOutput attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, const PositionalScheme* positional,
                                const AttentionGeometry& geometry, const Tensor& mask, double dropout, bool training,
                                Generator* generator);

// The bool mask (1, 1, t2, t1) hiding keys after each query's position π(i).
Tensor causal_mask(const Tensor& positions, int64_t t1);

}  // namespace relgrad
