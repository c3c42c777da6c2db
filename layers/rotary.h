// RoPE (Su et al. 2021, RoFormer): rotate each pair of head dims of q and k by an angle proportional
// to the token's position, θ_k = base^(−2k/D), k = 0 … D/2 − 1. Then q_i·k_j after rotation depends
// only on j − π(i), and the usual 1/√D scaling applies (a content-pair scheme: content_query, content_key).
// Queries are rotated at π(i) (the attention's alignment or explicit positions), keys at j = 0 … t1−1.
// No parameters. The rotation is composed of differentiable ops (slices, mul, add, stack/cat), so its
// backward (a rotation by −θ) comes from autograd.
// Randomised positions (Ruoss et al. 2023; TransformerConfig::random_positions_max, layers/models.h):
// while position_map is defined, the token at index p is rotated at position_map[p] instead of p, on
// the query and the key side alike; DecoderLM sets it for one training forward and clears it after.
//
// The one rotation serves the rotary family (layers/rotary_variants.h): each pair k turns by
// p / timescale_k and is scaled by an amplitude a_k(p) on the query side (1 / a_k(p) on the key side):
//   RoPE:   timescale_k = base^(2k/D), a = 1;
//   p-RoPE: the lowest frequencies get timescale ∞ (unrotated), rotated_pairs < D/2;
//   xPos:   a_k(p) = ζ_k^(p/γ) (xpos_scale_base γ > 0);
// and the evaluation-time RoPE scalings (RotaryScaling, below) change the timescales and multiply both
// sides by YaRN's temperature factor.
#pragma once
#include "layers/positional.h"

namespace relgrad {

struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

// RoPE scaling for a checkpoint evaluated past its training length (model.<place>.rope_scaling):
//   none;
//   linear: position interpolation (Chen et al. 2023, arXiv 2306.15595, eq. 3): positions / s, i.e.
//           every timescale × s (HF rope_type "linear");
//   ntk:    NTK-aware base scaling (YaRN paper, arXiv 2309.00071, eq. 16): base' = base · s^(D/(D−2));
//   yarn:   YaRN (ibid., eqs. 17–22): per frequency a ramp between interpolation (θ/s) and the trained
//           θ by r = L / wavelength against β_fast = 32, β_slow = 1 (L = rope_original_length, the
//           training length), and the attention temperature √(1/t) = 0.1 ln s + 1 on q and k.
enum class RopeScalingKind { None, Linear, Ntk, Yarn };
inline constexpr NameTable<RopeScalingKind, 4> kRopeScalingNames{{{RopeScalingKind::None, "none"},
                                                                  {RopeScalingKind::Linear, "linear"},
                                                                  {RopeScalingKind::Ntk, "ntk"},
                                                                  {RopeScalingKind::Yarn, "yarn"}}};
struct RotaryScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  double factor = 1.0;           // s ≥ 1: the new length over the trained one
  int64_t original_length = 0;   // yarn: the trained context L (> 0)
};
// The timescales (D/2: pair k turns by p / timescale_k) and the factor on cos and sin (YaRN's
// temperature; 1 otherwise) of RoPE with `base` under `scaling`. HF's definitions: tests/test_rotary_variants.cpp.
struct RotaryFrequencies {
  std::vector<double> timescale;
  double mscale = 1.0;
};
RotaryFrequencies rotary_frequencies(int64_t head_dim, double base, const RotaryScaling& scaling);

class RoPE : public PositionalScheme {
 public:
  // Which dims form a rotated pair; the two are equivalent up to a fixed permutation of W_q and W_k
  // rows, but checkpoints are not interchangeable, so the choice is explicit.
  enum class Pairing {
    Interleaved,  // (2k, 2k+1): RoFormer, GPT-J, Meta's LLaMA
    HalfSplit,    // (k, k + D/2): GPT-NeoX, HF LLaMA's rotate_half
  };
  explicit RoPE(int64_t head_dim, double base = 10000.0, Pairing pairing = Pairing::Interleaved,
                RotaryScaling scaling = {});
  std::string name() const override { return "rope"; }
  // An even head size, base > 1, and the scaling knobs (shared by xpos and p_rope).
  static std::string check(const SchemeCheck& c);
  Tensor content_query(const Tensor& q, const AttentionGeometry& g) const override;  // q rotated at π(i)
  Tensor content_key(const Tensor& k, const Tensor& key_positions) const override;   // k rotated at j
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // Measured, content included: the mean over visible (query, key) pairs at offset δ (non-padding,
  // unmasked) of the scaled logit R(π(i))q_i · R(j)k_j / √D; NaN where the batch has no such pair.
  // RoPE has no position-only term to read off.
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // x (..., T, D) rotated at positions int64 (T) → (..., T, D); `key`: the key side (xPos's 1/a).
  Tensor rotate(const Tensor& x, const Tensor& positions, bool key = false) const;

  int64_t head_dim;
  double base;
  Pairing pairing;
  RotaryScaling scaling;
  int64_t rotated_pairs;         // p-RoPE: the pairs k < rotated_pairs turn (the highest frequencies); D/2 here
  double xpos_scale_base = 0;    // xPos: γ of ζ_k^(p/γ); 0 = no amplitude (RoPE, p-RoPE)
  RotaryFrequencies frequencies; // rotary_frequencies(head_dim, base, scaling), p-RoPE's dropped pairs ∞
  // Undefined (the default), or int64 (n): index p → position position_map[p], for every p < n used.
  Tensor position_map;
  bool set_position_map(const Tensor& map) override {
    position_map = map;
    return true;
  }
  // rotate's (cos, sin) tables (T, D/2) on x's device, by positions, side, settings and dtype: the
  // queries' and keys' positions of a few lengths (randomised positions miss: a fresh draw each time).
  mutable LruCache<CacheKey, std::pair<Tensor, Tensor>> rotary_tables{16};

 protected:
  // Recomputes `frequencies` after a subclass changed rotated_pairs (p-RoPE).
  void set_rotated_pairs(int64_t pairs);

 private:
  Tensor mapped(const Tensor& positions) const;  // positions, or their images under position_map
};

// The scaling knobs' problems by config key (model.<place>.rope_scaling*), "" = none: the part of
// RoPE::check that xpos and p_rope share.
std::string check_scaling(const SchemeCheck& c);

// The measured response of a content-pair scheme (RoPE::response's definition), for any scheme whose
// positions act through content_query / content_key alone (the rotary family, PoPE).
std::vector<std::vector<double>> measured_content_response(const PositionalScheme& scheme, const ResponseInput& in,
                                                           int64_t reach);

}  // namespace relgrad
