#include "layers/blocks.h"

namespace relgrad {

std::shared_ptr<Norm> make_norm(NormKind kind, int64_t d_model, double eps) {
  if (kind == NormKind::RMSNorm) return std::make_shared<RMSNorm>(d_model);  // dtype epsilon, as nn.RMSNorm(eps=None)
  return std::make_shared<LayerNorm>(d_model, eps);
}

namespace {

void check_block_args(const char* op, int64_t d_model, int64_t n_heads, int64_t d_ff, const BlockOptions& o) {
  RG_CHECK_T(ShapeError, d_model > 0 && n_heads > 0 && d_model % n_heads == 0, op, "d_model ", d_model,
             " must be a positive multiple of n_heads ", n_heads);
  RG_CHECK_T(ShapeError, d_ff > 0, op, "d_ff must be positive, got ", d_ff);
  // MultiHeadAttention takes p < 1 only (p = 1 would drop every attention weight).
  RG_CHECK(o.dropout >= 0.0 && o.dropout < 1.0, op, "dropout must be in [0, 1), got ", o.dropout);
}

// residual + branch and norm(residual + branch): one fused op (residual_layer_norm / residual_rms_norm,
// autograd/ops.h) for the two norms of layers/norm.h, the same numbers as the add then norm.forward.
ResidualNorm add_norm(const Norm& norm, const Tensor& residual, const Tensor& branch) {
  if (!fused_chains_on(residual.device())) {
    Tensor sum = residual + branch;
    return {sum, norm.forward(sum)};
  }
  if (const auto* ln = dynamic_cast<const LayerNorm*>(&norm))
    return residual_layer_norm(residual, branch, ln->normalized_shape, ln->weight, ln->bias, ln->eps);
  if (const auto* rn = dynamic_cast<const RMSNorm*>(&norm))
    return residual_rms_norm(residual, branch, rn->normalized_shape, rn->weight, rn->eps);
  Tensor sum = residual + branch;
  return {sum, norm.forward(sum)};
}

}  // namespace

// ---- EncoderBlock ----

EncoderBlock::EncoderBlock(int64_t d_model, int64_t n_heads, int64_t d_ff, const BlockOptions& o,
                           std::shared_ptr<PositionalScheme> self_positional, Generator* init)
    : options(o) {
  check_block_args("EncoderBlock", d_model, n_heads, d_ff, o);
  // Registration order fixes named_parameters() order (and so checkpoint order): attention, ff, norms.
  self_attn = register_module("self_attn",
                              std::make_shared<MultiHeadAttention>(d_model, n_heads, self_positional, o.dropout, true, init));
  self_attn->core = o.attention_core;
  ff = register_module("ff", std::make_shared<FeedForward>(d_model, d_ff, o.activation, o.dropout, init));
  norm1 = register_module("norm1", make_norm(o.norm, d_model, o.norm_eps));
  norm2 = register_module("norm2", make_norm(o.norm, d_model, o.norm_eps));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
}

Tensor EncoderBlock::forward(const Tensor& x, const Tensor& key_padding_mask) {
  return forward_with(x, key_padding_mask, nullptr);
}

Tensor EncoderBlock::forward(const Tensor& x, const Tensor& key_padding_mask, LayerCache& cache) {
  // Without a causal mask every earlier output would change with each new token: nothing to cache.
  RG_CHECK(options.causal, "EncoderBlock", "a KV cache needs a causal block (BlockOptions::causal)");
  return forward_with(x, key_padding_mask, &cache);
}

Tensor EncoderBlock::forward_with(const Tensor& x, const Tensor& key_padding_mask, LayerCache* cache) {
  RG_CHECK(x.defined(), "EncoderBlock", "x is an undefined tensor");
  AttentionOptions ao;
  ao.causal = options.causal;
  ao.key_padding_mask = key_padding_mask;
  auto attend = [&](const Tensor& h) {
    return cache ? self_attn->forward(h, cache->self, ao).output : self_attn->forward(h, h, ao).output;
  };
  // Each residual add that a norm follows is fused with it (add_norm); dropout stays where it was.
  Tensor h = x;  // (B, T, C)
  if (options.pre_norm) {
    ResidualNorm a = add_norm(*norm2, h, dropout->forward(attend(norm1->forward(h))));  // a.sum: h after attention
    return a.sum + dropout->forward(ff->forward(a.out));
  }
  h = add_norm(*norm1, h, dropout->forward(attend(h))).out;
  return add_norm(*norm2, h, dropout->forward(ff->forward(h))).out;
}

// ---- DecoderBlock ----

DecoderBlock::DecoderBlock(int64_t d_model, int64_t n_heads, int64_t d_ff, const BlockOptions& o,
                           std::shared_ptr<PositionalScheme> self_positional,
                           std::shared_ptr<PositionalScheme> cross_positional, Alignment alignment, Generator* init)
    : options(o), cross_alignment(alignment) {
  check_block_args("DecoderBlock", d_model, n_heads, d_ff, o);
  RG_CHECK(!o.causal, "DecoderBlock", "options.causal is for EncoderBlock; decoder self-attention is always causal");
  self_attn = register_module("self_attn",
                              std::make_shared<MultiHeadAttention>(d_model, n_heads, self_positional, o.dropout, true, init));
  cross_attn = register_module(
      "cross_attn", std::make_shared<MultiHeadAttention>(d_model, n_heads, cross_positional, o.dropout, true, init));
  self_attn->core = cross_attn->core = o.attention_core;
  ff = register_module("ff", std::make_shared<FeedForward>(d_model, d_ff, o.activation, o.dropout, init));
  norm1 = register_module("norm1", make_norm(o.norm, d_model, o.norm_eps));
  norm2 = register_module("norm2", make_norm(o.norm, d_model, o.norm_eps));
  norm3 = register_module("norm3", make_norm(o.norm, d_model, o.norm_eps));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
}

Tensor DecoderBlock::forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_padding_mask,
                             const Tensor& memory_padding_mask, const Tensor& tgt_positions) {
  return forward_with(x, memory, tgt_padding_mask, memory_padding_mask, tgt_positions, nullptr);
}

