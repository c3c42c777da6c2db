// The profiler's clock (core/backend/timeline.h): a steady clock on the CPU, CUDA events on a GPU.
#include "core/backend/timeline.h"

#include <chrono>

#include "cuda/timer.h"

namespace relgrad::backend {

Timeline::~Timeline() {
  for (void* e : events_) cuda::event_destroy(e, device_.index);
}

size_t Timeline::mark() {
  if (device_.is_cpu()) {
    host_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
    return host_.size() - 1;
  }
  if (used_ == events_.size()) events_.push_back(cuda::event_create(device_.index));
  cuda::event_record(events_[used_], device_.index);
  return used_++;
}

std::vector<double> Timeline::read() {
  std::vector<double> t;
  if (device_.is_cpu()) {
    for (double h : host_) t.push_back(h - host_.front());
    host_.clear();
    return t;
  }
  if (used_ == 0) return t;
  cuda::event_synchronize(events_[used_ - 1], device_.index);  // events complete in stream order
  for (size_t i = 0; i < used_; ++i)
    t.push_back(i == 0 ? 0.0 : 1e-3 * double(cuda::event_elapsed_ms(events_[0], events_[i], device_.index)));
  used_ = 0;
  return t;
}

}  // namespace relgrad::backend
