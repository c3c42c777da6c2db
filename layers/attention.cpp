#include "layers/attention.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/allocator.h"


namespace relgrad {

Tensor attention_heads_fused(const Tensor& q, const Tensor& k, const Tensor& v, const PositionalScheme* positional,
                             const AttentionGeometry& g, const Tensor& key_padding_mask) {
  if (g.t2 == 0 || g.t1 == 0) return Tensor();
  FusedCall call;
  call.q = q;
  call.k = k;
  FlashAttentionOptions& f = call.options;
  f.causal = g.causal;
  f.query_positions = g.positions();
  f.key_padding_mask = key_padding_mask;
  call.positions = f.query_positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  const int64_t pmin = *std::min_element(call.positions.begin(), call.positions.end());
  const int64_t pmax = *std::max_element(call.positions.begin(), call.positions.end());
  // The distances keys 0 … t1−1 reach from every π(i): the lookups' range.
  call.min_delta = -pmax;
  call.width = g.t1 + pmax - pmin;
  f.min_delta = call.min_delta;
  if (!positional) {
    f.scale = 1.0 / std::sqrt(static_cast<double>(g.head_dim));
    return flash_relative_attention(call.q, call.k, v, f);
  }
  f.scale = positional->logit_scale(g.head_dim);
  if (!positional->fuse(call, g)) return Tensor();  // the scheme's own answer: the composite core runs
  return flash_relative_attention(call.q, call.k, v, f);
}

bool fused_core_pays(const Tensor& q, int64_t t1, size_t composite_limit_bytes) {
  return fused_core_pays(q.size(0), q.size(1), q.size(2), t1, q.dtype(), q.device(), composite_limit_bytes);
}

bool fused_core_pays(int64_t B, int64_t H, int64_t t2, int64_t t1, DType dtype, const Device& device,
                     size_t composite_limit_bytes) {
  if (flash_attention_faster(B, H, t1, device)) return true;
  const size_t limit = composite_limit_bytes ? composite_limit_bytes : device_memory_bytes(device) / 64;
  const double scores = double(B) * double(H) * double(t2) * double(t1) * double(dtype_size(dtype));
  return scores > double(limit);
}

namespace {

// A scheme's logit_bias plus its content_bias (CoPE, FoX: layers/contextual.h); undefined = none.
Tensor scheme_bias(const PositionalScheme& s, const Tensor& q, const Tensor& kc, const Tensor& mask,
                   const AttentionGeometry& g) {
  Tensor bias = s.logit_bias(g), content = s.content_bias(q, kc, mask, g);
  if (!content.defined()) return bias;
  return bias.defined() ? bias + content : content;
}

// The scheme's own weights (stick-breaking) or the one fused softmax of scale, bias and mask.
Tensor scheme_weights(const PositionalScheme* s, const Tensor& logits, const Tensor& mask, double scale,
                      const Tensor& bias, const AttentionGeometry& g) {
  Tensor w = s ? s->attention_weights(logits, mask, scale, bias, g) : Tensor();
  return w.defined() ? w : masked_softmax(logits, mask, scale, bias);
}

}  // namespace

Tensor causal_mask(const Tensor& positions, int64_t t1) {
  const int64_t t2 = positions.size(0);
  Tensor keys = arange(static_cast<double>(t1), kInt64).reshape({1, t1});
  return gt(keys, positions.reshape({t2, 1})).reshape({1, 1, t2, t1});  // key after the query: hidden
}

AttentionOutput attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, const PositionalScheme* positional,
                                const AttentionGeometry& g, const Tensor& mask, double dropout_p, bool training,
                                Generator* generator, const WindowPtr& window) {
  Tensor qc = q, kc = k;
  if (positional) std::tie(qc, kc) = positional->content_qk(q, k, g);
  // (B,H,t2,t1): q·kᵀ, accumulated onto the scheme's score term when it has one (addmm, no add pass)
  Tensor term = positional ? positional->score_term(q, g) : Tensor();
  Tensor logits = window                ? window_scores(qc, kc.transpose(-1, -2), window, term)
                  : term.defined() ? addmm(term, qc, kc.transpose(-1, -2))
                                   : matmul(qc, kc.transpose(-1, -2));
  // Scale, bias (T5, ALiBi) and mask enter the one fused softmax (its composite twin, the chain of
  // mul, add, masked_fill, softmax, masked_fill, is its test oracle: tests/test_fused.cpp).
  // A row whose keys are all masked gets zero weights, so it outputs 0 with zero gradient.
  const double scale = positional ? positional->logit_scale(g.head_dim) : 1.0 / std::sqrt(double(g.head_dim));
  Tensor bias = positional ? scheme_bias(*positional, q, kc, mask, g) : Tensor();
  Tensor weights = scheme_weights(positional, logits, mask, scale, bias, g);
  Tensor dropped = dropout_p > 0 ? dropout(weights, dropout_p, training, generator) : weights;
  Tensor out = window ? window_apply(dropped, v, window) : matmul(dropped, v);  // (B,H,t2,D)
  if (positional) {
    Tensor term = positional->value_term(dropped, g);  // Shaw: the value term uses the dropped weights
    if (term.defined()) out = out + term;
  }
  return {out, weights};
}

