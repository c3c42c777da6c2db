// `relgrad length-bench`: length generalisation of positional treatments on synthetic algorithmic
// tasks (copy, reverse, addition, sorting, parity; train/data/length_tasks.h), after Kazemnejad et al.
// 2023 (NoPE vs APE, T5, ALiBi, RoPE), Delétang et al. 2023 (train on short inputs, test on longer
// ones, accuracy per test length) and Ruoss et al. 2023 (randomised positions). Decoder-only models,
// one per task, treatment and seed, trained on inputs of the training range only; whole-answer exact
// match and per-token accuracy (greedy-free: teacher-forced argmax over the answer) per test-length
// bucket. docs/length-generalisation.md holds the protocol, the table and the papers' numbers.
//
// Every model trains through the path `relgrad train` takes (trainer_options → Trainer, as
// train/instruments/music_bench.h describes), one OpenMP thread per run.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace relgrad {

class Dataset;

struct LengthBenchOptions {
  bool full = false;  // the documented run (about an hour on 2 cores); else the CI form
  std::vector<std::string>
      tasks;  // empty = the form's default (full: copy, reverse, addition, sorting, parity)
  std::vector<std::string> treatments;  // empty = the form's default (full: length_bench_treatments())
  std::vector<uint64_t> seeds;          // empty = 1, 2, 3
  int64_t steps = -1;                   // training steps per model; -1 = the form's default
  std::string out_dir = "runs/length-bench";  // results.csv, results.md, pictures, checkpoints
};

// The size and budget every model of one form shares, and the length buckets it is tested on.
struct LengthBenchSize {
  int64_t d_model = 64, n_heads = 4, d_ff = 256, layers = 2;
  int64_t batch_size = 32;
  int64_t steps = 600, warmup = 60;
  double lr = 1e-3;                      // AdamW, cosine to lr / 20, clip 1, weight decay 0.01, no dropout
  int64_t train_min = 1, train_max = 8;  // input lengths of training
  std::vector<std::pair<int64_t, int64_t>> buckets;  // test input lengths [lo, hi]; the first = training's
  int64_t eval_rows = 32, eval_batches = 2;          // held-out rows per bucket: rows × batches
  int64_t random_positions_max = 64;  // L of the randomised treatments (>= the longest test sequence)
  int64_t max_positions = 64;         // learned table rows (the longest test sequence, at least)
  int64_t cope_positions = 0;         // cope's embedded positions (0: the scheme's default, 64)
};
LengthBenchSize length_bench_size(const LengthBenchOptions& options);

// One model: accuracy per bucket (size.buckets' order), teacher-forced argmax over the answer and
// EOS. exact: the fraction of rows whose every answer token and EOS is right (the same as greedy
// decoding's exact match: greedy output equals the answer iff each teacher-forced step is right);
// token: the fraction of answer tokens and EOS right.
struct LengthBenchRun {
  std::string task, treatment;
  uint64_t seed = 0;
  std::vector<double> exact, token;
  double train_loss = 0;  // the last logged training loss
  double seconds = 0;
};

struct LengthBenchResult {
  bool full = false;
  bool resized = false;  // --steps changed the form's steps (bench::form_name)
  LengthBenchSize size;
  std::vector<std::string> tasks, treatments;
  std::vector<uint64_t> seeds;
  std::vector<LengthBenchRun> runs;
  std::vector<std::string> pictures;  // written under out_dir (relative to it)
  double seconds = 0;
  std::string length_unit = "input length";  // what a bucket's bounds count (the pictures' axis)
  std::string heading = "length generalisation";  // the text table's first words: what was measured
};

// Every treatment names its positional setup: none (NoPE), learned / sinusoidal (absolute), every
// registered scheme of decoder self-attention (layers/schemes.h, each sized to the training sequences
// by its entry's fit, FitRule::WindowEdge), and the randomised variants learned-random,
// sinusoidal-random, rope-random, fire-random, … (random_positions_max = size.random_positions_max;
// trained at a sorted random subset of [0, L) per batch and evaluated the same way, as Ruoss et al.'s
// released code, not at 0 … T − 1): every_treatment(true), train/instruments/recipe.h. The full form
// runs every one.
std::vector<std::string> length_bench_treatments();

// One model as length_bench_results trains and scores it, for a bench on other data (the addition bench):
// `treatment` at `seed` trained for size.steps on `train` (its vocabulary sizes the model; train_tokens,
// its longest sequence, sizes the relative schemes as length-bench's), through trainer_options → Trainer
// (checkpoint under out_dir/runs/TASK-TREATMENT-sSEED), then scored on size.eval_batches held-out
// batches of each of `buckets` (one per size.buckets entry, in that order); one progress line.
struct LengthBenchModel {
  std::string task, treatment;
  uint64_t seed = 0;
  std::shared_ptr<Dataset> train;
  int64_t train_tokens = 0;
  std::vector<std::shared_ptr<const Dataset>> buckets;
};
LengthBenchRun length_bench_run(const LengthBenchSize& size, const LengthBenchModel& model,
                                const std::string& out_dir, std::ostream* progress);

// What length_bench_results refuses before any training: an unknown task or treatment, an empty out_dir
// (relgrad::Error; `relgrad length-bench` reports it as a usage error, exit 2, as the other benches).
void check_length_bench_options(const LengthBenchOptions& options);

// Trains and evaluates every model of `options` (progress lines to `progress`, may be null) and
// writes the pictures into options.out_dir; no tables.
LengthBenchResult length_bench_results(const LengthBenchOptions& options, std::ostream* progress);
// The tables: per task, exact match (%) per bucket, mean over seeds (and min–max), then per-token.
std::string length_bench_table(const LengthBenchResult& result);
std::string length_bench_markdown(const LengthBenchResult& result, const LengthBenchOptions& options);
std::string length_bench_csv(const LengthBenchResult& result);  // one row per model and bucket
// One task's table of them, markdown or text: rows treatments, columns buckets (the first marked train).
std::string length_bench_task_table(const LengthBenchResult& result, const std::string& task, bool exact,
                                    bool markdown);
// Per task, exact match and per-token accuracy (means over seeds) against each bucket's upper bound, a
// line per treatment, into out_dir/length-TASK.svg; returns the file names.
std::vector<std::string> length_bench_pictures(const LengthBenchResult& result, const std::string& out_dir);
// What the CI form checks (robust at its size on every seed measured; docs/length-generalisation.md
// says which). Empty when all hold; else one line per failure.
std::vector<std::string> length_bench_failures(const LengthBenchResult& result);

// Runs the bench, prints progress and the tables to `out`; returns 0 when every model trained (and,
// in the CI form, the robust outcome it asserts held), 1 otherwise. Errors (an unknown task or
// treatment, an empty seed list entry) throw relgrad::Error.
int run_length_bench(const LengthBenchOptions& options, std::ostream& out);

}  // namespace relgrad
