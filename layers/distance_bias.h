// The distance-bias family: schemes whose only term is a per-head bias b_h(δ) of the relative position
// δ = j − π(i) alone, added to the logits after the 1/√D scaling (PositionalScheme::logit_bias):
//   Kerple:      −r1·log(1 + r2·|δ|) or −r1·|δ|^r2, r1, r2 > 0 learned per head (Chi et al. 2022);
//   Sandwich:    the inner product of two sinusoidal embeddings, parameter-free (Chi et al. 2023);
//   DynamicBias: an MLP of the (optionally log-) distance → H biases (x-transformers' DynamicPositionBias).
// Each writes its rule once, as bias_table: the (H, W) biases of W consecutive distances built with
// differentiable ops. The composite path gathers that table into (1, H, t2, t1) and the fused core
// looks it up per distance (its bias_table / bias_rows), so the gradient of the parameters reaches
// them through either core. docs/relative-attention.md has the equations and where each may serve.
#pragma once
#include <memory>
#include <vector>

#include "layers/linear.h"
#include "layers/positional.h"

namespace relgrad {

struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;

class DistanceBias : public PositionalScheme {
 public:
  explicit DistanceBias(int64_t num_heads);
  Tensor logit_bias(const AttentionGeometry& g) const override;  // (1, H, t2, t1), added after 1/√D
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // b_h(δ) at δ = −reach … reach: the table itself (what it adds at each distance).
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  // b_h(δ) for δ = first … first + width − 1: (H, width) in the scheme's dtype and on its device,
  // differentiable in its parameters. The one place a scheme's rule is written.
  virtual Tensor bias_table(int64_t first, int64_t width) const = 0;

  int64_t num_heads;

 protected:
  // A tensor of the scheme (parameter or buffer) whose dtype and device the bias takes.
  virtual const Tensor& anchor() const = 0;
  // The distances first … first + width − 1 as a (1, width) constant of the anchor's dtype and device,
  // mapped by `f` (|δ|, log |δ|, …; `tag` names f in the cache key).
  Tensor distances(int64_t first, int64_t width, int64_t tag, double (*f)(int64_t)) const;

 private:
  struct Map {
    Tensor index;  // int64 (t2, t1): δ(i, j) − first
    int64_t first = 0, width = 0;
  };
  mutable LruCache<CacheKey, Map> maps_{8};              // by geometry (logit_bias)
  mutable LruCache<CacheKey, Tensor> distance_tables_{16};  // by range, f, dtype and device
};

// KERPLE's two kernels (Chi et al. 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
// Extrapolation", its logarithmic and power variants; the released code's initialisation and projection).
enum class KerpleVariant { Log, Power };
inline constexpr NameTable<KerpleVariant, 2> kKerpleVariantNames{
    {{KerpleVariant::Log, "log"}, {KerpleVariant::Power, "power"}}};

class Kerple : public DistanceBias {
 public:
  // log:   b_h(δ) = −r1_h · log(1 + r2_h·|δ|),  r1 ~ 2·U(0, 1), r2 ~ U(0, 1);
  // power: b_h(δ) = −r1_h · |δ|^r2_h,           r1 ~ U(0, 1),   r2 ~ 2·U(0, 1) (r2 ∈ (0, 2]: a CPD kernel).
  // The paper's code projects r1, r2 onto [ε, ∞) (r2 of power onto [ε, 2]), ε = 0.01, before each use;
  // here the forward uses the projected values with the raw parameters' gradient (straight through),
  // so a parameter stepped past a bound acts at the bound and keeps learning, as the projected one does.
  Kerple(int64_t num_heads, KerpleVariant variant = KerpleVariant::Log, Generator* init_generator = nullptr);
  std::string name() const override { return "kerple"; }
  Tensor bias_table(int64_t first, int64_t width) const override;
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // 2·H

  static constexpr double kEps = 1e-2;
  KerpleVariant variant;
  Tensor r1, r2;  // (H) each

 protected:
  const Tensor& anchor() const override { return r1; }
};

// Sandwich (Chi et al. 2023, "Dissecting Transformer Length Extrapolation via the Lens of Receptive
// Field Analysis", the formula as NeMo's implementation by the same authors writes it): the inner product of the
// sinusoidal embeddings of two positions, minus its value at δ = 0, compressed per head:
//   b_h(δ) = (Σ_{k=1}^{d'/2} cos(δ / 10000^{2k/d'}) − d'/2) / (8h/H),   h = 1 … H.
// Even in δ, ≤ 0, and 0 at δ = 0. No parameters; the ratios 8h/H are a buffer (like ALiBi's slopes).
class Sandwich : public DistanceBias {
 public:
  Sandwich(int64_t num_heads, int64_t dim = 128);
  std::string name() const override { return "sandwich"; }
  Tensor bias_table(int64_t first, int64_t width) const override;
  static std::string check(const SchemeCheck& c);  // sandwich_dim even and positive

  int64_t dim;    // d'
  Tensor ratios;  // buffer (H): 8h/H

 protected:
  const Tensor& anchor() const override { return ratios; }

 private:
  mutable LruCache<CacheKey, Tensor> sums_{8};  // (1, W): the inner products minus d'/2, by range
};

// Linears as children "0", "1", … of one module (PyTorch's ModuleList names: mlp.0.weight).
class LinearList : public Module {
 public:
  std::shared_ptr<Linear> add(std::shared_ptr<Linear> layer) {
    layers.push_back(register_module(std::to_string(layers.size()), std::move(layer)));
    return layers.back();
  }
  std::vector<std::shared_ptr<Linear>> layers;
};

// x-transformers' DynamicPositionBias: an MLP from the distance to H biases,
//   x = i − j = −δ (optionally sign(x)·log(|x| + 1)),
//   b(δ) = W_out · silu(W_{depth−1} · … silu(W_0·x + c_0) …) + c_out  ∈ R^H,
// Linear(1, width), SiLU, depth − 1 × (Linear(width, width), SiLU), Linear(width, H); width = d_model/4
// as x-transformers (its LayerNorm option is left out). nn.Linear's initialisation.
class DynamicBias : public DistanceBias {
 public:
  DynamicBias(int64_t num_heads, int64_t width, int64_t depth = 2, bool log_distance = false,
              Generator* init_generator = nullptr);
  std::string name() const override { return "dynamic_bias"; }
  Tensor bias_table(int64_t first, int64_t width) const override;
  static std::string check(const SchemeCheck& c);  // depth ≥ 1, d_model ≥ 4
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);

  int64_t width, depth;
  bool log_distance;
  std::vector<std::shared_ptr<Linear>> mlp;  // "mlp.0" … "mlp.<depth>": depth hidden layers, then the output

 protected:
  const Tensor& anchor() const override { return mlp.front()->weight; }
};

}  // namespace relgrad
