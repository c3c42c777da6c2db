// Claims with their limits, the API behind `relgrad experiments --sweep`: where each verification
// experiment's claim (docs/experiments.md) holds and where it stops, found by sweeping the knob the claim
// depends on over several seeds (the CI form's model and data), next to the limit the mechanism predicts
// (experiment_limits.cpp lists the sweeps). A point of D1, D2, D6 "holds" when one head has ≥ 0.9 of its
// attention at δ* and its response peaks there alone (finds_offset); D3 "keeps" a length when its
// accuracy there is ≥ 90 % of its accuracy at the training length.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/experiments.h"

namespace relgrad {

// One point of a sweep: a scheme variant at one knob value, over the seeds.
struct LimitPoint {
  std::string variant;           // "t5 (32 buckets)", "shaw clip 4", "seed t3 8"
  int64_t knob = 0;              // the swept value (lag, period, length, offset)
  int64_t expected = 0;          // δ*
  bool predicted = true;         // the mechanism's prediction: the claim holds here
  std::string mechanism;         // why (not) predicted: "δ = −9 shares bucket 8 with −8 … −11"
  std::vector<ProbedRun> per_seed;
  int holds = 0;  // seeds where the claim holds
};
struct LimitSweep {
  std::string experiment;  // "D1"
  std::string claim;       // the claim, one sentence
  std::string knob;        // "lag k"
  std::vector<LimitPoint> points;
  std::string setup;    // model, data, steps, seeds
  std::string finding;  // one paragraph: where it holds, where it stops, the mechanism
};
// D3: one scheme over the evaluation lengths.
struct LengthPoint {
  std::string scheme;
  std::vector<std::vector<double>> accuracy;  // [length][seed]
  std::string mechanism;                      // what the scheme does with offsets it never saw
};
struct LengthSweep {
  int64_t train_length = 0;
  std::vector<int64_t> lengths;  // the first is train_length
  std::vector<LengthPoint> points;
  std::string setup;
};
struct LimitResults {
  std::vector<uint64_t> seeds;
  std::vector<LimitSweep> sweeps;
  LengthSweep d3;  // no points when D3 was not swept
  double seconds = 0.0;
};

// Runs the sweeps `options.only` selects (D1, D2, D3, D6; all when empty), over options.seeds (default
// 1,2,3); of the overrides only heads, width and steps apply (the sweep sets the others itself).
LimitResults run_limit_results(const ExperimentOptions& options, std::ostream* progress = nullptr);
std::string limits_markdown(const LimitResults& results, const ExperimentOptions& options);
std::string run_experiment_limits(const ExperimentOptions& options, std::ostream* progress = nullptr);

}  // namespace relgrad
