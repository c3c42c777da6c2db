// Verification experiments for the relative positional schemes (docs/experiments.md has the report):
// small models trained from scratch on toy tasks where position is the only cue, then probed
// (train/instruments/probe.h) to check that the learned relative parameters encode the offset the task needs.
// The API behind `relgrad experiments [--full] [--only D1] [--out docs/experiments.md]`:
//
//   ExperimentOptions o;                                  // CI form; o.full = true: the documented form
//   std::string md = run_experiments(o, &std::cout);      // trains, probes, writes pictures, returns
//   markdown
//
//   D1  shift-copy with lag k: encoder–decoder, the scheme in cross-attention only (left alignment),
//       y[t] = x[t − k]: the decoder query t must read key t − k, δ = −k. T5, the seed's method and
//       Shaw with clip > k put ≥ 0.9 of one head's attention at δ = −k; Shaw with clip ≤ k cannot
//       (every δ ≤ −clip shares the edge row).
//   D2  periodic repetition with period P, decoder-only LM: predicting s[i+1] = s[i+1−P] from query i
//       needs δ = 1 − P (the token P before the predicted one).
//   D3  length extrapolation: the D2 task trained at one length, evaluated at 2× and 4×, the first
//       zoo's schemes (none … transformer_xl; --scheme: any).
//   D6  synchronous cross-attention: y_i = f(x_{i+c}) → cross peak at δ = +c with left alignment; the
//       time-stretch task y_{2m} = y_{2m+1} = f(x_m) (t2 = 2·t1) works with scaled alignment only.
//
// Everything is deterministic: fixed seeds, no dropout, counter-based data, and CPU kernels that
// reduce in an order fixed by the shapes, so the figures are the same bit for bit at any thread
// count. Each experiment has a CI form (seconds) and a full form (minutes); `full` picks. The
// markdown links pictures as <basename(out_dir)>/<file>, i.e. it expects to be saved in out_dir's
// parent directory (docs/experiments.md ↔ docs/experiments/).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <string>
#include <vector>

#include "train/instruments/probe.h"

namespace relgrad {

inline constexpr int64_t kFormDefault = std::numeric_limits<int64_t>::min();  // "the form's own value"

// What `relgrad experiments` runs. Every override left at its default (kFormDefault, 0 or empty)
// keeps the form's value, so the default options give today's report bit for bit. The flag names in
// the comments are the ones `relgrad experiments` should take (train/command/cli.cpp wires them):
//
//   relgrad experiments --only D1 --lag 11 --scheme t5 --buckets 64 --heads 8 --seeds 1,2,3
//
// prints the D1 table for that variant: one row per scheme run, the mass at δ* as the mean over the
// seeds with its min … max. An override that an experiment does not read is ignored by it (--lag by
// D2, --period by D1), so the experiment-specific ones go with `--only`. The markdown's first line
// repeats the flags, so a variant's report says how to regenerate it. Lists: parse_seed_list,
// parse_int_list, parse_name_list below; errors: check_experiment_options.
struct ExperimentOptions {
  bool full = false;  // --full
  std::string only;   // --only: "D1", "D2", "D3", "D6" (case-insensitive) or "" = all
  std::string out_dir =
      "docs/experiments";  // pictures; created when needed (cli: <folder of --out>/experiments)

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

  // ---- claims with their limits (train/instruments/experiment_limits.h) ----
  bool sweep = false;  // --sweep: run_experiment_limits instead of run_experiments;
                       //   the cli writes docs/experiment-limits.md by default (--out);
                       //   --only D1, D2 or D6; --seeds (default 1,2,3), --heads,
                       //   --width and --steps apply, the sweep sets the others
};

// InstrumentOptionError (probe.h; "[experiments] --lag 0: …") for a value out of range: lag < 1,
// period < 2, offset < 0, train_length < 2, eval lengths < 2, an unknown scheme, buckets < 2 or odd,
// max_distance < 1, clip < 1, table < 2, heads < 1, width not a positive multiple of heads, steps < 1.
// run_experiment_results calls it first; the cli may call it to report a usage error.
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

inline constexpr int64_t kNoPeak = std::numeric_limits<int64_t>::min();  // no response curve (scheme none)

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
  int64_t response_peak = kNoPeak;  // that head's positional-response peak (kNoPeak: no response)
  int64_t response_plateau = 0;     // how many offsets share the response's peak value (clipped edge rows)
  double seconds = 0.0;
  std::vector<ProbeCurve> curves;  // the probed place's curves (both kinds), for pictures
  PositionalConfig positional;     // the probed place's scheme settings (buckets, clip, table)
  // Repeated over several seeds (ExperimentOptions::seeds with more than one): one entry per seed,
  // in order; the fields above are then the first seed's except mass_expected, accuracy, loss and
  // subset_accuracy, which are the means. Empty for a single seed.
  std::vector<uint64_t> seeds;
  std::vector<double> seed_mass, seed_accuracy;
  std::vector<int64_t> seed_response_peak, seed_response_plateau;
};

struct ShiftResult {  // D1
  int64_t lag = 0;
  int64_t min_len = 0;  // the shortest source: offsets |δ| < min_len occur in every sequence
  double chance = 0.0;  // 1 / num_symbols
  std::vector<ProbedRun> runs;
  std::string setup;  // one paragraph: model, data, steps
};
struct PeriodicResult {  // D2
  int64_t period = 0;
  double chance = 0.0;
  std::vector<ProbedRun> runs;
  std::string setup;
};
struct ExtrapolationRow {  // D3: one scheme
  std::string scheme;
  std::vector<double> accuracy, loss;  // per eval length
  double seconds = 0.0;
};
struct ExtrapolationResult {
  int64_t train_length = 0;
  std::vector<int64_t> eval_lengths;  // the first is train_length
  double chance = 0.0;
  std::vector<ExtrapolationRow> rows;
  std::string setup;
};
struct SyncResult {  // D6
  int64_t lag = 0;
  double chance = 0.0;
  std::vector<ProbedRun> lag_runs;      // y_i = f(x_{i+c}), left alignment
  std::vector<ProbedRun> stretch_runs;  // y_{2m} = y_{2m+1} = f(x_m): scaled and left alignment
  std::string setup;
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
