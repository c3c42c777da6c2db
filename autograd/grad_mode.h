// Grad mode: a thread-local switch. While it is off, ops record nothing (inference, optimizer
// updates, and the backward pass itself run this way). Anomaly mode: NaN/Inf checks on the tape.
#pragma once

namespace relgrad {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: sets grad mode for this scope and restores the previous mode on exit (c10's AutoGradMode).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

// Disables gradient recording in this scope, as torch::NoGradGuard.
struct NoGradGuard : AutoGradMode {
  NoGradGuard() : AutoGradMode(false) {}
};

// Enables recording in this scope (e.g. inside a no-grad region).
struct EnableGradGuard : AutoGradMode {
  EnableGradGuard() : AutoGradMode(true) {}
};

// Anomaly detection (torch.autograd.detect_anomaly; libtorch's AnomalyMode / DetectAnomalyGuard):
// while on, every op recorded on the tape has its output checked for NaN/Inf as it is recorded, and
// every gradient a node's backward produces is checked before it is passed on. The first non-finite
// one throws NonFiniteError naming the op, the shape of the bad tensor, how many values are NaN/Inf,
// and the op's input shapes. Ops that record nothing (grad mode off, or no input requiring grad) are
// not checked. Off by default: then the cost is one load and branch per op. It is a process-wide
// switch (as in torch), meant for debugging: each check reads the whole tensor.
class AnomalyMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: sets anomaly detection for this scope and restores the previous setting on exit.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true) : previous_(AnomalyMode::is_enabled()) {
    AnomalyMode::set_enabled(enabled);
  }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace relgrad