MultiHeadAttention::MultiHeadAttention(int64_t embed_dim_, int64_t num_heads_,
                                       std::shared_ptr<PositionalScheme> positional_, double dropout_, bool bias,
                                       Generator* init)
    : embed_dim(embed_dim_), num_heads(num_heads_), head_dim(0), dropout(dropout_) {
  RG_CHECK_T(ShapeError, embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, "MultiHeadAttention",
             "embed_dim ", embed_dim, " must be a positive multiple of num_heads ", num_heads);
  RG_CHECK(dropout >= 0.0 && dropout < 1.0, "MultiHeadAttention", "dropout must be in [0, 1), got ", dropout);
  head_dim = embed_dim / num_heads;
  q_proj = register_module("q_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, init));
  k_proj = register_module("k_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, init));
  v_proj = register_module("v_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, init));
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, init));
  if (positional_) positional = register_module("positional", positional_);
}

void MultiHeadAttention::check_query(const Tensor& query, const AttentionOptions& o) const {
  RG_CHECK_T(ShapeError, query.dim() == 3 && query.size(2) == embed_dim, "MultiHeadAttention",
             "query must be (B, t2, ", embed_dim, "), got ", shape_str(query.shape()));
  const int64_t t2 = query.size(1);
  if (o.query_positions.defined())
    RG_CHECK_T(ShapeError, o.query_positions.dtype() == kInt64 && o.query_positions.dim() == 1 &&
                               o.query_positions.size(0) == t2,
               "MultiHeadAttention", "query_positions must be int64 (", t2, "), got ",
               dtype_name(o.query_positions.dtype()), " ", shape_str(o.query_positions.shape()));
}

AttentionOutput MultiHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v,
                                           const AttentionGeometry& g, const AttentionOptions& o) {
  const char* op = "MultiHeadAttention";
  const int64_t B = g.batch, t2 = g.t2, t1 = g.t1;
  if (o.key_padding_mask.defined()) {
    const Tensor& kpm = o.key_padding_mask;
    RG_CHECK_T(ShapeError, kpm.dtype() == kBool && kpm.dim() == 2 && kpm.size(0) == B && kpm.size(1) == t1, op,
               "key_padding_mask must be bool (B, t1) = (", B, ", ", t1, "), got ", dtype_name(kpm.dtype()), " ",
               shape_str(kpm.shape()));
  }
  const PositionalScheme* scheme = positional.get();
  // The fused core when it applies (no dropout to draw, no weights to return), else the composite.
  last_call_fused = false;
  const bool wanted = core == AttentionCore::Fused ||
                      (core == AttentionCore::Auto && fused_core_pays(q, t1, fused_auto_limit_bytes));
  if (wanted && !(dropout > 0 && is_training()) && !o.need_weights && !forward_hook) {
    Tensor kpm = o.key_padding_mask.defined() ? o.key_padding_mask.to(q.device()) : Tensor();
    Tensor out = attention_heads_fused(q, k, v, scheme, g, kpm);
    last_call_fused = out.defined();
    if (out.defined()) {  // on the CPU out is (B, t2, H, D) memory: the merge is a view both ways
      Tensor merged = out.permute({0, 2, 1, 3}).reshape({B, t2, embed_dim});
      return {out_proj->forward(merged), Tensor()};
    }
  }
  Tensor mask;
  if (g.causal)  // (1, 1, t2, t1) on q's device, cached by geometry
    mask = causal_masks.get(geometry_key(g, {}, kBool, q.device()),
                             [&] { return causal_mask(g.positions(), t1).to(q.device()); });
  if (o.key_padding_mask.defined()) {
    Tensor pad = o.key_padding_mask.to(q.device()).reshape({B, 1, 1, t1});
    mask = mask.defined() ? where(mask, mask, pad) : pad;  // logical or
  }
  WindowPtr window;  // the causal products skip the future where that pays (the mask hides it)
  if (g.causal && skip_masked_products) {
    window = causal_windows.get(geometry_key(g, {}, kBool, q.device()), [&] {
      return MatrixWindow::causal(g.positions().to(Device::cpu()).to_vector<int64_t>(), t1, "MultiHeadAttention");
    });
    if (!window_products_skip(q, *window)) window = nullptr;
  }
  AttentionOutput a =
      attention_heads(q, k, v, scheme, g, mask, dropout, is_training(), dropout_generator, window);
  Tensor merged = a.output.permute({0, 2, 1, 3}).reshape({B, t2, embed_dim});
  if (forward_hook) forward_hook({q, k, a.weights, g, o.key_padding_mask});
  return {out_proj->forward(merged), o.need_weights ? a.weights : Tensor()};
}

