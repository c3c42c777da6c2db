// Claims with their limits: where each verification experiment's claim (docs/experiments.md) holds
// and where it stops, found by sweeping the knob the claim depends on over several seeds, next to the
// limit the mechanism predicts. The API behind `relgrad experiments --sweep [--only D1] [--seeds 1,2,3]
// [--out docs/experiment-limits.md]`:
//
//   ExperimentOptions o;  o.sweep = true;                  // CI sizes: minutes on one core
//   std::string md = run_experiment_limits(o, &std::cout);  // markdown of docs/experiment-limits.md
//
// Sweeps (the CI form's model and data, ExperimentOptions overrides applied on top):
//   D1  lag k × scheme: t5 at 16 and 32 buckets (exact distances only up to t5_exact_reach; past it
//       δ = −k shares a bucket with its neighbours: a response plateau), shaw with clip k − 1, k, k + 1
//       (δ = −k is its own row only for clip ≥ k + 1), seed with table t3 around k (the Zero policy: no
//       row for |δ| ≥ t3).
//   D2  period P × scheme: t5 at 8 and 32 causal buckets, the seed's table at its default size over
//       periods and one row short of δ* = 1 − P (huang is bit-identical to seed in causal attention).
//   D6  offset c: the lag task's cross peak at δ = +c for t5 (bidirectional buckets), seed, shaw.
//   D3  evaluation length: every scheme trained at the CI length 16, evaluated at 1×, 2×, 4× and 8×; it
//       "keeps" a length when its accuracy there is ≥ 90 % of its accuracy at the training length.
// A point of D1, D2, D6 "holds" when one head has ≥ 0.9 of its attention at δ* and its response peaks
// there alone; the table gives on how many seeds it holds.
#pragma once
#include "layers/relative_bias.h"
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/experiments.h"

namespace relgrad {

// T5's exact range and bucket members: t5_exact_reach, t5_bucket_members (layers/relative_bias.h).

// One point of a sweep: a scheme variant at one knob value, over the seeds.
struct LimitPoint {
  std::string variant;           // "t5 (32 buckets)", "shaw clip 4", "seed t3 8"
  int64_t knob = 0;              // the swept value (lag, period, length, offset)
  int64_t expected = 0;          // δ*
  bool predicted = true;         // the mechanism's prediction: the claim holds here
  std::string mechanism;         // why (not) predicted: "δ = −9 shares bucket 8 with −8 … −11"
  std::vector<double> value;     // per seed: the best head's mass at δ*
  std::vector<double> accuracy;  // per seed: held-out accuracy
  std::vector<int64_t> response_peak, response_plateau;  // per seed
  int holds = 0;                                         // seeds where the claim holds
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
