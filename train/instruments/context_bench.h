// `relgrad context-bench`: train short, test long on the KJV text, after Press et al. 2022 (ALiBi,
// Figure 1; re-plotted by KERPLE, Sandwich and FIRE): byte-level decoder-only language models, one per
// positional treatment and seed, trained on windows of `context` bytes (configs/char_lm.toml's data,
// a smaller model), then evaluated on held-out windows of 1, 2, 4, 8 (and 16) times that length.
// docs/extrapolation.md holds the protocol, the table the full run printed and the papers' numbers.
//
// Every model trains through the path `relgrad train` takes (a RunConfig with documented keys →
// trainer_options → Trainer, one OpenMP thread; train/instruments/recipe.h) and leaves its checkpoint
// in <out_dir>/runs/<treatment>-s<seed>/, on the study spine (train/instruments/study.h): its numbers
// are kept there as soon as it is scored, a rerun into the same out_dir trains only what is missing,
// and `mpirun -np N` spreads the models over the ranks. Each number of the table is what
//   relgrad eval <that checkpoint> --data.context=N --data.seed=S --batches=K
// prints as the held-out loss (context_bench_eval below is that computation; tests/test_context_bench.cpp
// checks the two agree), with S = kContextBenchEvalSeed for every model, so that every model of a
// context is scored on the same held-out windows, and K chosen so that each context scores about the
// same number of bytes (context_bench_eval_batches).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/bench_report.h"
#include "train/trainer/run.h"  // EvalResult

namespace relgrad {

// Empty lists are the form's: the full form's treatments are context_bench_treatments(), its seeds
// 1, 2, 3; the CI form's seeds 1, 2.
struct ContextBenchOptions : StudyOptions {
  ContextBenchOptions() { out_dir = "runs/context-bench"; }
  std::string text_path;  // empty = data/kjv.txt, looked for in the current folder, then above the program
};

// The size and budget every model of one form shares, and the evaluation contexts.
struct ContextBenchSize : BenchModelSize {  // batch_size: windows per step, and per evaluation batch
  ContextBenchSize() { steps = 1000, warmup = 50, lr = 2e-3; }
  int64_t context = 32;  // C: bytes per training window
  std::vector<int64_t> multiples = {1, 2, 4, 8, 16};  // evaluation contexts m·C
  int64_t eval_tokens = 65536;  // held-out bytes scored per evaluation context (about)
};
ContextBenchSize context_bench_size(const ContextBenchOptions& options);

// The held-out seed (data.seed) every evaluation uses, whatever the model's training seed.
inline constexpr uint64_t kContextBenchEvalSeed = 1000;
// K of the eval command line for an evaluation context of `context` bytes: eval_tokens / (rows · context),
// at least 1.
int64_t context_bench_eval_batches(const ContextBenchSize& size, int64_t context);

// `relgrad eval CHECKPOINT --data.context=CONTEXT --data.seed=kContextBenchEvalSeed --batches=BATCHES`
// without the command: the checkpoint's run, its data at that context (the model keeps its own
// max_positions, as eval's overrides do), held-out batches 0 … BATCHES − 1.
EvalResult context_bench_eval(const std::string& checkpoint, int64_t context, int64_t batches);

// One model: held-out NLL (nats per byte) at each evaluation context (size.multiples' order).
struct ContextBenchRun {
  std::string treatment;
  uint64_t seed = 0;
  int64_t params = 0;
  std::vector<double> nll;
  std::vector<int64_t> tokens;  // bytes scored per context
  double train_loss = 0;        // the last logged training loss
  double seconds = 0;           // training and evaluation
};

struct ContextBenchResult : BenchResult {
  ContextBenchSize size;
  std::vector<ContextBenchRun> runs;  // per treatment, per seed
  std::string text_path;
  double unigram_nll = 0;  // the held-out split under the training split's byte frequencies (add-one)
  // Per evaluation context, the unigram NLL of the very bytes scored there: each context draws its own
  // held-out windows (shared by every model), so a whole column moves with the text it drew; this is
  // that text's difficulty, with no model.
  std::vector<double> scored_unigram_nll;
  double cpu_seconds = 0;  // processor time (std::clock): what it takes on an idle core, whatever the load
};

// Every treatment: none, the absolute encodings sinusoidal and learned (model.absolute_position; the
// learned table has a row for every evaluation position, rows past C untrained), then every registered
// scheme of decoder self-attention (every_treatment(false), train/instruments/recipe.h), each sized to C
// by its entry's fit (FitRule::HalfWindow, layers/schemes.h).
std::vector<std::string> context_bench_treatments();

// The tables: per treatment and evaluation context, NLL mean ± sd over seeds and its ratio to the 1×
// value (the mean over seeds of each seed's ratio).
std::string context_bench_table(const ContextBenchResult& result);
std::string context_bench_markdown(const ContextBenchResult& result, const ContextBenchOptions& options);
std::string context_bench_csv(const ContextBenchResult& result);  // one row per model and context
// What the CI form checks (robust at its size on every seed measured; docs/extrapolation.md says
// which). Empty when all hold; else one line per failure.
std::vector<std::string> context_bench_failures(const ContextBenchResult& result);

// Runs the bench, writes results.csv, results.md and context.svg into options.out_dir, prints progress
// and the table to `out`; returns 0 when every model trained (and, in the CI form, the checks held),
// 1 otherwise. Bad options (an unknown treatment, an empty out_dir, no text file) throw relgrad::Error
// "[context-bench] ..." naming them before any model trains (relgrad context-bench exits 2).
int run_context_bench(const ContextBenchOptions& options, std::ostream& out);

}  // namespace relgrad
