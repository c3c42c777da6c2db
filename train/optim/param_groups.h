// The optimizer's parameter groups of a run: decay_groups (train/optim/optim.h), with the positional
// schemes' tables moved into groups of their own that train at a multiple of the learning rate
// (optim.positional_lr_scale, as PyTorch's per-group lr in param_groups):
//
//   ScaledGroups g = scaled_positional_groups(model.named_parameters(), lr, weight_decay, 10.0);
//   AdamW opt(g.groups, AdamWOptions(lr));
//   for (step...) { set_scheduled_lr(opt, schedule.lr_at(step), g.lr_scale); ... opt.step(); }
//
// Why: T5's bias is in raw logit units and Adam moves each entry by about lr per step, so the ≈ 5-nat
// margin that puts 0.9 of a head on one offset takes thousands of steps at lr 3e-3; the verification
// experiments (train/instruments/experiments_internal.h, ModelSize::positional_lr_scale) give the tables 10×
// lr.
//
// Which parameters: those of the relative positional schemes, i.e. whose name contains ".positional."
// (MultiheadAttention registers its scheme as "positional": T5's bias table, the learned tables of seed,
// huang and Shaw, Transformer-XL's). The absolute position embedding (pos_embed, model.absolute_position
// = "learned") is not among them: it is an embedding like the token embedding, added to the input, and
// keeps the model's lr.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "train/optim/optim.h"

namespace relgrad {

// True for a parameter of a relative positional scheme (its name contains ".positional.").
bool is_positional_parameter(const std::string& name);

struct ScaledGroups {
  std::vector<ParamGroup> groups;  // each group's lr is lr × lr_scale[g]
  std::vector<double> lr_scale;    // one per group
};

// positional_lr_scale == 1: decay_groups unchanged (two groups, the layout of every checkpoint so far).
// Otherwise four groups: 0 decay and 1 no decay (decay_groups' rule) without the positional parameters,
// then 2 positional decay and 3 positional no decay (the same rule, at lr × positional_lr_scale). The
// positional groups are kept when empty (a model without a relative scheme), so group indices, and the
// checkpoint's optimizer state names, depend on the scale only. positional_lr_scale must be > 0.
ScaledGroups scaled_positional_groups(const std::vector<std::pair<std::string, Tensor>>& named, double lr,
                                      double weight_decay, double positional_lr_scale);

// What a schedule does each step with scaled groups: group g's lr = lr × lr_scale[g] (every group at
// lr when lr_scale is empty, Optimizer::set_lr).
void set_scheduled_lr(Optimizer& optimizer, double lr, const std::vector<double>& lr_scale);

}  // namespace relgrad
