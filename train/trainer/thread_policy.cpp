#include "train/trainer/thread_policy.h"

#include <algorithm>
#include <cstdio>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace relgrad {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string threads_text(int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); }

}  // namespace

ThreadPolicy::ThreadPolicy(int64_t requested, int cores, int max_threads) {
#ifdef _OPENMP
  restore_ = omp_get_max_threads();
#endif
  cores = std::max(1, cores);
  if (requested > 0) {
    const int n = static_cast<int>(std::min<int64_t>(requested, cores));
    if (requested > cores)
      capped_ = "train.threads = " + std::to_string(requested) + " is more than the " + std::to_string(cores) +
                " cores this process may use: running " + threads_text(n) +
                " (more threads than cores make every parallel region wait for a descheduled thread)";
    candidates_ = {n};
  } else {
    const int top = std::max(1, std::min(cores, max_threads));
    candidates_ = {top};
    if (top >= 4) candidates_.push_back(top / 2);
    if (top > 1) candidates_.push_back(1);
  }
  current_ = chosen_ = candidates_.front();
  phase_ = adaptive() ? Phase::Warmup : Phase::Hold;
}

ThreadPolicy::~ThreadPolicy() {
#ifdef _OPENMP
  if (restore_ > 0) omp_set_num_threads(restore_);
#endif
}

void ThreadPolicy::set_for_next_step() const {
#ifdef _OPENMP
  if (omp_get_max_threads() != current_) omp_set_num_threads(current_);
#endif
}

void ThreadPolicy::record(double seconds, int64_t tokens) {
  if (!adaptive()) return;
  switch (phase_) {
    case Phase::Warmup:
      if (--warmup_left_ <= 0) start_trial();
      return;
    case Phase::Trial: {
      const size_t c = static_cast<size_t>(trial_index_) % candidates_.size();
      seconds_per_token_[c].push_back(seconds / static_cast<double>(std::max<int64_t>(1, tokens)));
      trial_seconds_ += seconds;
      ++trial_index_;
      if (trial_index_ == static_cast<int64_t>(candidates_.size()) * kTrialRounds) finish_trial();
      else current_ = candidates_[static_cast<size_t>(trial_index_) % candidates_.size()];
      return;
    }
    case Phase::Hold:
      held_seconds_ += seconds;
      if (held_seconds_ >= hold_for_) start_trial();
      return;
  }
}

void ThreadPolicy::start_trial() {
  phase_ = Phase::Trial;
  trial_index_ = 0;
  trial_seconds_ = 0.0;
  seconds_per_token_.assign(candidates_.size(), {});
  current_ = candidates_.front();
}

void ThreadPolicy::finish_trial() {
  std::vector<double> med(candidates_.size());
  for (size_t c = 0; c < candidates_.size(); ++c) med[c] = median(seconds_per_token_[c]);
  // From the fewest threads up, a larger count must be 10 % faster to be taken: within noise, fewer
  // threads leave a core to the rest of the machine and cannot be slowed by a process that takes it.
  size_t best = candidates_.size() - 1;
  for (size_t c = candidates_.size() - 1; c-- > 0;)
    if (med[c] < 0.9 * med[best]) best = c;
  const int was = chosen_;
  const bool first = !decided_;
  decided_ = true;
  chosen_ = current_ = candidates_[best];
  if (first || chosen_ != was) {
    change_ = "threads: " + (first ? "" : threads_text(was) + " -> ") + threads_text(chosen_) + " of up to " +
              std::to_string(candidates_.front()) + " (measured";
    for (size_t c = 0; c < candidates_.size(); ++c) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s %s %.3g us/token", c ? "," : "", threads_text(candidates_[c]).c_str(),
                    1e6 * med[c]);
      change_ += buf;
    }
    change_ += ")";
  }
  phase_ = Phase::Hold;
  held_seconds_ = 0.0;
  hold_for_ = std::max(kHoldSeconds, kHoldFactor * trial_seconds_);
}

std::string ThreadPolicy::take_change() {
  std::string c;
  c.swap(change_);
  return c;
}

}  // namespace relgrad
