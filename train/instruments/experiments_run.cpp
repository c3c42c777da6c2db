// run_experiment_results: runs the selected experiments over the seeds and averages them
// (train/instruments/experiments.h); experiments_report.cpp writes the markdown and pictures.
#include <cctype>
#include <chrono>
#include <ostream>

#include "core/base/error.h"
#include "train/instruments/experiments_internal.h"

namespace relgrad {

using namespace experiments;

namespace {

// Sums seed n's runs into `into` (the first seed's, whose per-seed lists start here): run_experiment_results
// divides the sums by the seed count at the end.
void add_seed(std::vector<ProbedRun>& into, const std::vector<ProbedRun>& next) {
  for (size_t k = 0; k < into.size() && k < next.size(); ++k) {
    ProbedRun& r = into[k];
    if (r.seed_mass.empty()) {
      r.seed_mass = {r.mass_expected}, r.seed_accuracy = {r.accuracy};
      r.seed_response_peak = {r.response_peak}, r.seed_response_plateau = {r.response_plateau};
    }
    const ProbedRun& x = next[k];
    r.seed_mass.push_back(x.mass_expected);
    r.seed_accuracy.push_back(x.accuracy);
    r.seed_response_peak.push_back(x.response_peak);
    r.seed_response_plateau.push_back(x.response_plateau);
    r.mass_expected += x.mass_expected, r.accuracy += x.accuracy, r.loss += x.loss, r.seconds += x.seconds;
    if (r.subset_accuracy >= 0) r.subset_accuracy += x.subset_accuracy;
  }
}

bool selected(const ExperimentOptions& o, const char* name) {
  std::string want = o.only;
  for (char& ch : want) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return want.empty() || want == name;
}

}  // namespace

ExperimentResults run_experiment_results(const ExperimentOptions& o, std::ostream* progress) {
  RG_CHECK(o.only.empty() || selected(o, "D1") || selected(o, "D2") || selected(o, "D3") || selected(o, "D6"),
           "experiments", "unknown experiment '", o.only, "' (expected D1, D2, D3 or D6)");
  check_experiment_options(o);
  const auto start = std::chrono::steady_clock::now();
  ExperimentResults r;
  r.full = o.full;
  const std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{1} : o.seeds;
  for (size_t n = 0; n < seeds.size(); ++n) {
    ExperimentScale scale;
    scale.full = o.full;
    scale.seed = seeds[n];
    scale.overrides = &o;
    if (seeds.size() > 1 && progress) *progress << "seed " << seeds[n] << "\n";
    ExperimentResults one;
    if (selected(o, "D1")) one.d1 = experiment_shift(scale, progress);
    if (selected(o, "D2")) one.d2 = experiment_periodic(scale, progress);
    if (selected(o, "D3")) one.d3 = experiment_extrapolation(scale, progress);
    if (selected(o, "D6")) one.d6 = experiment_synchronous(scale, progress);
    if (n == 0) {
      r.d1 = std::move(one.d1), r.d2 = std::move(one.d2), r.d3 = std::move(one.d3), r.d6 = std::move(one.d6);
      continue;
    }
    add_seed(r.d1.runs, one.d1.runs);
    add_seed(r.d2.runs, one.d2.runs);
    add_seed(r.d6.lag_runs, one.d6.lag_runs);
    add_seed(r.d6.stretch_runs, one.d6.stretch_runs);
    for (size_t k = 0; k < r.d3.rows.size(); ++k)
      for (size_t m = 0; m < r.d3.rows[k].accuracy.size(); ++m) {
        r.d3.rows[k].accuracy[m] += one.d3.rows[k].accuracy[m];
        r.d3.rows[k].loss[m] += one.d3.rows[k].loss[m];
      }
    for (size_t k = 0; k < r.d3.rows.size(); ++k) r.d3.rows[k].seconds += one.d3.rows[k].seconds;
  }
  if (seeds.size() > 1) {
    const double count = static_cast<double>(seeds.size());
    for (auto* runs : {&r.d1.runs, &r.d2.runs, &r.d6.lag_runs, &r.d6.stretch_runs})
      for (ProbedRun& run : *runs) {
        run.seeds = seeds;
        run.mass_expected /= count, run.accuracy /= count, run.loss /= count;
        if (run.subset_accuracy >= 0) run.subset_accuracy /= count;
      }
    for (ExtrapolationRow& row : r.d3.rows) {
      for (double& a : row.accuracy) a /= count;
      for (double& l : row.loss) l /= count;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string run_experiments(const ExperimentOptions& o, std::ostream* progress) {
  return experiments_markdown(run_experiment_results(o, progress), o);
}

}  // namespace relgrad
