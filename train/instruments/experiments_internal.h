// Pieces shared by the experiment files (train/instruments/experiments*.cpp, experiment_limits.cpp); not
// a public API.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "train/instruments/experiments.h"
#include "train/instruments/recipe.h"

namespace relgrad::experiments {

// Batch `index` of a stream; a pure function of (the builder's seed, split, index).
using BatchFn = std::function<Batch(int64_t index, Split split)>;
// Picks positions by their index t (query / target position) and the loss target there (−100 = none).
using PositionFilter = std::function<bool(int64_t t, int64_t target)>;
// The key query i needs, when the task's offset is not one constant δ (D6 time stretch under Left).
using KeyOf = std::function<int64_t(int64_t i)>;

// The random numbers of one row of one batch: the counter (block, row, index, stream | split bit);
// `stream` separates the tasks.
CounterStream row_random(uint64_t seed, uint32_t stream, Split split, int64_t index, int64_t row);

// D2's data: a decoder-only LM on period-P sequences of `length` (experiments.cpp has the layout).
BatchFn periodic_lm(int64_t period, int64_t length, int64_t symbols, uint64_t seed);

// The model and optimizer settings every experiment starts from (recipe.h: no dropout, AdamW, cosine
// decay), with the experiments' own learning rate for the positional tables.
struct ModelSize : RecipeSize {
  // The positional tables train at this multiple of lr. T5's bias is in raw logit units and Adam
  // moves each entry by about lr per step, so the ≈ 5-nat margin that puts 0.9 of a head on one
  // offset takes thousands of steps at lr 3e-3; small experiments give the tables 10× lr.
  double positional_lr_scale = 10.0;
};
// recipe_config with the positional tables at size.positional_lr_scale (configs/experiments/*.toml
// write the same).
RunConfig experiment_config(bool encoder_decoder, int64_t vocab, const ModelSize& size, uint64_t seed);
PositionalConfig scheme_config(const std::string& scheme);  // defaults of models.h, per scheme

// The rows of every experiment's batches.
inline constexpr int64_t kExperimentRows = 32;

// Trains a model of `config` on `data` through the Trainer as `relgrad train` runs a config (set_bench_loop,
// progress after a line naming `label`), then calls `score` with the trained model in eval mode. The run
// directory is a scratch folder, removed when `score` returns.
void train_run(RunConfig config, const BatchFn& data, std::ostream* progress, const std::string& label,
               const std::function<void(RunModel&)>& score);

struct Evaluation {
  double loss = 0.0, accuracy = 0.0, subset_accuracy = -1.0;
};
// Held-out batches 0 .. batches − 1, teacher-forced, by evaluate (train/trainer/run.h) as `relgrad eval`
// runs it; then the accuracy on the positions `subset` picks, when given.
Evaluation evaluate_on(RunModel& model, const BatchFn& data, int64_t batches,
                       const PositionFilter& subset = {});

// What to probe after training, and how.
struct ProbeSpec {
  std::string place = "cross";  // the attention probed: "cross" or "decoder_self"
  int64_t expected = 0;         // δ* the task needs
  KeyOf key_of;                 // the needed key when it is not π(i) + δ* (D6 stretch under Left)
  PositionFilter queries;       // the queries the mass counts (default: all valid ones)
  int64_t reach = 0;            // response peak searched over |δ| ≤ reach (0: the whole curve)
  PositionFilter subset;        // loss positions of the subset accuracy (default: none)
  int64_t eval_batches = 4;
};

// Probes `model` on `batch`: the head of an attention at spec.place with the most attention on the
// needed key (π(i) + δ*, or key_of(i)), over the valid queries that have that key (in range, not
// padding, not masked) and pass spec.queries, and its mass and response peaks.
ProbedRun probe_expected(RunModel& model, const Batch& batch, const ProbeSpec& spec);

// The curve of `run`'s best head, of one kind (null when absent).
const ProbeCurve* best_curve(const ProbedRun& run, const std::string& kind);

// Trains, evaluates (held-out) and probes (held-out batch 0) one run.
ProbedRun train_and_probe(const std::string& label, const RunConfig& config, const BatchFn& data,
                          const ProbeSpec& spec, std::ostream* progress);

// ---- per-run overrides (ExperimentOptions) ----
inline bool is_set(int64_t v) { return v != kFormDefault; }
// The scale's overrides, or default options (no override) when it has none.
const ExperimentOptions& overrides_of(const ExperimentScale& scale);
// o.only upper-cased ("" = all); whether experiment `name` ("D1") is selected.
std::string only_of(const ExperimentOptions& o);
bool selected(const ExperimentOptions& o, const std::string& name);
// T5 buckets / max distance, seed/huang table size applied to `p` (when it is of that scheme).
PositionalConfig apply_tables(PositionalConfig p, const ExperimentOptions& o);
// `label` with the overrides that apply to `p`: "t5 (64 buckets)", "seed (t3 16)".
std::string tuned_label(const std::string& label, const PositionalConfig& p, const ExperimentOptions& o);
// The form's variants narrowed to o.schemes (those the form lacks are added at their defaults),
// with every shaw variant replaced by one at o.clip when set, then apply_tables and tuned_label.
using Variants = std::vector<std::pair<std::string, PositionalConfig>>;
Variants choose_variants(const Variants& form, const ExperimentOptions& o);
// "Seed 1." or, with several seeds, what the tables then show.
std::string seed_sentence(const ExperimentScale& scale);

// Text helpers for the markdown.
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");
std::string spoken_list(const std::vector<int64_t>& items, size_t from);  // from 0 of {8, 12, 20}: "8, 12 and 20"
std::string fixed(double v, int digits);
std::string percent(double v);                // 0.9731 → "97.3 %"
std::string offset_text(int64_t delta);       // "−3", "+2", "0"
std::string peak_text(const ProbedRun& run);  // response peak, "≤ −3 (edge row)" for a clipped plateau
// One paragraph per run whose scheme predicts (SchemeEntry::predict) that its term cannot single out
// the offset `expected`, in the scheme's own words (bidirectional: a non-causal place); "" when none.
std::string limit_notes(const std::vector<ProbedRun>& runs, int64_t expected, bool bidirectional);
std::string seconds_text(double s);
std::string model_text(const ModelSize& size, bool encoder_decoder);  // one sentence: model and optimizer

}  // namespace relgrad::experiments
