// `relgrad length-bench`: length generalisation of positional treatments on synthetic algorithmic
// tasks (copy, reverse, addition, sorting, parity; train/data/length_tasks.h), after Kazemnejad et al.
// 2023 (NoPE vs APE, T5, ALiBi, RoPE), Delétang et al. 2023 (train on short inputs, test on longer
// ones, accuracy per test length) and Ruoss et al. 2023 (randomised positions). Decoder-only models,
// one per task, treatment and seed, trained on inputs of the training range only; whole-answer exact
// match and per-token accuracy (greedy-free: teacher-forced argmax over the answer) per test-length
// bucket. docs/length-generalisation.md holds the protocol, the table and the papers' numbers.
//
// Every model is one of train/instruments/task_models.h: the path `relgrad train` takes, one OpenMP
// thread per model, on the study spine (a rerun into the same --out keeps the models already scored).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/bench_report.h"

namespace relgrad {

// Empty lists are the form's: the full form's tasks are copy, reverse, addition, sorting and parity,
// its treatments length_bench_treatments(); seeds 1, 2, 3.
struct LengthBenchOptions : StudyOptions {
  LengthBenchOptions() { out_dir = "runs/length-bench"; }
};

// The form's size (its buckets count input lengths) with options.steps applied.
TaskModelSize length_bench_size(const LengthBenchOptions& options);

// addition-bench's result too (its tasks are the two formats).
struct LengthBenchResult : BenchResult {
  TaskModelSize size;
  std::vector<TaskModelRun> runs;
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

// The tables: per task, exact match (%) per bucket, mean over seeds (and min–max), then per-token.
std::string length_bench_table(const LengthBenchResult& result);
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
// treatment, an empty out_dir) throw relgrad::Error before any model trains.
int run_length_bench(const LengthBenchOptions& options, std::ostream& out);

}  // namespace relgrad
