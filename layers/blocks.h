// Transformer blocks on (B, T, C) activations: EncoderBlock (self-attention + feed-forward) and
// DecoderBlock (causal self-attention + cross-attention + feed-forward), pre-norm or post-norm.
//
// The exact computation (drop = the block's Dropout child, identity in eval mode):
//
//   EncoderBlock, pre-norm  (GPT-2, T5, LLaMA):       x = x + drop(self_attn(norm1(x)))
//                                                      x = x + drop(ff(norm2(x)))
//   EncoderBlock, post-norm (Vaswani et al., BERT):   x = norm1(x + drop(self_attn(x)))
//                                                      x = norm2(x + drop(ff(x)))
//   DecoderBlock, pre-norm:   x = x + drop(self_attn(norm1(x)))             causal, tgt padding mask
//                             x = x + drop(cross_attn(norm2(x), memory))    src padding mask, alignment
//                             x = x + drop(ff(norm3(x)))
//   DecoderBlock, post-norm:  x = norm1(x + drop(self_attn(x)))
//                             x = norm2(x + drop(cross_attn(x, memory)))
//                             x = norm3(x + drop(ff(x)))
//
// Every residual add that a norm follows (norm2 and norm3 of a pre-norm block, each norm of a
// post-norm one) runs fused with that norm as one op (residual_layer_norm / residual_rms_norm,
// autograd/ops.h), with the same numbers; the dropouts are the same draws in the same order.
//
// A pre-norm stack leaves its residual stream un-normalised, so the model adds a final norm after
// the last block (layers/models.h); a post-norm stack already ends on a norm.
// `memory` is the encoder output (B, t1, C), used as it is: with a pre-norm encoder the model has
// already applied the encoder's final norm to it.
//
// One dropout probability p is used everywhere, as nn.TransformerEncoderLayer: on the attention
// weights (inside MultiHeadAttention), on the feed-forward hidden layer and on each residual branch.
//
// A decoder-only model (DecoderLM) uses EncoderBlock with BlockOptions::causal = true: a GPT block
// is a self-attention block with a causal mask.
//
// Child names: self_attn, cross_attn (DecoderBlock), ff, norm1, norm2, norm3 (DecoderBlock),
// dropout (no parameters). Initialisation is that of the layers (PyTorch defaults): Linear
// U(−1/√in, 1/√in), norm gains 1 and biases 0, positional tables as their headers say.
#pragma once
#include <memory>
#include <string>

#include "layers/attention.h"
#include "layers/dropout.h"
#include "layers/feed_forward.h"
#include "layers/norm.h"

namespace relgrad {

struct BlockOptions {
  Activation activation = Activation::Gelu;  // FeedForward's
  NormKind norm = NormKind::LayerNorm;
  bool pre_norm = true;
  double dropout = 0.0;             // attention weights, FF hidden, residual branches
  double norm_eps = 1e-5;           // LayerNorm's eps; RMSNorm uses its dtype's epsilon (PyTorch's None)
  bool causal = false;              // EncoderBlock only: mask future keys (decoder-only LMs)
  AttentionCore attention_core = AttentionCore::Composite;  // MultiHeadAttention::core of every attention
};

// A LayerNorm (eps) or RMSNorm (its dtype's epsilon), by BlockOptions::norm.
std::shared_ptr<Norm> make_norm(NormKind kind, int64_t d_model, double eps);

class EncoderBlock : public Module {
 public:
  // self_positional may be null (no positional term) and may be shared with other blocks (T5).
  EncoderBlock(int64_t d_model, int64_t n_heads, int64_t d_ff, const BlockOptions& options = {},
               std::shared_ptr<PositionalScheme> self_positional = nullptr, Generator* init_generator = nullptr);
  // x (B, T, C), key_padding_mask optional bool (B, T), true = padding → (B, T, C).
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask = Tensor());
  // Incremental decoding (causal blocks only): x (B, t_new, C) are the tokens after those already in
  // cache.self; key_padding_mask optional bool (B, t_cached + t_new) over all keys → (B, t_new, C),
  // the rows the full causal pass would give for these tokens.
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask, LayerCache& cache);

  BlockOptions options;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<Norm> norm1, norm2;
  std::shared_ptr<Dropout> dropout;

 private:
  Tensor forward_with(const Tensor& x, const Tensor& key_padding_mask, LayerCache* cache);  // cache may be null
};

class DecoderBlock : public Module {
 public:
  // Self-attention is always causal; cross_alignment places each decoder query on the encoder axis
  // (π(i)) for the cross scheme's relative positions.
  DecoderBlock(int64_t d_model, int64_t n_heads, int64_t d_ff, const BlockOptions& options = {},
               std::shared_ptr<PositionalScheme> self_positional = nullptr,
               std::shared_ptr<PositionalScheme> cross_positional = nullptr,
               Alignment cross_alignment = Alignment::Left, Generator* init_generator = nullptr);
  // x (B, t2, C), memory (B, t1, C) → (B, t2, C). Masks optional bool, true = padding:
  // tgt_padding_mask (B, t2) for self-attention, memory_padding_mask (B, t1) for cross-attention.
  // tgt_positions optional int64 (t2): explicit π(i) of each query for cross-attention (any integer,
  // t1 and beyond included), instead of cross_alignment; undefined = cross_alignment.
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_padding_mask = Tensor(),
                 const Tensor& memory_padding_mask = Tensor(), const Tensor& tgt_positions = Tensor());
  // Incremental decoding: x (B, t_new, C) are the target tokens after those already in cache.self;
  // cache.cross holds memory's projected keys and values after the first call. tgt_padding_mask, if
  // any, covers all t_cached + t_new target keys. The new queries sit at their absolute target
  // positions, so the rows equal a full pass's. Needs cross_alignment Left when cross-attention has
  // a scheme: under Right or Scaled the earlier tokens' π(i) change as the target grows (an error),
  // unless tgt_positions gives them: int64 (t_cached + t_new), every target token's π(i) (like the
  // padding mask), of which the new queries use the last t_new; the cache is then exact.
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_padding_mask,
                 const Tensor& memory_padding_mask, LayerCache& cache,
                 const Tensor& tgt_positions = Tensor());

  BlockOptions options;
  Alignment cross_alignment;
  std::shared_ptr<MultiHeadAttention> self_attn, cross_attn;
  std::shared_ptr<FeedForward> ff;
  std::shared_ptr<Norm> norm1, norm2, norm3;
  std::shared_ptr<Dropout> dropout;

 private:
  Tensor forward_with(const Tensor& x, const Tensor& memory, const Tensor& tgt_padding_mask,
                      const Tensor& memory_padding_mask, const Tensor& tgt_positions,
                      LayerCache* cache);  // cache and tgt_positions may be null
};

}  // namespace relgrad
