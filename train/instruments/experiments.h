// Verification experiments for the relative positional schemes, the API behind `relgrad experiments`
// (docs/experiments.md has the report, experiments.cpp each task): small models trained from scratch on
// toy tasks where position is the only cue, then probed (train/instruments/probe.h) to check that the
// learned relative parameters encode the offset the task needs. Each experiment has a CI form (seconds)
// and a full form (minutes). Everything is deterministic: fixed seeds, no dropout, counter-based data, and
// CPU kernels that reduce in an order fixed by the shapes, so the figures are the same bit for bit at any
// thread count. The markdown links pictures as <basename(out_dir)>/<file>: it is saved in out_dir's parent
// (docs/experiments.md ↔ docs/experiments/).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <string>
#include <vector>

#include "train/instruments/probe.h"

namespace relgrad {

inline constexpr int64_t kFormDefault = std::numeric_limits<int64_t>::min();  // "the form's own value"

// What `relgrad experiments` runs; the comments name the flags. Every override left at its default
// (kFormDefault, 0 or empty) keeps the form's value, so the default options give today's report bit for
// bit. An override an experiment does not read is ignored by it (--lag by D2). The markdown's first
// line repeats the flags, so a variant's report says how to regenerate it.
struct ExperimentOptions {
  bool full = false;  // --full
  std::string only;   // --only: "D1", "D2", "D3", "D6" (case-insensitive) or "" = all
  std::string out_dir = "docs/experiments";  // pictures (cli: <folder of --out>/experiments)

  // ---- per-run overrides (kFormDefault / 0 / empty: the form's value) ----
  int64_t lag = kFormDefault;           // --lag K: D1's lag k (δ* = −k), K ≥ 1
  int64_t period = kFormDefault;        // --period P: D2's period (δ* = 1 − P), P ≥ 2
  int64_t train_length = kFormDefault;  // --train-length L: D3's training length
  std::vector<int64_t> eval_lengths;    // --eval-lengths 64,128,256: D3's evaluation lengths
  int64_t offset = kFormDefault;        // --offset C: D6's lag c (δ* = +c), C ≥ 0
  std::vector<std::string> schemes;     // --scheme t5,seed: only these schemes' runs (each scheme's
                                        //   variants of the form: "shaw" keeps its clips unless --clip)
  int64_t buckets = 0;                  // --buckets N: t5 num_buckets
  int64_t max_distance = 0;             // --max-distance N: t5 max_distance
  int64_t clip = 0;                     // --clip K: shaw's clip (one shaw run at K instead of the form's)
  int64_t table = 0;                    // --table N: seed/huang max_length t3 (|δ| ≤ N − 1)
  int64_t heads = 0;                    // --heads H
  int64_t width = 0;                    // --width D: d_model (d_ff = 2·D)
  int64_t steps = 0;                    // --steps N: training steps of every run
  std::vector<uint64_t> seeds;          // --seeds 1,2,3: every run repeated per seed (empty: seed 1)

  bool sweep = false;  // --sweep: run_experiment_limits (experiment_limits.h) instead of run_experiments
};

// InstrumentOptionError (probe.h; "[experiments] --lag 0: …") for a value out of range or an unknown
// --only or scheme; run_experiment_results calls it first, the cli to report a usage error.
void check_experiment_options(const ExperimentOptions& options);

// "1,2,3" → {1, 2, 3}; "64,128" → lengths; "t5,seed" → names (lower-cased). InstrumentOptionError
// "[<op>] <what> ..." naming the flag for an empty list or item, a non-number or trailing text; `op` is
// the command (experiments, length-bench, music-bench: the instruments' one list syntax).
std::vector<uint64_t> parse_seed_list(const std::string& text, const std::string& what = "--seeds",
                                      const char* op = "experiments");
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);
std::vector<std::string> parse_name_list(const std::string& text, const std::string& what = "--scheme",
                                         const char* op = "experiments");

// The size of one experiment's runs and the seed of its model initialisation and data.
struct ExperimentScale {
  bool full = false;
  uint64_t seed = 1;
  const ExperimentOptions* overrides = nullptr;  // per-run overrides (null: none); seeds is not read
};


