// Content-dependent positions: schemes whose positional term reads the content itself, through
// PositionalScheme::content_bias (the keys), key_state (the layer input) and attention_weights
// (layers/positional.h).
//   CoPE: positions counted by gates σ(q·k), learned embeddings interpolated at fractional positions;
//   FoX:  per-head forget gates from the layer input, a bias of summed log gates between key and query;
//   stick-breaking: weights that break a stick from the nearest key back, in place of softmax.
// All three are defined by their papers for causal self-attention only (the registry says causal_only
// and self_only): each counts the keys between key j and the query's own place π(i) on the same axis.
// Shapes: B batch, H heads, D head size, C = H·D, t2 queries, t1 keys.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "layers/linear.h"
#include "layers/positional.h"

namespace relgrad {

struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

// CoPE, Golovneva et al. 2024 (arXiv 2405.18719), §3's gate, position, interpolation and logit
// equations and the reference code of its appendix:
//   gate      g_ij = σ(z_ij),  z_ij = q_i·k_j / √D, hidden keys 0
//   position  p_ij = Σ_{t=j..π(i)} g_it, clamped to npos − 1
//   embedding e[p] = (p − ⌊p⌋)·e[⌈p⌉] + (1 − p + ⌊p⌋)·e[⌊p⌋]
//   logits    z_ij + q_i·e[p_ij]
// The gate reads the scaled logit and the term q·e[p] enters after scaling, as the paper's code does
// (its equations leave the 1/√D out). e (npos, D) is one table per layer shared by the heads, zero at
// start like the paper's. Gradients flow through q·e, the fractional weight p − ⌊p⌋ and the gates
// (⌊p⌋, ⌈p⌉ and the clamp are constant pieces, as torch's floor/ceil/clamp).
class CoPE : public PositionalScheme {
 public:
  CoPE(int64_t head_dim, int64_t npos);
  std::string name() const override { return "cope"; }
  // (B, H, t2, t1): q·e[p_ij] for every pair (0 where hidden; the core masks those).
  Tensor content_bias(const Tensor& q, const Tensor& k, const Tensor& mask, const AttentionGeometry& g) const override;
  // Not fusable: the positions need every gate of a row before any logit (a cumulative sum over the
  // keys of σ(q·k)), which the fused core's one pass over key tiles does not compute.
  // The measured effective bias: mean q_i·e[p_ij] over the valid pairs at each δ (p from the recorded q, k).
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // p_ij (B, H, t2, t1) before the clamp: suffix sums of the gates along each row.
  Tensor positions(const Tensor& q, const Tensor& k, const Tensor& mask) const;
  static std::string check(const SchemeCheck& c);  // model.<place>.cope_positions ≥ 1
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // npos·D

  int64_t head_dim, npos;
  Tensor table;  // (npos, D): e[0] … e[npos − 1]
  mutable LruCache<CacheKey, Tensor> triangles{8};  // (t1, t1) suffix-sum matrices by size, dtype, device
};

// The Forgetting Transformer, Lin et al., ICLR 2025 (arXiv 2503.02130), §2's Forgetting Attention: per head h a
// forget gate f_t = σ(w_hᵀx_t + b_h) on the layer input x_t (C), and the logits
//   z_ij = q_i·k_j / √D + Σ_{l=j+1..π(i)} log f_l = q_i·k_j / √D + c_{π(i)} − c_j,   c_j = Σ_{l≤j} log f_l.
// key_state is log f (B, H, t, 1), so a KV cache holds every gate and cached decoding sums the same
// terms. w (H, C) as nn.Linear(C, H) (the official code's forget-gate projection), b (H) = 5
// (kForgetGateBiasInit, layers/contextual.cpp says why).
inline constexpr double kForgetGateBiasInit = 5.0;
class ForgettingAttention : public PositionalScheme {
 public:
  ForgettingAttention(int64_t embed_dim, int64_t num_heads, Generator* init_generator = nullptr);
  std::string name() const override { return "fox"; }
  Tensor key_state(const Tensor& key_input) const override;  // (B, t, C) → log f (B, H, t, 1)
  // (B, H, t2, t1): c_{π(i)} − c_j from g.key_state.
  Tensor content_bias(const Tensor& q, const Tensor& k, const Tensor& mask, const AttentionGeometry& g) const override;
  // The measured effective bias: mean c_{π(i)} − c_j over the valid pairs at each δ (≤ 0 for the past).
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // H·(C + 1)

  int64_t embed_dim, num_heads;
  std::shared_ptr<Linear> forget_gate;  // C → H
  mutable LruCache<CacheKey, Tensor> triangles{8};  // (t1, t1) prefix-sum matrices by size, dtype, device
};

// Stick-breaking attention, Tan et al., ICLR 2025 (arXiv 2410.17980), §2's weights: each query breaks
// its stick at the keys from the nearest back, key j taking the share β_ij = σ(z_ij), z_ij = q_i·k_j/√D
// (plus any bias), of what the later keys left:
//   A_ij = β_ij · Π_{j < k < π(i)} (1 − β_ik)   for j < π(i),   out_i = Σ_j A_ij v_j
// computed in log space, log A_ij = log σ(z_ij) + Σ_k log σ(−z_ik). As the paper, the query's own key is
// not attended (j < π(i) strictly; the first query gets no weight: out 0), hidden keys (padding) break
// nothing, and the stick left over (1 − Σ_j A_ij) is dropped, so the weights need not sum to 1. It
// replaces softmax (attention_weights), so it is an attention variant, registered as a scheme. Not
// fusable: the fused core's online softmax normalises each row, which stick-breaking must not.
class StickBreaking : public PositionalScheme {
 public:
  std::string name() const override { return "stick_breaking"; }
  Tensor attention_weights(const Tensor& logits, const Tensor& mask, double scale, const Tensor& bias,
                           const AttentionGeometry& g) const override;  // (B, H, t2, t1)
  // The measured effective bias: the mean over the valid pairs at each δ < 0 of Σ_k log(1 − β_ik) over
  // the keys between, what the later keys take from log β_ij (0 at δ = −1, the nearest key).
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // log A (B, H, t2, t1) and the hidden pairs (the caller's mask or'ed with the query's own key and later).
  std::pair<Tensor, Tensor> log_weights(const Tensor& z, const Tensor& mask, const AttentionGeometry& g) const;

  mutable LruCache<CacheKey, Tensor> triangles{8};  // (t1, t1) strict suffix-sum matrices by size, dtype, device
  mutable LruCache<CacheKey, Tensor> own_key_masks{8};  // (1, 1, t2, t1) j ≥ π(i), by geometry
};

// log σ(z) without overflow: min(z, 0) − log(1 + e^−|z|), differentiable.
Tensor log_sigmoid(const Tensor& z);
// The (t, t) 0/1 matrix M with M[l, j] = 1 iff l ≤ j (`upper`) or l ≥ j, the diagonal left out when
// `strict`: x·M sums each row's prefixes (upper) or suffixes. The cached one is built once per key in
// `cache` (a training step after the first copies none to the GPU).
Tensor triangle_ones(int64_t t, bool upper, bool strict, DType dtype, Device device);
Tensor cached_triangle_ones(LruCache<CacheKey, Tensor>& cache, int64_t t, bool upper, bool strict, DType dtype,
                            Device device);

}  // namespace relgrad
