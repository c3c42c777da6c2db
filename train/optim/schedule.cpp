// LrSchedule: the formulas are in schedule.h; this file only evaluates and validates them.
#include "train/optim/schedule.h"

#include <cmath>

#include "core/base/error.h"

namespace relgrad {

namespace {
void check(const LrSchedule& s) {
  RG_CHECK(s.max_lr >= 0, "LrSchedule", "invalid max_lr ", s.max_lr, " (must be >= 0)");
  RG_CHECK(s.min_lr >= 0 && s.min_lr <= s.max_lr, "LrSchedule", "invalid min_lr ", s.min_lr,
           " (must be in [0, max_lr = ", s.max_lr, "])");
  RG_CHECK(s.warmup_steps >= 0 && s.warmup_steps <= s.total_steps, "LrSchedule", "need 0 <= warmup_steps <= ",
           "total_steps, got warmup_steps ", s.warmup_steps, ", total_steps ", s.total_steps);
}
}  // namespace

LrSchedule::LrSchedule(double max_lr_, int64_t warmup_steps_, int64_t total_steps_, double min_lr_, Decay decay_)
    : max_lr(max_lr_), warmup_steps(warmup_steps_), total_steps(total_steps_), min_lr(min_lr_), decay(decay_) {
  check(*this);
}

double LrSchedule::lr_at(int64_t step) const {
  check(*this);  // the fields are public and may have been changed since construction
  RG_CHECK(step >= 0, "LrSchedule", "step must be >= 0, got ", step);
  if (step < warmup_steps) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == Decay::Constant) return max_lr;
  if (step >= total_steps) return min_lr;
  double r = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  if (decay == Decay::Linear) return max_lr - r * (max_lr - min_lr);
  const double pi = std::acos(-1.0);
  return min_lr + 0.5 * (1.0 + std::cos(pi * r)) * (max_lr - min_lr);
}

LrSchedule::Decay lr_decay(const std::string& name) {
  const std::optional<LrSchedule::Decay> decay = kDecayNames.find(name);
  RG_CHECK(decay.has_value(), "LrSchedule", "optim.decay: expected one of ", kDecayNames.list(), ", got '", name, "'");
  return *decay;
}

const char* lr_decay_name(LrSchedule::Decay decay) { return kDecayNames.name(decay); }

}  // namespace relgrad
