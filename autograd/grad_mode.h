// Grad mode: a thread-local switch. While it is off, ops record nothing (inference, optimizer
// updates, and the backward pass itself run this way).
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

}  // namespace relgrad
