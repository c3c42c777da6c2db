// The rotary family beyond RoPE (layers/rotary.h): content-pair schemes, no score or bias term.
//   XPos  (Sun et al. 2023, "A Length-Extrapolatable Transformer", arXiv 2212.10554, eq. 9–10, §3.1):
//         RoPE whose pair k is scaled by ζ_k^(p/γ) on the query at p = π(i) and ζ_k^(−p/γ) on the key at
//         p = j, ζ_k = (2k/D + 0.4) / 1.4, γ = xpos_scale_base (512 as the paper's code). The product
//         carries ζ_k^((π(i) − j)/γ) = ζ_k^(−δ/γ): a decay with distance into the past, a growth into
//         the future, so it serves causal self-attention only (causal_only; x-transformers refuses
//         it elsewhere too). Absolute positions, uncentred: keys cached in content form stay valid.
//   PRoPE (Barbero et al., ICLR 2025, "Round and Round We Go!", arXiv 2410.06205, §6 and its code):
//         RoPE with only the highest ⌊p·D/2⌋ frequencies rotating (timescales base^(2k/D) for
//         k < ⌊p·D/2⌋); the lowest get timescale ∞ and stay unrotated (p = rope_fraction, 0.75).
//   PoPE  (Gopalakrishnan et al. 2025, "Decoupling the What and Where With Polar Coordinate Positional
//         Embeddings", arXiv 2509.10534, eq. 4–6): every head dim c = 0 … D−1 is a magnitude
//         μ = softplus(x_c) turning at its own frequency θ_c = base^(−c/D); queries at phase π(i)·θ_c,
//         keys at j·θ_c + φ_{h,c} with a learned offset φ (H, D), zero at init, clamped to [−2π, 0]:
//         q' = (μ_q cos, μ_q sin) interleaved, (…, 2D), likewise k', so q'·k' = Σ_c μ_q μ_k cos(θ_c(π(i) −
//         j) − φ_{h,c}). Scaled by 1/√D. Content (magnitudes) and position (phases) do not mix.
//         Not fused: the content pair is 2D wide and the fused core wants q, k, v of one width.
// XPos and PRoPE take the RoPE scalings (RotaryScaling); PoPE has its own frequencies and none.
#pragma once
#include "layers/rotary.h"

namespace relgrad {

class XPos : public RoPE {
 public:
  XPos(int64_t head_dim, double base = 10000.0, double scale_base = 512.0, RotaryScaling scaling = {});
  std::string name() const override { return "xpos"; }
  static std::string check(const SchemeCheck& c);  // RoPE's, and xpos_scale_base > 0
};

class PRoPE : public RoPE {
 public:
  PRoPE(int64_t head_dim, double base = 10000.0, double fraction = 0.75, RotaryScaling scaling = {});
  std::string name() const override { return "p_rope"; }
  static std::string check(const SchemeCheck& c);  // RoPE's, and 0 ≤ rope_fraction ≤ 1
  // The pairs that rotate: ⌊p·D/2⌋, as the paper's int(p · D // 2).
  static int64_t rotated_pairs_for(double fraction, int64_t head_dim);
  double fraction;
};

class PoPE : public PositionalScheme {
 public:
  PoPE(int64_t num_heads, int64_t head_dim, double base = 10000.0);
  std::string name() const override { return "pope"; }
  static std::string check(const SchemeCheck& c);  // base > 1
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // H·D
  Tensor content_query(const Tensor& q, const AttentionGeometry& g) const override;  // (B,H,t2,D) → (B,H,t2,2D)
  Tensor content_key(const Tensor& k, const Tensor& key_positions) const override;   // (B,H,t,D) → (B,H,t,2D)
  // The fused core needs q, k and v of one width; PoPE's content pair is twice the values' width.
  bool fuse(FusedCall&, const AttentionGeometry&) const override { return false; }
  // Measured, like RoPE's: the mean scaled content logit at each δ.
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // The phases p·θ_c, (T, D) on `like`'s device and dtype, for positions int64 (T).
  Tensor phases(const Tensor& positions, const Tensor& like) const;
  // μ (…, T, D) at phases (…, T, D) → (…, T, 2D): (μ cos, μ sin) interleaved per dim.
  static Tensor polar(const Tensor& magnitude, const Tensor& phase);

  int64_t num_heads, head_dim;
  double base;
  Tensor phase_offset;  // (H, D): φ, learned; used clamped to [−2π, 0]
  mutable LruCache<CacheKey, Tensor> phase_tables{16};
};

}  // namespace relgrad
