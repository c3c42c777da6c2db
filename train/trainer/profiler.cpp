// train.profile (train/trainer/profiler.h): which steps are profiled, and where the table goes.
#include "train/trainer/profiler.h"

#include <ostream>

#include "core/file_io.h"

namespace relgrad {

void StepProfile::begin(int64_t step) {
  ++seen_;
  if (seen_ == 1 || profiled_ >= steps_) return;  // the warm-up, or done
  if (profiled_ == 0) first_step_ = step;
  profiler_.begin_step();
  open_ = true;
}

void StepProfile::end() {
  if (!open_) return;
  open_ = false;
  profiler_.end_step();
  ++profiled_;
}

void StepProfile::cancel() {
  if (!open_) return;
  open_ = false;
  profiler_.cancel_step();
}

bool StepProfile::finish(const std::string& out_dir, std::ostream* out, bool write, bool at_end) {
  if (finished_ || profiled_ == 0 || (profiled_ < steps_ && !at_end)) return false;
  finished_ = true;
  ProfileReport report = profiler_.report();
  report.first_step = first_step_;
  const std::string path = out_dir + "/profile.json";
  if (write) write_file_atomic(path, report.json(), "train");
  if (out) {
    *out << report.table();
    if (profiled_ < steps_)
      *out << "(the run ended after " << profiled_ << " of the " << steps_ << " steps of train.profile)\n";
    if (write) *out << "profile written to " << path << "\n";
    out->flush();
  }
  return true;
}

}  // namespace relgrad
