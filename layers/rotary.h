// RoPE (Su et al. 2021, RoFormer): rotate each pair of head dims of q and k by an angle proportional
// to the token's position, θ_k = base^(−2k/D), k = 0 … D/2 − 1. Then q_i·k_j after rotation depends
// only on j − π(i), and the usual 1/√D scaling applies (a content-pair scheme: content_query, content_key).
// Queries are rotated at π(i) (the attention's alignment or explicit positions), keys at j = 0 … t1−1.
// No parameters. The rotation is composed of differentiable ops (slices, mul, add, stack/cat), so its
// backward (a rotation by −θ) comes from autograd.
// Randomised positions (Ruoss et al. 2023; TransformerConfig::random_positions_max, layers/models.h):
// while position_map is defined, the token at index p is rotated at position_map[p] instead of p, on
// the query and the key side alike; DecoderLM sets it for one training forward and clears it after.
#pragma once
#include "layers/positional.h"

namespace relgrad {

struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

class RoPE : public PositionalScheme {
 public:
  // Which dims form a rotated pair; the two are equivalent up to a fixed permutation of W_q and W_k
  // rows, but checkpoints are not interchangeable, so the choice is explicit.
  enum class Pairing {
    Interleaved,  // (2k, 2k+1): RoFormer, GPT-J, Meta's LLaMA
    HalfSplit,    // (k, k + D/2): GPT-NeoX, HF LLaMA's rotate_half
  };
  explicit RoPE(int64_t head_dim, double base = 10000.0, Pairing pairing = Pairing::Interleaved);
  std::string name() const override { return "rope"; }
  static std::string check(const SchemeCheck& c);  // an even head size, base > 1
  Tensor content_query(const Tensor& q, const AttentionGeometry& g) const override;  // q rotated at π(i)
  Tensor content_key(const Tensor& k, const Tensor& key_positions) const override;   // k rotated at j
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // Measured, content included: the mean over visible (query, key) pairs at offset δ (non-padding,
  // unmasked) of the scaled logit R(π(i))q_i · R(j)k_j / √D; NaN where the batch has no such pair.
  // RoPE has no position-only term to read off.
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // x (..., T, D) rotated at positions int64 (T) → (..., T, D).
  Tensor rotate(const Tensor& x, const Tensor& positions) const;

  int64_t head_dim;
  double base;
  Pairing pairing;
  // Undefined (the default), or int64 (n): index p → position position_map[p], for every p < n used.
  Tensor position_map;
  // rotate's (cos, sin) tables (T, D/2) on x's device, by positions, head_dim, base and dtype: the
  // queries' and keys' positions of a few lengths (randomised positions miss: a fresh draw each time).
  mutable LruCache<CacheKey, std::pair<Tensor, Tensor>> rotary_tables{16};

 private:
  Tensor mapped(const Tensor& positions) const;  // positions, or their images under position_map
};

}  // namespace relgrad
