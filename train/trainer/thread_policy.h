// How many OpenMP threads a CPU training run uses, chosen step by step (train.threads; docs/design.md,
// "Threads", and docs/benchmarks.md, "Threads on a shared machine", for the measurements behind it).
//
// Why a policy at all: every parallel region ends when its slowest thread does. A thread whose core
// is shared (more threads than cores, or another busy process on the machine) waits a scheduler time
// slice, milliseconds, at each of a step's hundreds of regions: 3 threads on 2 cores ran the default
// run 57x slower than 2, and one busy process made 2 threads 2.7x slower than 1. Small models also
// gain nothing from a second thread (their regions are too short to pay for the handover).
//
//   train.threads = N > 0   N threads, but never more than the cores this process may use
//                           (omp_get_num_procs(): the affinity mask); a larger N is capped, with a warning.
//   train.threads = 0       (the default) adaptive: "up to max" threads, max = the cores, or
//                           OMP_NUM_THREADS when it is set lower. The policy times steps at max threads
//                           and at 1 (and at max/2 from 4 cores up), alternating, picks the fastest per
//                           token, keeps it, and tries again after max(kHoldSeconds, kHoldFactor x the
//                           trial's time), so a process that starts (or ends) beside the run is noticed.
//
// Switching costs nothing in results: every CPU kernel reduces in an order fixed by the shapes, not by
// the thread count (core/cpu/matmul.cpp cuts GEMMs into tiles by shape), so the losses and weights are
// the same bits whatever the policy picks (tests/test_thread_policy.cpp checks it).
//
// The decision logic is separate from the clock: record() takes each step's seconds and tokens, so
// tests feed it timings of their own.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace relgrad {

class ThreadPolicy {
 public:
  // requested: train.threads (0 = adaptive); cores: the cores the process may use; max_threads: the
  // OpenMP default (omp_get_max_threads() before any change, which OMP_NUM_THREADS sets).
  // The OpenMP thread count in force at construction is put back when the policy is destroyed.
  ThreadPolicy(int64_t requested, int cores, int max_threads);
  ~ThreadPolicy();
  ThreadPolicy(const ThreadPolicy&) = delete;
  ThreadPolicy& operator=(const ThreadPolicy&) = delete;

  // The thread count for the next step (call set_for_next_step() to apply it through omp_set_num_threads).
  int threads_for_next_step() const { return current_; }
  void set_for_next_step() const;
  // One step done with threads_for_next_step() threads: its wall time and its tokens.
  void record(double seconds, int64_t tokens);

  bool adaptive() const { return candidates_.size() > 1; }
  int most() const { return candidates_.front(); }  // the largest count the policy may use
  // A warning when train.threads was capped at the cores ("" otherwise), and a line each time the
  // adaptive choice changes ("" otherwise; take_change() clears it).
  const std::string& capped_warning() const { return capped_; }
  std::string take_change();

  // The schedule: after kWarmupSteps unmeasured steps, a trial of kTrialRounds rounds, each one step
  // at every candidate; the choice is then held for max(kHoldSeconds, kHoldFactor x the trial's time).
  static constexpr int kWarmupSteps = 2, kTrialRounds = 5;
  static constexpr double kHoldSeconds = 15.0, kHoldFactor = 20.0;

 private:
  void start_trial();
  void finish_trial();

  std::vector<int> candidates_;  // largest first
  int restore_ = 0;               // omp_get_max_threads() at construction
  int current_ = 1, chosen_ = 1;
  bool decided_ = false;  // a trial has finished
  std::string capped_, change_;
  enum class Phase { Warmup, Trial, Hold } phase_ = Phase::Warmup;
  int64_t warmup_left_ = kWarmupSteps;
  int64_t trial_index_ = 0;                          // steps done in this trial
  std::vector<std::vector<double>> seconds_per_token_;  // per candidate, this trial
  double trial_seconds_ = 0.0, held_seconds_ = 0.0, hold_for_ = 0.0;
};

}  // namespace relgrad
