// Claims with their limits (train/instruments/experiment_limits.h): the sweeps, and the mechanisms that
// predict where each claim stops.
#include "train/instruments/experiment_limits.h"

#include <algorithm>
#include <ostream>

#include "core/base/error.h"
#include "layers/relative_bias.h"

namespace relgrad {

int64_t t5_exact_reach(bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  auto bucket = [&](int64_t d) { return t5_relative_bucket(-d, bidirectional, num_buckets, max_distance); };
  int64_t d = 0;
  while (d < max_distance + num_buckets && bucket(d + 1) != bucket(d) && bucket(d + 1) != bucket(d + 2)) ++d;
  return d;
}

std::vector<int64_t> t5_bucket_members(int64_t delta, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  const int64_t b = t5_relative_bucket(delta, bidirectional, num_buckets, max_distance);
  const int64_t sign = delta < 0 ? -1 : 1, limit = std::abs(delta) + 2 * max_distance + num_buckets;
  int64_t lo = std::abs(delta), hi = std::abs(delta);  // buckets are monotone in |δ| within a sign
  while (lo > 0 && t5_relative_bucket(sign * (lo - 1), bidirectional, num_buckets, max_distance) == b) --lo;
  while (hi < limit && t5_relative_bucket(sign * (hi + 1), bidirectional, num_buckets, max_distance) == b) ++hi;
  std::vector<int64_t> members;
  for (int64_t d = lo; d <= hi; ++d) members.push_back(sign * d);
  std::sort(members.begin(), members.end());
  return members;
}

LimitResults run_limit_results(const ExperimentOptions& options, std::ostream* progress) {
  (void)options;
  (void)progress;
  RG_CHECK(false, "experiments", "--sweep is not implemented yet");
  return {};
}

std::string limits_markdown(const LimitResults& results, const ExperimentOptions& options) {
  (void)results;
  (void)options;
  return {};
}

std::string run_experiment_limits(const ExperimentOptions& options, std::ostream* progress) {
  return limits_markdown(run_limit_results(options, progress), options);
}

}  // namespace relgrad