AttentionOutput MultiHeadAttention::forward(const Tensor& query, const Tensor& key_value, const AttentionOptions& o) {
  check_query(query, o);
  RG_CHECK_T(ShapeError, key_value.dim() == 3 && key_value.size(2) == embed_dim && key_value.size(0) == query.size(0),
             "MultiHeadAttention", "key_value must be (B, t1, ", embed_dim, ") with the query's batch ",
             query.size(0), ", got ", shape_str(key_value.shape()));
  const int64_t B = query.size(0), t2 = query.size(1), t1 = key_value.size(1), H = num_heads, D = head_dim;
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, o.causal);
  g.alignment = o.alignment;
  g.query_positions = o.query_positions;
  // (B, t, C) → (B, H, t, D)
  auto heads = [&](const Tensor& x, int64_t t) { return x.reshape({B, t, H, D}).permute({0, 2, 1, 3}); };
  Tensor q = heads(q_proj->forward(query), t2);
  Tensor k = heads(k_proj->forward(key_value), t1);
  Tensor v = heads(v_proj->forward(key_value), t1);
  if (positional) g.key_state = positional->key_state(key_value);  // (B, H, t1, S) or undefined
  return attend(q, k, v, g, o);
}

AttentionOutput MultiHeadAttention::forward(const Tensor& x_new, KVCache& cache, const AttentionOptions& o) {
  const char* op = "MultiHeadAttention";
  check_query(x_new, o);
  const int64_t B = x_new.size(0), t2 = x_new.size(1), H = num_heads, D = head_dim;
  const int64_t t_cached = cache.length(), t1 = t_cached + t2;
  if (cache.k.defined())
    // Keys in content form may be wider than D (PoPE's are 2D): the values' width is checked.
    RG_CHECK_T(ShapeError, cache.k.dim() == 4 && cache.k.size(0) == B && cache.k.size(1) == H && cache.v.size(3) == D,
               op, "the KV cache holds keys ", shape_str(cache.k.shape()), ", expected (", B, ", ", H, ", t, ", D,
               ") for x_new ", shape_str(x_new.shape()));
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, true);
  g.alignment = Alignment::Right;  // the new queries are the last t2 of the t1 positions
  g.query_positions = o.query_positions;
  auto heads = [&](const Tensor& x) { return x.reshape({B, t2, H, D}).permute({0, 2, 1, 3}); };
  Tensor q = heads(q_proj->forward(x_new));  // (B, H, t2, D)
  Tensor k = heads(k_proj->forward(x_new));
  Tensor v = heads(v_proj->forward(x_new));
  // The cache holds keys in the scheme's content form (RoPE: rotated), the new ones at t_cached … t1−1.
  if (positional) {
    k = positional->content_key(k, arange(static_cast<double>(t_cached), static_cast<double>(t1), 1.0, kInt64));
    g.keys_in_content_form = true;
  }
  cache.k = t_cached > 0 ? cat({cache.k, k}, 2) : k.contiguous();  // (B, H, t1, D)
  cache.v = t_cached > 0 ? cat({cache.v, v}, 2) : v.contiguous();
  if (positional) {  // the new keys' state beside the cached ones' (FoX: every gate up to t1 − 1)
    Tensor s = positional->key_state(x_new);
    if (s.defined()) cache.s = t_cached > 0 ? cat({cache.s, s}, 2) : s.contiguous();
    g.key_state = cache.s;
  }
  return attend(q, cache.k, cache.v, g, o);
}

AttentionOutput MultiHeadAttention::forward(const Tensor& query, const Tensor& memory, KVCache& cache,
                                            const AttentionOptions& o) {
  const char* op = "MultiHeadAttention";
  check_query(query, o);
  RG_CHECK_T(ShapeError, memory.dim() == 3 && memory.size(2) == embed_dim && memory.size(0) == query.size(0), op,
             "memory must be (B, t1, ", embed_dim, ") with the query's batch ", query.size(0), ", got ",
             shape_str(memory.shape()));
  const int64_t B = query.size(0), t2 = query.size(1), t1 = memory.size(1), H = num_heads, D = head_dim;
  AttentionGeometry g = AttentionGeometry::make(B, H, D, t2, t1, o.causal);
  g.alignment = o.alignment;
  g.query_positions = o.query_positions;
  auto heads = [&](const Tensor& x, int64_t t) { return x.reshape({B, t, H, D}).permute({0, 2, 1, 3}); };
  if (!cache.k.defined()) {
    Tensor k = heads(k_proj->forward(memory), t1);  // (B, H, t1, D)
    if (positional) k = positional->content_key(k, arange(static_cast<double>(t1), kInt64));  // content form
    cache.k = k.contiguous();
    cache.v = heads(v_proj->forward(memory), t1).contiguous();
    if (positional) cache.s = positional->key_state(memory);
  }
  RG_CHECK_T(ShapeError, cache.k.size(0) == B && cache.k.size(2) == t1, op, "the cross-attention cache holds keys ",
             shape_str(cache.k.shape()), ", but the memory is ", shape_str(memory.shape()));
  Tensor q = heads(q_proj->forward(query), t2);
  g.keys_in_content_form = positional != nullptr;
  g.key_state = cache.s;
  return attend(q, cache.k, cache.v, g, o);
}

}  // namespace relgrad
