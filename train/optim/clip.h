// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2).
#pragma once
#include "core/tensor.h"

namespace relgrad {

// total = sqrt(sum over params with a .grad of sum(grad²)), accumulated in float64 whatever the
// grads' dtype. When scale = max_norm / (total + 1e-6) is < 1, every grad is multiplied by it in
// place. Returns total (before clipping); params without a .grad are skipped, none at all gives 0.
//
// A non-finite total (inf/NaN gradients) is returned, not thrown, and the grads are left untouched
// (torch would multiply them by NaN): the caller checks std::isfinite(total) and skips the step.
// Throws "[clip_grad_norm_] ..." for max_norm < 0 or NaN.
double clip_grad_norm_(const TensorList& params, double max_norm);

}  // namespace relgrad
