// Transformer-XL relative attention (Dai et al. 2019; also ESPnet's Conformer, RETURNN):
//   A_ij = (q_i + u)·k_j  +  (q_i + v)·(W_r R_{p})_h,   p = π(i) − j,   then scaled by 1/√D.
//          (a) + (c): content_qk              (b) + (d): score_term
// R is a fixed sinusoid, W_r a learned projection (Linear(C, C) without bias), u and v learned (H, D).
// Sign: relgrad's relative position is δ = j − π(i); Transformer-XL writes R_{i−j} with p = i − j, so
// the table row for δ holds R at p = −δ. The sinusoid therefore matches Transformer-XL's exactly
// (R_p = [sin(p·ω), cos(p·ω)], concatenated; ω_k = 10000^(−2k/C)), and the learned weights carry over.
// Terms (b)+(d) are one GEMM (q + v)·(W_r R)ᵀ over the δ range the lengths need, gathered into the
// scores by relative_gather (no (t2, t1, D) tensor). Self-attention, causal or not; with memory use
// Alignment::Right (π(i) = i + mlen, as Transformer-XL's klen = mlen + qlen).
#pragma once
#include <memory>

#include "layers/linear.h"
#include "layers/positional.h"

namespace relgrad {

// Rows δ = −max_past … max_future of the sinusoid at p = −δ: (max_past + max_future + 1, dim).
Tensor txl_sinusoid(int64_t max_past, int64_t max_future, int64_t dim, DType dtype = kFloat32);

struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

class TransformerXL : public PositionalScheme {
 public:
  // u and v start ~ U(−b, b) with b = √(6 / (H + D)) (ESPnet's xavier-uniform); W_r as nn.Linear.
  TransformerXL(int64_t embed_dim, int64_t num_heads, Generator* init_generator = nullptr);
  std::string name() const override { return "transformer_xl"; }
  static std::string check(const SchemeCheck& c);  // an even d_model (its sinusoid)
  Tensor content_query(const Tensor& q, const AttentionGeometry& g) const override;  // (a) + (c): q + u
  Tensor score_term(const Tensor& q, const AttentionGeometry& g) const override;     // (B, H, t2, t1)
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // (1/√D)·(q̄_h + v_h)·(W_r R_{p=−δ})_h: terms (b)+(d); (a)+(c) are content only.
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  int64_t embed_dim, num_heads, head_dim;
  std::shared_ptr<Linear> r_proj;  // W_r: (C, C), no bias
  Tensor u, v;                     // (H, D): content and position biases
  mutable LruCache<CacheKey, Tensor> sinusoid_tables{8};  // txl_sinusoid rows on a device, by δ range

 private:
  // txl_sinusoid rows for δ = −max_past … max_future in W_r's dtype on `device`, cached by range.
  Tensor sinusoid(int64_t max_past, int64_t max_future, Device device) const;
};

}  // namespace relgrad
