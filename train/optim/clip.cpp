#include "train/optim/clip.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/profiler.h"
#include "core/base/error.h"

namespace relgrad {

double clip_grad_norm_(const TensorList& params, double max_norm) {
  RG_PROFILE_OP("clip_grad_norm_");
  RG_CHECK(max_norm >= 0, "clip_grad_norm_", "invalid max_norm ", max_norm, " (must be >= 0)");
  NoGradGuard no_grad;
  double sum_sq = 0.0;
  // GPU gradients: the per-tensor sums are added up on the device, in the same order as on the
  // host (a chain of float64 adds, so the same value), and read back once per device, not once per
  // parameter (each read waits for the queue to drain).
  Tensor partial;
  auto flush = [&] {
    if (partial.defined()) sum_sq += partial.item();
    partial = Tensor();
  };
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    // float64 per tensor and across tensors: float32 grads of a big model would lose digits otherwise.
    Tensor g64 = g.to(kFloat64);
    Tensor s = sum(mul(g64, g64));  // ()
    if (g.device().is_cpu()) {
      sum_sq += s.item();
      continue;
    }
    if (partial.defined() && partial.device() != g.device()) flush();
    partial = partial.defined() ? add(partial, s) : s;
  }
  flush();
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
