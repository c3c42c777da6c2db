// LayerNorm and RMSNorm over the last dims given by normalized_shape, as nn.LayerNorm / nn.RMSNorm.
// Both are thin wrappers over the fused ops (autograd/ops.h); the layer owns the affine parameters.
//   x (..., *normalized_shape) → y of the same shape
#pragma once
#include <string>

#include "core/base/name_table.h"
#include "layers/module.h"

namespace relgrad {

// The norm layer a block uses (BlockOptions::norm, layers/blocks.h; model.norm).
enum class NormKind { LayerNorm, RMSNorm };
inline constexpr NameTable<NormKind, 2> kNormNames{{{NormKind::LayerNorm, "layer_norm"}, {NormKind::RMSNorm, "rms_norm"}}};
// "layer_norm" or "rms_norm" → the kind; else "[op] unknown norm '<name>' (expected layer_norm or rms_norm)".
inline NormKind norm_from_name(const std::string& name, const char* op) { return kNormNames.parse(name, op, "norm"); }

// What a block needs of its norm layer, whichever kind BlockOptions::norm picks (layers/blocks.h).
class Norm : public Module {
 public:
  virtual Tensor forward(const Tensor& x) const = 0;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  Tensor weight;  // normalized_shape, or undefined without elementwise_affine
};

// y = (x − mean) / sqrt(var + eps) · weight + bias, var biased (÷ N) as PyTorch.
// weight starts at ones, bias at zeros, so a fresh layer is a plain normalisation.
class LayerNorm : public Norm {
 public:
  LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  LayerNorm(int64_t normalized_size, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : LayerNorm(Shape{normalized_size}, eps, elementwise_affine, bias) {}
  Tensor forward(const Tensor& x) const override;

  Tensor bias;    // normalized_shape, or undefined
  Shape normalized_shape;
  double eps;
};

// y = x / sqrt(mean(x²) + eps) · weight; eps = −1 uses the machine epsilon of x's dtype (PyTorch's
// eps=None). weight starts at ones.
class RMSNorm : public Norm {
 public:
  RMSNorm(Shape normalized_shape, double eps = -1, bool elementwise_affine = true);
  RMSNorm(int64_t normalized_size, double eps = -1, bool elementwise_affine = true)
      : RMSNorm(Shape{normalized_size}, eps, elementwise_affine) {}
  Tensor forward(const Tensor& x) const override;

  Shape normalized_shape;
  double eps;
};

}  // namespace relgrad
