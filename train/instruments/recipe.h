// The recipe every instrument trains its models by (the verification experiments, music-bench,
// length-bench): one place that turns a size and a seed into the RunConfig `relgrad train` would run,
// and a positional treatment's name into its model keys (a scheme sized by its registry entry under
// the bench's rule, layers/schemes.h). Each instrument adds what is its own: its data keys
// (train/instruments/length_bench.cpp, music_bench.cpp) or (the experiments) its batches, handed to the
// Trainer as a Dataset (experiments_common.cpp).
//
//   RecipeSize size;  size.decoder_layers = 2;  size.steps = 1500;
//   RunConfig c = recipe_config(/*encoder_decoder=*/false, size, seed);
//   set_bench_loop(c, out_dir + "/runs/t5-s1");
//   set_decoder_treatment(c, "t5", SchemeFit{FitRule::Window, 64});  // sized to windows of 64
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace relgrad {

// The model's size and the optimizer's budget. The defaults are the smallest model the instruments
// train (the experiments' CI form).
struct RecipeSize {
  int64_t d_model = 32, n_heads = 2, d_ff = 64, encoder_layers = 1, decoder_layers = 1;
  int64_t steps = 300, warmup = 30;
  double lr = 3e-3;
};

// RunConfig::defaults() with the size, model.vocab_size = `vocab` (0: derived from the data), no positional
// term in any attention, AdamW warmed up then cosine to lr / 20, and no dropout: no randomness in training
// beyond the data, so runs are reproducible bit for bit.
RunConfig recipe_config(bool encoder_decoder, const RecipeSize& size, uint64_t seed, int64_t vocab = 0);

// The loop keys of a run the benches train through Trainer, as `relgrad train` runs it: a log line
// every quarter of the run, no evaluation, checkpoint or samples before the end (the bench evaluates
// the whole splits itself), one eval batch, one OpenMP thread (train/instruments/music_bench.h says
// why), the run directory `out_dir`.
void set_bench_loop(RunConfig& config, const std::string& out_dir);

// How a treatment places position: not at all, by an absolute encoding added to the embeddings, or
// by a relative scheme in attention. The one place that tells them apart by name.
enum class TreatmentKind { None, Absolute, Relative };
TreatmentKind treatment_kind(const std::string& treatment);  // "none"; "learned", "sinusoidal"; else

// A decoder-only run's treatment: None leaves every attention without a positional term; Absolute
// sets model.absolute_position (and model.max_positions when > 0; else the config's); Relative puts
// the scheme `treatment` in the decoder's self-attention, its knobs sized by the bench's `fit`
// (SchemeEntry::fit, layers/schemes.h).
void set_decoder_treatment(RunConfig& config, const std::string& treatment, const SchemeFit& fit,
                           int64_t max_positions = 0);

// Every treatment of decoder self-attention, the "every scheme" of the benches: none and the absolute
// encodings (sinusoidal, learned), every registered scheme that serves causal self-attention (in the
// registry's order, layers/schemes.cpp), then with `randomised` "<name>-random" for each that can be
// randomised (the absolute ones and the schemes whose entry says random_positions: trained at sorted
// random positions, TransformerConfig::random_positions_max).
std::vector<std::string> every_treatment(bool randomised);
inline const std::string kRandomSuffix = "-random";
bool randomised_treatment(const std::string& treatment);   // "rope-random": true
std::string base_treatment(const std::string& treatment);  // "rope-random" → "rope"

// Puts the OpenMP thread count back as it was when made (the bench runs set train.threads = 1).
class ThreadCountGuard {
 public:
  ThreadCountGuard();
  ~ThreadCountGuard();
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int threads_;
};

double seconds_since(std::chrono::steady_clock::time_point start);

}  // namespace relgrad
