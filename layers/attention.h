// MultiHeadAttention for self- and cross-attention on (B, T, C) inputs, with an optional positional
// scheme (layers/positional.h). Masked positions (causal, key padding) get exactly zero weight and
// zero gradient whatever the scheme wrote there.
//
//   query (B, t2, C), key_value (B, t1, C) → output (B, t2, C) [, weights (B, H, t2, t1)]
#pragma once
#include <functional>
#include <memory>

#include "core/base/name_table.h"
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

// Projected keys and values of one attention layer, kept between decoding steps: (B, H, t_cached, D)
// each. Self-attention appends the new tokens' keys and values at every step; cross-attention fills
// it once from the encoder output and reuses it. Keys are stored in the scheme's content form
// (PositionalScheme::content_key at their absolute positions: RoPE rotates them), which depends on each
// key's own position only, so this equals transforming the whole sequence at every step.
struct KVCache {
  Tensor k, v;
  Tensor s;  // (B, H, t_cached, S): the scheme's key state (PositionalScheme::key_state) when it has one
  int64_t length() const { return k.defined() ? k.size(2) : 0; }
};
// One block's caches: causal self-attention, and cross-attention (empty in a decoder-only block).
struct LayerCache {
  KVCache self, cross;
};

// Which core a MultiHeadAttention runs (model.fused_attention; the names are the key's words, "false"
// and "true" from when it was a boolean key). Both cores compute the same function (to rounding).
enum class AttentionCore {
  Composite,  // "false": attention_heads, with its (B, H, t2, t1) scores and weights
  Fused,      // "true": attention_heads_fused wherever it covers the call, the composite elsewhere
  Auto,       // "auto": per call, the fused core where it covers the call and fused_core_pays says so
};
inline constexpr NameTable<AttentionCore, 3> kAttentionCoreNames{
    {{AttentionCore::Composite, "false"}, {AttentionCore::Fused, "true"}, {AttentionCore::Auto, "auto"}}};

// What the composite core of one forward saw and computed, lent to a forward hook for the call (detach
// and copy what you keep).
struct AttentionCall {
  const Tensor& q;                    // (B,H,t2,D) projected queries, before any scheme term
  const Tensor& k;                    // (B,H,t1,D) projected keys; in the scheme's content form when
                                      // geometry.keys_in_content_form (from a KV cache)
  const Tensor& weights;              // (B,H,t2,t1) weights (softmax, or the scheme's own), before dropout
  const AttentionGeometry& geometry;  // sizes, causality, the queries' positions π(i) (positions())
  const Tensor& key_padding_mask;     // optional bool (B, t1), true = padding, as the caller gave it
};
using AttentionHook = std::function<void(const AttentionCall&)>;

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

  // Incremental causal self-attention for decoding: x_new (B, t2, C) are the tokens that follow the
  // t_cached already in `cache`. Their keys and values are appended, and their queries attend to all
  // t1 = t_cached + t2 keys with right alignment, π(i) = i + t1 − t2 (their absolute positions), so
  // every scheme sees the same (query, key) positions as the full causal pass over all t1 tokens
  // and gives the same scores. Always causal; options.key_padding_mask, if any, covers all t1 keys.
  AttentionOutput forward(const Tensor& x_new, KVCache& cache, const AttentionOptions& options = {});
  // Cross-attention whose memory (B, t1, C) is projected into `cache` on the first call and reused
  // after (the memory is then only checked for its shape). Positions come from `options` as usual.
  AttentionOutput forward(const Tensor& query, const Tensor& memory, KVCache& cache,
                          const AttentionOptions& options = {});

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  Generator* dropout_generator = nullptr;  // null: the default generator
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
  std::shared_ptr<PositionalScheme> positional;
  // A forward hook, as PyTorch's register_forward_hook, for instruments (train/instruments/probe.cpp):
  // while set, every forward runs the composite core (the fused one has no weights to show) and calls
  // it with what that core saw and computed. Unset (the default), a forward does no extra work.
  AttentionHook forward_hook;
  // Fused: use the fused core (flash_relative_attention: O(t·D) memory, no (t2, t1) tensor) whenever it
  // covers the call: no scheme or one whose PositionalScheme::fuse accepts it (every built-in but Shaw
  // with values), no attention dropout while training, neither need_weights nor a forward_hook.
  // Otherwise the composite core runs; both give the same results (tests/test_flash_attention.cpp).
  // Auto (model.fused_attention = "auto"): the core is picked per call, where the fused one applies,
  // by fused_core_pays below: the faster where the two fit in memory (measured: docs/benchmarks.md,
  // "Cost growth with L"), the fused one where the composite's (B, H, t2, t1) tensors would crowd the
  // machine. Both compute the same function (to rounding).
  AttentionCore core = AttentionCore::Composite;
  size_t fused_auto_limit_bytes = 0;  // Auto: fused_core_pays' composite_limit_bytes (0: its default)
  // What the last forward ran: true for the fused core (tests, instruments).
  bool last_call_fused = false;
  // The composite core's causal products (q·kᵀ and the weights times v, forward and backward) skip
  // the masked future, about half of each (window_scores, window_apply: autograd/ops.h), where that
  // pays (window_products_skip: the CPU's float32 kernel, 64 keys or more); the same values as the
  // dense products.
  // false: dense products always (tests compare the two).
  bool skip_masked_products = true;
  // The composite core's causal masks (1, 1, t2, t1) on q's device, and its causal windows, by geometry
  // (layers/positional.h).
  LruCache<CacheKey, Tensor> causal_masks{8};
  LruCache<CacheKey, WindowPtr> causal_windows{8};

 private:
  // What every forward shares after the projections: the mask, the core and the head merge.
  // q (B,H,t2,D), k and v (B,H,t1,D); k in the scheme's content form when g.keys_in_content_form.
  AttentionOutput attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionGeometry& g,
                         const AttentionOptions& options);
  void check_query(const Tensor& query, const AttentionOptions& options) const;
};

