// torch.amp.GradScaler's arithmetic (train/optim/grad_scaler.h).
#include "train/optim/grad_scaler.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"

namespace relgrad {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  const GradScalerOptions& o = options_;
  RG_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0, "GradScaler", "init_scale must be positive, got ",
           o.init_scale);
  RG_CHECK(std::isfinite(o.growth_factor) && o.growth_factor > 1, "GradScaler", "growth_factor must be > 1, got ",
           o.growth_factor);
  RG_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler", "backoff_factor must be in (0, 1), got ",
           o.backoff_factor);
  RG_CHECK(o.growth_interval > 0, "GradScaler", "growth_interval must be positive, got ", o.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const { return mul(loss, scale_); }

void GradScaler::unscale_(const TensorList& params) {
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  double probe = 0.0;  // Σ sum(g · 0): 0 exactly when every value is finite (inf · 0, NaN · 0 are NaN)
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    probe += sum(mul(g, 0.0)).item();
  }
  found_inf_ = !(probe == 0.0);
}

void GradScaler::update() {
  if (found_inf_) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    const double grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;  // as PyTorch: a scale that would overflow stays
    growth_tracker_ = 0;
  }
  found_inf_ = false;
}

void GradScaler::load_state(double scale, int64_t growth_tracker) {
  RG_CHECK(std::isfinite(scale) && scale > 0, "GradScaler", "the saved scale must be positive, got ", scale);
  RG_CHECK(growth_tracker >= 0 && growth_tracker < options_.growth_interval, "GradScaler",
           "the saved growth tracker ", growth_tracker, " is outside [0, ", options_.growth_interval, ")");
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  found_inf_ = false;
}

}  // namespace relgrad
