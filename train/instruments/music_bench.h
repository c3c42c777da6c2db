// `relgrad music-bench`: the Music Transformer's JSB Chorales comparison (Huang et al. 2019, Table 1)
// reproduced at this machine's budget, and the harmonisation comparison of cross-attention alignments.
// Decoder-only models of one size and budget, one per positional treatment and seed, trained on the
// serialised chorales (train/music/chorales.h); note-wise NLL (nats per token) on the whole valid and
// test chorales; then encoder–decoder harmonisers (soprano → alto, tenor, bass) under left, scaled and
// explicit cross-attention alignment; then the probe's view of the trained heads. docs/music.md
// holds the table the full run printed, next to the paper's.
//
// Every model trains through the path `relgrad train` takes: a RunConfig with the documented keys
// (data.source = "chorales", model.absolute_position, model.cross_alignment, ...) → trainer_options →
// Trainer (train/config/run_options.h, train/trainer/trainer.h); its checkpoint and log land in
// <out_dir>/runs/<label>, on the study spine (train/instruments/study.h): a model's numbers, its probe's
// included, are kept there as soon as it is scored, a rerun into the same out_dir trains only what is
// missing (a kept model's probe pictures are those its first training drew), and `mpirun -np N` spreads
// the models over the ranks. Every run uses one OpenMP thread (train.threads = 1): its figures do not
// depend on the machine's core count, and on a shared machine one thread per model loses nothing to
// threads spinning while they wait for a busy core (measured on 2 cores shared with other jobs: steps
// over 10× slower at two threads than at one). The caller's thread count is restored on return.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/bench_report.h"

namespace relgrad {

// Empty lists are the form's: the full form's treatments are none, sinusoidal, learned, shaw, huang,
// t5, alibi, rope and seed, its seeds 1, 2, 3; the CI form's none and huang, seeds 1, 2.
struct MusicBenchOptions : StudyOptions {
  MusicBenchOptions() { out_dir = "runs/music-bench"; }
  bool harmony = true;        // also the harmonisation comparison
  std::string chorales_path;  // empty = the shipped file
  // The PoPE paper's JSB configuration instead of the form's size (Gopalakrishnan et al. 2025, Table 2:
  // 6 layers, d_model 256, 8 heads, RMSNorm, dropout 0.2, batch 4, windows of 2048 tokens, 3000
  // steps, lr 6e-4): a GPU's size (with device = "cuda"); not with `full`.
  bool pope_size = false;
  std::string device = "cpu";  // train.device of every model ("cpu", "cuda", "cuda:1")
};

// The size and budget every model of one form shares.
struct MusicBenchSize : BenchModelSize {  // layers: the decoder-only models'
  MusicBenchSize() { layers = 3, batch_size = 16, steps = 1500, warmup = 100, lr = 2e-3; }
  int64_t context = 128;       // decoder-only tokens per training window (32 16th steps)
  int64_t harmony_steps = 32;  // harmonisation: 16th steps (source tokens) per training window
  int64_t harmony_layers = 2;  // harmonisation: encoder and decoder layers each
  double dropout = 0.0;
  bool rms_norm = false;       // RMSNorm instead of LayerNorm (the PoPE size)
};
// The form's size (full, CI, or the PoPE paper's) with options.steps applied.
MusicBenchSize music_bench_size(const MusicBenchOptions& options);

// One model's scores, teacher-forced on the whole valid and test splits: note-wise NLL (nats per token,
// mean over every scored token, EOS included) and token accuracy (argmax = target).
struct MusicScores {
  uint64_t seed = 0;
  int64_t params = 0;
  double valid_nll = 0, test_nll = 0, valid_accuracy = 0, test_accuracy = 0;
  double seconds = 0;  // training and evaluation
};

// One decoder-only model.
struct MusicBenchRun : MusicScores {
  std::string treatment;
  int64_t valid_tokens = 0, test_tokens = 0;
};

// One head of an attention module, as the probe measured it on held-out chorales.
struct HeadSummary {
  std::string model;  // "huang (seed 1)", "harmony explicit (seed 1)"
  std::string layer;  // "layers.0.self_attn", "decoder.layers.1.cross_attn"
  int head = 0;
  std::vector<int64_t> top_offsets;  // the offsets with the most attention mass, largest first
  std::vector<double> top_mass;
  double mass_at_zero = 0;     // δ = 0 (cross: on the source's time axis, see below)
  double mass_same_voice = 0;  // decoder-only: δ = −4, −8, … (the query's own voice, earlier steps)
  double mass_next_voice = 0;  // decoder-only: δ = −3, −7, … (the predicted token's voice, earlier)
  double mass_near = 0;        // decoder-only: δ = −1, −2, −3 (the neighbouring voices)
  int64_t response_peak = 0;   // the positional response's peak over the probed offsets
  bool has_response = false;
};

// One harmoniser: cross-attention treatment and alignment.
struct HarmonyRun : MusicScores {
  std::string label;  // "seed, explicit", "seed, scaled", "seed, left", "none"
  // The best cross head's mean weight on the soprano note of the query's own 16th step (the source
  // key ⌊i / 3⌋ for target query i, whatever alignment the model used), over held-out chorales.
  double same_step_mass = 0;
};

struct MusicBenchResult : BenchResult {
  MusicBenchSize size;
  std::vector<MusicBenchRun> runs;  // per treatment, per seed
  std::vector<HarmonyRun> harmony;
  std::vector<HeadSummary> heads;     // decoder-only huang / seed heads, then the harmonisers' cross heads
  double unigram_valid_nll = 0, unigram_test_nll = 0;  // the train set's token frequencies (add-one)
  int64_t train_chorales = 0, valid_chorales = 0, test_chorales = 0;
};

// Trains, evaluates and probes every model of `options` not already scored in options.out_dir
// (progress lines to `progress`, may be null), drawing the probe pictures into options.out_dir; no tables.
MusicBenchResult music_bench_results(const MusicBenchOptions& options, std::ostream* progress);
// The tables as text (the comparison, with the unigram baseline; the harmonisers; the heads).
std::string music_bench_table(const MusicBenchResult& result);
// The same as markdown (results.md) and as CSV (results.csv: one row per model and seed).
std::string music_bench_markdown(const MusicBenchResult& result, const MusicBenchOptions& options);
std::string music_bench_csv(const MusicBenchResult& result);
// What the CI form checks, robust at its size on every seed measured (docs/music.md says which):
// every model beats the unigram baseline on valid and test NLL, and, where both were trained, the
// mean valid NLL of huang is below that of none, and the explicit harmoniser's best cross head puts
// more weight on the same-step soprano note than the harmoniser without a cross positional term.
// Empty when all hold; else one line per failure.
std::vector<std::string> music_bench_failures(const MusicBenchResult& result);

// Runs the bench, prints progress and the tables to `out`; returns 0 when every model trained (and,
// in the CI form, the robust outcome it asserts held), 1 otherwise. Errors throw relgrad::Error.
int run_music_bench(const MusicBenchOptions& options, std::ostream& out);

}  // namespace relgrad
