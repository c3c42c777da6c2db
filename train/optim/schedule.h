// Learning-rate schedules, llm.c / nanoGPT style: a linear warmup, then a decay to min_lr.
//
//   step < warmup_steps:               lr = max_lr * (step + 1) / warmup_steps
//   warmup_steps <= step <= total:     r  = (step - warmup_steps) / (total_steps - warmup_steps)
//       Cosine:                        lr = min_lr + 0.5 * (1 + cos(pi * r)) * (max_lr - min_lr)
//       Linear:                        lr = max_lr - r * (max_lr - min_lr)
//       Constant:                      lr = max_lr
//   step > total_steps:                lr = min_lr  (Constant: max_lr)
//
// Steps count from 0. Warmup uses step + 1 (as llm.c) so the first update is not wasted at lr 0 and
// step warmup_steps - 1 reaches max_lr. When total_steps == warmup_steps there is no decay phase:
// every step from warmup_steps on gets the final value.
//
//   LrSchedule sched(6e-4, /*warmup_steps=*/700, /*total_steps=*/19073, /*min_lr=*/6e-5);
//   optimizer.set_lr(sched.lr_at(step));
#pragma once
#include <cstdint>
#include <string>

#include "core/base/name_table.h"

namespace relgrad {

struct LrSchedule {
  enum class Decay { Cosine, Linear, Constant };

  double max_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // the step at which decay reaches min_lr
  double min_lr = 0.0;
  Decay decay = Decay::Cosine;

  LrSchedule() = default;
  // Checks 0 <= min_lr <= max_lr and 0 <= warmup_steps <= total_steps ("[LrSchedule] ...").
  LrSchedule(double max_lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0,
             Decay decay = Decay::Cosine);

  double lr_at(int64_t step) const;  // step >= 0
};

// "cosine", "linear" or "constant" (optim.decay, train/trainer/options.h) → the decay; throws
// relgrad::Error "[LrSchedule] optim.decay: expected one of ..." otherwise. The one place a name
// becomes a decay.
LrSchedule::Decay lr_decay(const std::string& name);
inline constexpr NameTable<LrSchedule::Decay, 3> kDecayNames{
    {{LrSchedule::Decay::Cosine, "cosine"}, {LrSchedule::Decay::Linear, "linear"}, {LrSchedule::Decay::Constant, "constant"}}};
const char* lr_decay_name(LrSchedule::Decay decay);

}  // namespace relgrad
