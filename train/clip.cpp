#include "train/clip.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"

namespace relgrad {

double clip_grad_norm_(const TensorList& params, double max_norm) {
  RG_CHECK(max_norm >= 0, "clip_grad_norm_", "invalid max_norm ", max_norm, " (must be >= 0)");
  NoGradGuard no_grad;
  double sum_sq = 0.0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    // float64 per tensor and across tensors: float32 grads of a big model would lose digits otherwise.
    Tensor g64 = g.to(kFloat64);
    sum_sq += sum(mul(g64, g64)).item();  // (), one device → host copy per parameter
  }
  double total = std::sqrt(sum_sq);
  if (!std::isfinite(total)) return total;
  double scale = max_norm / (total + 1e-6);
  if (scale < 1.0) {
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined()) g.mul_(scale);
    }
  }
  return total;
}

}  // namespace relgrad
