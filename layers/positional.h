// PositionalScheme: how an attention layer uses positions. A scheme may act at five places of
//   logits  = (content(q, k) + score_term(q)) · logit_scale + logit_bias        (B, H, t2, t1)
//   weights = softmax(mask(logits));   out = weights · v + value_term(weights)  (B, H, t2, D)
// and each scheme overrides only the places its paper uses (docs/relative-attention.md has the table):
//   Shaw, Huang, the seed's method, Transformer-XL: score_term (scaled with q·k by 1/√D); Shaw's a^V:
//   value_term; T5: logit_bias with logit_scale 1 (T5 has no 1/√D); ALiBi: logit_bias;
//   RoPE and Transformer-XL's u: content_qk.
// Schemes are Modules, so their tables are parameters; one scheme object may be shared by several
// layers (T5 shares its table across a stack).
#pragma once
#include <cmath>
#include <string>
#include <utility>

#include "layers/module.h"

namespace relgrad {

// What a scheme needs to know about the attention it serves.
struct AttentionGeometry {
  int64_t batch = 0, heads = 0, head_dim = 0;
  int64_t t2 = 0;                          // queries
  int64_t t1 = 0;                          // keys
  bool causal = false;
  Alignment alignment = Alignment::Left;   // π(i): where query i sits on the key axis
  Tensor query_positions;                  // optional explicit π(i), int64 (t2)
  // The geometry of split heads: B batches, H heads of size D, t2 queries, t1 keys.
  static AttentionGeometry make(int64_t B, int64_t H, int64_t D, int64_t t2, int64_t t1, bool causal) {
    AttentionGeometry g;
    g.batch = B;
    g.heads = H;
    g.head_dim = D;
    g.t2 = t2;
    g.t1 = t1;
    g.causal = causal;
    return g;
  }
  // π(i) for every query, int64 (t2).
  Tensor positions() const { return query_positions.defined() ? query_positions : query_positions_for(t2, t1, alignment); }
  static Tensor query_positions_for(int64_t t2, int64_t t1, Alignment a) { return relgrad::query_positions(t2, t1, a); }
};

class PositionalScheme : public Module {
 public:
  virtual std::string name() const = 0;
  // q (B,H,t2,D), k (B,H,t1,D) → the pair whose product q·kᵀ gives the content logits.
  virtual std::pair<Tensor, Tensor> content_qk(const Tensor& q, const Tensor& k, const AttentionGeometry&) const {
    return {q, k};
  }
  // A q-dependent term (B,H,t2,t1) added to the content logits before scaling; undefined = none.
  virtual Tensor score_term(const Tensor& /*q*/, const AttentionGeometry&) const { return Tensor(); }
  // The factor on content + score_term.
  virtual double logit_scale(int64_t head_dim) const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  // A bias added after scaling, broadcastable to (B,H,t2,t1); undefined = none.
  virtual Tensor logit_bias(const AttentionGeometry&) const { return Tensor(); }
  // weights (B,H,t2,t1) → a term (B,H,t2,D) added to weights·v; undefined = none.
  virtual Tensor value_term(const Tensor& /*weights*/, const AttentionGeometry&) const { return Tensor(); }
};

}  // namespace relgrad
