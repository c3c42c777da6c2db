// FIRE (Li et al., ICLR 2024, "Functional Interpolation for Relative Positions Improves Long Context
// Transformers", arXiv 2310.04418): a per-head bias added to the logits after the 1/√D scaling
// (PositionalScheme::logit_bias), an MLP of the log distance normalised by the log of the query's
// position (the paper's FIRE bias with its transform ψ and threshold L, as its appendix's listing):
//   b(i, j) = f_θ( ψ(|i − j|) / (ψ(max(π(i), L)) + ε) ) ∈ R^H,   ψ(x) = log(|c|·x + 1),
//   L = |L_multiplier · L0|,   f_θ = Linear(1, width) → ReLU → Linear(width, H),
// with c (init 0.1) and L_multiplier (init 1.0) learned, L0 fixed (fire_threshold, 512), ε = 1e-6.
// In relgrad's conventions i − j = −δ and i is the query's place π(i) on the key axis, so the same
// formula serves bidirectional and cross-attention (|δ| makes it even in δ; a causal mask leaves the
// paper's i − j ≥ 0). Unlike the distance-bias family (layers/distance_bias.h) the bias depends on
// π(i) through the normaliser, not on δ alone: the fused core's per-distance table carries it only
// when every query of a call has π(i) < L (then the normaliser is one number), which fuse() checks per
// call; otherwise the composite core runs. docs/relative-attention.md has the equation and the choices.
// Randomised positions (Ruoss et al. 2023, as Zhou et al. 2024 combine them with FIRE): while
// position_map is defined, index p stands at position position_map[p] for both sides, so the bias is
// f_θ(ψ(|map[j] − map[π(i)]|) / ψ(max(map[π(i)], L))); DecoderLM sets the map during forward_at
// (layers/models.h, TransformerConfig::random_positions_max) and the composite core serves it.
#pragma once
#include <memory>
#include <vector>

#include "layers/linear.h"
#include "layers/positional.h"

namespace relgrad {

struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

// The paper's nn.Sequential(Linear(1, width), ReLU, Linear(width, H)): its Linears under PyTorch's
// names "0" and "2", so a checkpoint reads mlp.0.weight … mlp.2.bias as the paper's module does.
class FireMlp : public Module {
 public:
  FireMlp(int64_t width, int64_t heads, Generator* init);
  Tensor forward(const Tensor& x) const;  // (N, 1) → (N, H)
  std::shared_ptr<Linear> in, out;
};

class FIRE : public PositionalScheme {
 public:
  FIRE(int64_t num_heads, int64_t width = 32, int64_t threshold = 512, Generator* init_generator = nullptr);
  std::string name() const override { return "fire"; }
  Tensor logit_bias(const AttentionGeometry& g) const override;  // (1, H, t2, t1), added after 1/√D
  // The per-distance table when every π(i) < L (one normaliser ψ(L) + ε for the call), else false.
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // f_θ(ψ(|δ|)/N̄) at δ = −reach … reach, N̄ the mean normaliser ψ(max(π(i), L)) + ε of the batch's
  // non-padding queries (of every query when none is marked; ψ(L) + ε without any positions).
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;
  static std::string check(const SchemeCheck& c);  // fire_width, fire_threshold ≥ 1
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);

  // The bias for distances |δ| (R, W) and query positions π (R, 1), constants of the parameters'
  // dtype and device: (H, R, W), differentiable in every parameter. The one place the rule is written.
  Tensor bias(const Tensor& abs_distance, const Tensor& query_position) const;
  // L = |L_multiplier·L0| as a (1) tensor (differentiable).
  Tensor threshold_length() const;

  // Undefined (the default), or int64 (n): index p → position position_map[p], for every key index and
  // every π(i) of a call (each must be < n). The bias then depends on the pair, not on δ alone: no
  // fused core, no cached tables.
  Tensor position_map;
  bool set_position_map(const Tensor& map) override {
    position_map = map;
    return true;
  }

  static constexpr double kInitC = 0.1, kInitMultiplier = 1.0, kEps = 1e-6;
  int64_t num_heads, width, threshold;  // H, the MLP's width, L0
  std::shared_ptr<FireMlp> mlp;         // "mlp.0", "mlp.2"
  Tensor c, L_multiplier;               // (1) each: "c", "L_multiplier"

 private:
  struct Map {
    Tensor distance;  // (t2, t1): |δ(i, j)|
    Tensor position;  // (t2, 1): π(i)
  };
  Map pair_map(const AttentionGeometry& g) const;  // |δ| and π(i) of every pair, through position_map
  mutable LruCache<CacheKey, Map> maps_{8};    // by geometry, dtype and device (logit_bias)
  mutable LruCache<CacheKey, Map> tables_{8};  // by distance range and top π(i) (fuse): (1, W), (1, 1)
};

}  // namespace relgrad
