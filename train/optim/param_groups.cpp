// Positional parameter groups at a multiple of the learning rate (train/optim/param_groups.h).
#include "train/optim/param_groups.h"

#include <cmath>

#include "core/base/error.h"

namespace relgrad {

bool is_positional_parameter(const std::string& name) {
  return name.find(".positional.") != std::string::npos;
}

ScaledGroups scaled_positional_groups(const std::vector<std::pair<std::string, Tensor>>& named, double lr,
                                      double weight_decay, double positional_lr_scale) {
  RG_CHECK(std::isfinite(positional_lr_scale) && positional_lr_scale > 0, "optim",
           "optim.positional_lr_scale must be a positive number, got ", positional_lr_scale);
  ScaledGroups out;
  if (positional_lr_scale == 1.0) {
    out.groups = decay_groups(named, lr, weight_decay);
    out.lr_scale.assign(out.groups.size(), 1.0);
    return out;
  }
  std::vector<std::pair<std::string, Tensor>> plain, positional;
  for (const auto& entry : named)
    (is_positional_parameter(entry.first) ? positional : plain).push_back(entry);
  out.groups = decay_groups(plain, lr, weight_decay);
  for (ParamGroup& g : decay_groups(positional, lr * positional_lr_scale, weight_decay))
    out.groups.push_back(g);
  out.lr_scale = {1.0, 1.0, positional_lr_scale, positional_lr_scale};
  return out;
}

void set_scheduled_lr(Optimizer& optimizer, double lr, const std::vector<double>& lr_scale) {
  std::vector<ParamGroup>& groups = optimizer.param_groups();
  if (lr_scale.empty()) return optimizer.set_lr(lr);
  RG_CHECK(lr_scale.size() == groups.size(), "optim", "set_scheduled_lr: ", lr_scale.size(), " scales for ",
           groups.size(), " parameter groups");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = lr * lr_scale[g];
}

}  // namespace relgrad
