// train.profile = N (docs/cli.md): the op-level profile (autograd/profiler.h) of N training steps.
// The first step a Trainer runs is the warm-up and is never profiled: it pays for first uses (the
// allocator's growth, cuBLAS's loading and plans, the thread policy's first trial); steps 2 to N + 1
// of the process are profiled (after a resume from step S: steps S + 2 to S + N + 1 of the run).
// Once they are done (or the run ends earlier) the table is printed and written as profile.json in
// train.out_dir, atomically.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

#include "autograd/profiler.h"

namespace relgrad {

class StepProfile {
 public:
  StepProfile(int64_t steps, Device device) : steps_(steps), profiler_(device) {}

  // Around one training step; `step` is the 1-based number of the step about to run. A step that
  // throws must call cancel() instead of end().
  void begin(int64_t step);
  void end();
  void cancel();
  // N steps profiled, or (at_end) at least one: prints the table to `out` (may be null) and, when
  // `write`, writes out_dir/profile.json. Once; returns whether it did.
  bool finish(const std::string& out_dir, std::ostream* out, bool write, bool at_end);

 private:
  int64_t steps_;          // to profile
  int64_t seen_ = 0;       // steps begun, the warm-up included
  int64_t profiled_ = 0;   // steps profiled
  int64_t first_step_ = 0;
  bool open_ = false, finished_ = false;
  Profiler profiler_;
};

}  // namespace relgrad