// One trained model, probed at the offset its task needs.
struct ProbedRun {
  std::string label;                // "t5", "shaw clip 4", "seed (scaled)"
  std::string scheme;               // the config's scheme name
  std::string place;                // the attention probed: "cross" or "decoder_self"
  int64_t expected = 0;             // the offset δ* the task needs
  double accuracy = 0.0;            // held-out token accuracy (teacher forcing)
  double loss = 0.0;                // held-out token-mean cross-entropy
  double subset_accuracy = -1;      // accuracy on the positions that need the source (D6 stretch), else -1
  std::string layer;                // the probed module holding the best head
  int head = -1;                    // the head with the most attention at δ* (queries with a key there)
  double mass_expected = 0.0;       // that head's attention mass at δ*, over queries whose key δ* exists
  int64_t mass_peak = 0;            // that head's attention-mass peak (probe's mass, all queries)
  int64_t response_peak = kNoResponsePeak;  // that head's positional-response peak (kNoResponsePeak: no response)
  int64_t response_plateau = 0;     // how many offsets share the response's peak value (clipped edge rows)
  double seconds = 0.0;
  std::vector<ProbeCurve> curves;  // the probed place's curves (both kinds), for pictures
  PositionalConfig positional;     // the probed place's scheme settings (buckets, clip, table)
  // Repeated over several seeds (ExperimentOptions::seeds with more than one): each seed's run, in
  // order; the fields above are then the first seed's except mass_expected, accuracy, loss and
  // subset_accuracy, which are the means. Empty for a single seed.
  std::vector<uint64_t> seeds;
  std::vector<ProbedRun> per_seed;
};
// The experiments' criterion: one head with ≥ 0.9 of its attention at δ* and its response peaking
// there alone (the mass alone for a scheme without a response).
bool finds_offset(const ProbedRun& run);

// What every experiment reports besides its runs: 1 / num_symbols and one paragraph (model, data, steps).
struct ExperimentSetup {
  double chance = 0.0;
  std::string setup;
};
struct ShiftResult : ExperimentSetup {  // D1
  int64_t lag = 0;
  int64_t min_len = 0;  // the shortest source: offsets |δ| < min_len occur in every sequence
  std::vector<ProbedRun> runs;
};
struct PeriodicResult : ExperimentSetup {  // D2
  int64_t period = 0;
  std::vector<ProbedRun> runs;
};
struct ExtrapolationRow {  // D3: one scheme
  std::string scheme;
  std::vector<double> accuracy, loss;  // per eval length
  double seconds = 0.0;
};
struct ExtrapolationResult : ExperimentSetup {
  int64_t train_length = 0;
  std::vector<int64_t> eval_lengths;  // the first is train_length
  std::vector<ExtrapolationRow> rows;
};
struct SyncResult : ExperimentSetup {  // D6
  int64_t lag = 0;
  std::vector<ProbedRun> lag_runs;      // y_i = f(x_{i+c}), left alignment
  std::vector<ProbedRun> stretch_runs;  // y_{2m} = y_{2m+1} = f(x_m): scaled and left alignment
};

ShiftResult experiment_shift(const ExperimentScale& scale, std::ostream* progress = nullptr);
PeriodicResult experiment_periodic(const ExperimentScale& scale, std::ostream* progress = nullptr);
ExtrapolationResult experiment_extrapolation(const ExperimentScale& scale, std::ostream* progress = nullptr);
SyncResult experiment_synchronous(const ExperimentScale& scale, std::ostream* progress = nullptr);

// What run_experiments computed; an experiment left out by `only` is empty (no runs / rows).
struct ExperimentResults {
  bool full = false;
  ShiftResult d1;
  PeriodicResult d2;
  ExtrapolationResult d3;
  SyncResult d6;
  double seconds = 0.0;
};
ExperimentResults run_experiment_results(const ExperimentOptions& options, std::ostream* progress = nullptr);
// The markdown of docs/experiments.md for `results`; writes the pictures into options.out_dir.
std::string experiments_markdown(const ExperimentResults& results, const ExperimentOptions& options);
// Both: run_experiment_results, then experiments_markdown.
std::string run_experiments(const ExperimentOptions& options, std::ostream* progress = nullptr);

}  // namespace relgrad
