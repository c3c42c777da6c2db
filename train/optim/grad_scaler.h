// Dynamic loss scaling for float16 training, as torch.amp.GradScaler. float16's smallest normal is
// 2^-14 and its largest 65504: small gradients fed to float16 products (autograd/autocast.h) would
// flush to zero, so the loss is multiplied by `scale` before backward and the gradients divided by it
// before clipping and the update. A step whose gradients came out inf/NaN (the scale was too large)
// is skipped and the scale halved; after growth_interval finite steps in a row it doubles.
//
//   scaler.scale(loss).backward();
//   scaler.unscale_(params);            // grads /= scale, notes whether any is inf/NaN
//   clip_grad_norm_(params, max_norm);  // on the true gradients
//   if (!scaler.found_inf()) optimizer.step();
//   scaler.update();                    // backoff or growth
//
// The scales are powers of two (with the default factors), so scaling and unscaling are exact.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace relgrad {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, PyTorch's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});  // throws for factors or interval out of range

  Tensor scale(const Tensor& loss) const;  // loss · scale, differentiable
  // Divides every parameter's .grad by the scale in place (no grad mode) and records whether any value
  // is inf or NaN. Parameters without a .grad are skipped.
  void unscale_(const TensorList& params);
  bool found_inf() const { return found_inf_; }
  // After the step: found_inf → scale · backoff_factor and the count of finite steps restarts; else
  // the count grows, and at growth_interval the scale is multiplied by growth_factor.
  void update();

  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }  // finite steps since the last change
  // A checkpoint's state (scale > 0 and finite, 0 <= tracker < growth_interval, else an error).
  void load_state(double scale, int64_t growth_tracker);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool found_inf_ = false;
};

}  // namespace relgrad