Tensor DecoderBlock::forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_padding_mask,
                             const Tensor& memory_padding_mask, LayerCache& cache,
                             const Tensor& tgt_positions) {
  return forward_with(x, memory, tgt_padding_mask, memory_padding_mask, tgt_positions, &cache);
}

Tensor DecoderBlock::forward_with(const Tensor& x, const Tensor& memory, const Tensor& tgt_padding_mask,
                                  const Tensor& memory_padding_mask, const Tensor& tgt_positions,
                                  LayerCache* cache) {
  RG_CHECK(x.defined() && memory.defined(), "DecoderBlock", "x and memory must be defined tensors");
  RG_CHECK_T(ShapeError, x.dim() == 3, "DecoderBlock", "x must be (B, t2, C), got ", shape_str(x.shape()));
  const int64_t t_new = x.size(1), n = (cache ? cache->self.length() : 0) + t_new;  // n: every target token
  if (tgt_positions.defined())
    RG_CHECK_T(ShapeError,
               tgt_positions.dtype() == kInt64 && tgt_positions.dim() == 1 && tgt_positions.size(0) == n,
               "DecoderBlock", "tgt_positions must be int64 (", n, "), one π(i) per target token",
               cache ? " (cached and new)" : "", ", got ", dtype_name(tgt_positions.dtype()), " ",
               shape_str(tgt_positions.shape()));
  AttentionOptions self_o;
  self_o.causal = true;
  self_o.key_padding_mask = tgt_padding_mask;
  AttentionOptions cross_o;
  cross_o.key_padding_mask = memory_padding_mask;
  cross_o.alignment = cross_alignment;
  if (tgt_positions.defined()) {
    // Given positions do not move as the target grows, so they cache exactly.
    cross_o.query_positions = cache ? tgt_positions.narrow(0, n - t_new, t_new) : tgt_positions;
  } else if (cache) {
    // Under Right or Scaled alignment π(i) of every target query moves as the target grows, so the
    // earlier tokens' states (the cached self-attention keys and values) would go stale; only
    // Left alignment (π(i) = i), or a cross-attention without a scheme, can be cached exactly.
    RG_CHECK(cross_alignment == Alignment::Left || !cross_attn->positional, "DecoderBlock",
             "a KV cache needs cross_alignment Left when cross-attention has a positional scheme (under Right "
             "or Scaled the earlier target positions move as the target grows); decode without a cache, or "
             "give explicit tgt_positions");
    cross_o.query_positions = arange(static_cast<double>(n - t_new), static_cast<double>(n), 1.0, kInt64);
  }
  auto self = [&](const Tensor& h) {  // (B, t2, C)
    return cache ? self_attn->forward(h, cache->self, self_o).output : self_attn->forward(h, h, self_o).output;
  };
  auto cross = [&](const Tensor& h) {  // (B, t2, C)
    return cache ? cross_attn->forward(h, memory, cache->cross, cross_o).output
                 : cross_attn->forward(h, memory, cross_o).output;
  };
  // Each residual add that a norm follows is fused with it (add_norm); dropout stays where it was.
  Tensor h = x;  // (B, t2, C)
  if (options.pre_norm) {
    ResidualNorm a = add_norm(*norm2, h, dropout->forward(self(norm1->forward(h))));
    ResidualNorm c = add_norm(*norm3, a.sum, dropout->forward(cross(a.out)));
    return c.sum + dropout->forward(ff->forward(c.out));
  }
  h = add_norm(*norm1, h, dropout->forward(self(h))).out;
  h = add_norm(*norm2, h, dropout->forward(cross(h))).out;
  return add_norm(*norm3, h, dropout->forward(ff->forward(h))).out;
}

}  // namespace relgrad
