// `relgrad cope-bench`: positional treatments on tasks where a token must be found by what it is and
// then by where it is (train/data/position_tasks.h): CoPE's selective copy, counting and flip-flop
// (Golovneva et al. 2024, arXiv 2405.18719, §4), each in distribution and in the out-of-distribution
// forms the paper names (sparser or denser relevant tokens, longer programs), and PoPE's indirect
// indexing (Gopalakrishnan et al. 2025, arXiv 2509.10534). Decoder-only models, one per task, treatment
// and seed, trained on the task's training distribution only and scored on held-out rows of each split;
// the papers report error rates, so the tables do too. docs/cope-tasks.md holds the protocol, the
// tables and the papers' numbers.
//
// Every model trains and is scored as the synthetic-task benches' models (train/instruments/task_models.h).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/data/position_tasks.h"
#include "train/instruments/bench_report.h"

namespace relgrad {

// Empty lists are the form's: the full form runs all four tasks (position_tasks.h names) and CoPE
// against NoPE, absolute positions (learned, sinusoidal), T5's buckets, the seed's and Shaw's tables,
// ALiBi, RoPE, FoX, stick-breaking and PoPE (Huang's table is left out: under causal attention it is the
// seed's model to the last bit, docs/length-generalisation.md says why; any of every_treatment(true),
// train/instruments/recipe.h, may be asked for); seeds 1, 2, 3.
struct CopeBenchOptions : StudyOptions {
  CopeBenchOptions() { out_dir = "runs/cope-bench"; }
};

// A task's held-out distributions: the first is the training distribution ("train"), the others its
// out-of-distribution forms (e.g. flip_flop "sparse" p_i = 0.98).
struct CopeBenchSplit {
  std::string name;
  PositionTaskConfig data;  // seed and batch_size are set per model (held-out rows of their own stream)
};
struct CopeBenchTask {
  PositionTaskKind kind = PositionTaskKind::SelectiveCopy;
  std::vector<CopeBenchSplit> splits;
};

// The form's model, budget and tasks (model.buckets is empty: each model is scored on its task's
// splits, train/instruments/task_models.h); model.max_positions and model.cope_positions cover the longest
// sequence of any split, as the CoPE authors' code sizes its position table to the block.
struct CopeBenchSize {
  TaskModelSize model;
  std::vector<CopeBenchTask> tasks;  // every task of the form, in kPositionTaskNames' order
  const CopeBenchTask& task(PositionTaskKind kind) const;  // checked
};
CopeBenchSize cope_bench_size(const CopeBenchOptions& options);

struct CopeBenchResult : BenchResult {
  CopeBenchSize size;
  std::vector<TaskModelRun> runs;  // exact / token per split, in the task's split order
};

// Per task, the error rate (%) on each split: 100 − exact match (a row is an error unless every scored
// token is right), mean over seeds (min–max); then the per-token error rate.
std::string cope_bench_table(const CopeBenchResult& result);
std::string cope_bench_markdown(const CopeBenchResult& result, const CopeBenchOptions& options);
std::string cope_bench_csv(const CopeBenchResult& result);  // one row per model and split
// What the CI form checks (robust at its size on every seed measured; docs/cope-tasks.md says which).
// Empty when all hold; else one line per failure.
std::vector<std::string> cope_bench_failures(const CopeBenchResult& result);

// Runs the bench, prints progress and the tables to `out`, writes results.csv and results.md into
// options.out_dir; returns 0 when every model trained (and, in the CI form, its checks held), else 1.
// Bad options (an unknown task or treatment, an empty out_dir) throw relgrad::Error naming the option
// and the value before any model trains.
int run_cope_bench(const CopeBenchOptions& options, std::ostream& out);

}  // namespace relgrad
