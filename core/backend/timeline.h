// Points in time on one device's timeline, made cheaply and read together: the clock of the
// op-level profiler (autograd/profiler.h). On the CPU a mark reads a steady clock; on a GPU it is a
// CUDA event recorded on the device's default stream (cuda/timer.h), so marks around an op time the
// GPU's work on it, not the host's launch of it. read() waits once (for the last mark) and gives
// every mark's time; nothing else synchronises.
#pragma once
#include <cstddef>
#include <vector>

#include "core/device.h"

namespace relgrad::backend {

class Timeline {
 public:
  explicit Timeline(Device device) : device_(device) {}
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  size_t mark();  // a new mark now; returns its index (0, 1, ... since the last read)
  // Seconds from mark 0 to each mark; waits for the last one on a GPU. Clears the marks (a GPU's
  // events are kept for the next ones).
  std::vector<double> read();
  const Device& device() const { return device_; }

 private:
  Device device_;
  std::vector<double> host_;   // CPU: seconds on the steady clock
  std::vector<void*> events_;  // GPU: the event pool; the first used_ are this round's marks
  size_t used_ = 0;
};

}  // namespace relgrad::backend