// The attention core on split heads, for schemes and tests: q (B,H,t2,D), k and v (B,H,t1,D) →
// (output (B,H,t2,D), weights (B,H,t2,t1)). `mask` is bool, broadcastable to (B,H,t2,t1), true = hidden.
// `window` (optional, (t2, t1)): every key outside it is hidden by `mask`, so the q·kᵀ and weights·v
// products skip it (window_scores, window_apply).
AttentionOutput attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, const PositionalScheme* positional,
                                const AttentionGeometry& geometry, const Tensor& mask, double dropout, bool training,
                                Generator* generator, const WindowPtr& window = nullptr);

// The fused core: the same result as attention_heads without dropout (output only, no weights) through
// flash_relative_attention, for the schemes it covers (the learned tables of the seed's method, Huang and
// Shaw without values, T5, ALiBi, Transformer-XL, RoPE, none). key_padding_mask: optional bool (B, t1),
// causality comes from the geometry. Returns an undefined Tensor when the fused op does not cover the
// call (an empty sequence, or the scheme's PositionalScheme::fuse says no: Shaw's value term, a scheme
// that does not override it): the caller runs attention_heads.
Tensor attention_heads_fused(const Tensor& q, const Tensor& k, const Tensor& v, const PositionalScheme* positional,
                             const AttentionGeometry& geometry, const Tensor& key_padding_mask);

// model.fused_attention = "auto"'s rule for one attention call of q (B,H,t2,D) over t1 keys: the fused
// core where it trains faster by this machine's kernels (flash_attention_faster, autograd/ops.h: on the
// CPU from 512 keys when its backward runs in one pass and the GEMM is OpenBLAS's or BLIS's), or where
// one (B,H,t2,t1) tensor of q's dtype would exceed composite_limit_bytes (0: 1/64 of the memory of q's
// device, device_memory_bytes in core/device.h; the composite keeps a few such tensors per layer for
// the backward pass); else the composite core (the faster one below 512 keys on the CPU and at every
// length measured on an H100, docs/benchmarks.md).
bool fused_core_pays(const Tensor& q, int64_t t1, size_t composite_limit_bytes = 0);
// The same rule from the call's sizes alone (B, H, t2, t1, the dtype and device of q), for estimates
// made before any tensor exists (the memory bound of `relgrad train`, train/config/config.h).
bool fused_core_pays(int64_t B, int64_t H, int64_t t2, int64_t t1, DType dtype, const Device& device,
                     size_t composite_limit_bytes = 0);

// The bool mask (1, 1, t2, t1) hiding keys after each query's position π(i).
Tensor causal_mask(const Tensor& positions, int64_t t1);

}  // namespace relgrad
