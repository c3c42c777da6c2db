// run_cope_bench's forms and training (train/instruments/cope_bench.h); the tables, files and CI
// checks are in cope_bench_report.cpp.
#include "train/instruments/cope_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "cope-bench";

using bench::joined;
using bench::known;

PositionTaskConfig task_config(PositionTaskKind kind) {
  PositionTaskConfig c;
  c.kind = kind;
  return c;
}

// The splits of each task at a size: `copy` digits among as many blanks (dense: half, sparse: twice);
// counting programs of up to `steps` statements over `variables` variables (long: steps + 1 … 2·steps);
// flip-flop strings of `flip` tokens at p_i = 0.8 (sparse 0.98, dense 0.1: Liu et al.'s tails); lists of
// `list_lo` … `list_hi` letters (long: list_hi + 1 … 26) with shifts up to 4.
std::vector<CopeBenchTask> tasks_at(int64_t copy, int64_t steps, int64_t variables, int64_t flip, int64_t list_lo,
                                    int64_t list_hi) {
  std::vector<CopeBenchTask> tasks;
  CopeBenchTask t;
  PositionTaskConfig c = task_config(PositionTaskKind::SelectiveCopy);
  c.symbols = copy;
  t = {c.kind, {}};
  for (const auto& [name, blanks] : std::vector<std::pair<std::string, int64_t>>{
           {"train", copy}, {"dense", copy / 2}, {"sparse", 2 * copy}}) {
    c.blanks = blanks;
    t.splits.push_back({name, c});
  }
  tasks.push_back(t);

  c = task_config(PositionTaskKind::Counting);
  c.variables = variables;
  c.max_steps = steps;
  t = {c.kind, {{"train", c}}};
  c.min_steps = steps + 1;
  c.max_steps = 2 * steps;
  t.splits.push_back({"long", c});
  tasks.push_back(t);

  c = task_config(PositionTaskKind::FlipFlop);
  c.length = flip;
  t = {c.kind, {}};
  for (const auto& [name, ignore] :
       std::vector<std::pair<std::string, double>>{{"train", 0.8}, {"sparse", 0.98}, {"dense", 0.1}}) {
    c.ignore = ignore;
    t.splits.push_back({name, c});
  }
  tasks.push_back(t);

  c = task_config(PositionTaskKind::IndirectIndexing);
  c.min_len = list_lo;
  c.max_len = list_hi;
  c.max_shift = 4;
  t = {c.kind, {{"train", c}}};
  c.min_len = list_hi + 1;
  c.max_len = 26;
  t.splits.push_back({"long", c});
  tasks.push_back(t);
  return tasks;
}

// The longest training sequence of `data` (tokens) over its first batches: what the relative schemes
// are sized to, as length-bench sizes them to its training lengths.
int64_t longest_training_sequence(const PositionTaskData& data) {
  int64_t longest = 0;
  for (int64_t n = 0; n < 16; ++n) longest = std::max(longest, data.batch(n, Split::Train).tokens.size(1));
  return longest;
}

// A split's name and data parameters, for the models' fingerprints.
std::string split_text(const CopeBenchSplit& split) {
  const PositionTaskConfig& c = split.data;
  std::ostringstream out;
  out << split.name << " " << kPositionTaskNames.name(c.kind) << " " << c.symbols << " " << c.blanks << " "
      << c.min_steps << "-" << c.max_steps << " " << c.variables << " " << c.length << " " << c.ignore << " "
      << c.min_len << "-" << c.max_len << " " << c.max_shift << "; ";
  return out.str();
}

}  // namespace

const CopeBenchTask& CopeBenchSize::task(PositionTaskKind kind) const {
  for (const CopeBenchTask& t : tasks)
    if (t.kind == kind) return t;
  RG_CHECK(false, kOp, "no task ", kPositionTaskNames.name(kind), " at this size");
  return tasks.front();
}

const std::vector<std::string>& cope_bench_full_treatments() {
  static const std::vector<std::string> t = {"none", "learned", "sinusoidal", "t5",   "seed",           "shaw",
                                             "alibi", "rope",   "cope",       "fox", "stick_breaking", "pope"};
  return t;
}

CopeBenchSize cope_bench_size(const CopeBenchOptions& o) {
  CopeBenchSize s;
  TaskModelSize& m = s.model;
  if (o.full) {
    m.d_model = 64, m.n_heads = 4, m.d_ff = 256, m.layers = 2;
    m.batch_size = 32, m.steps = 1500, m.warmup = 100, m.lr = 2e-3;
    s.tasks = tasks_at(8, 24, 3, 40, 8, 16);
    m.eval_rows = 64, m.eval_batches = 2;
  } else {
    m.d_model = 32, m.n_heads = 2, m.d_ff = 64, m.layers = 2;
    m.batch_size = 32, m.steps = 800, m.warmup = 60, m.lr = 3e-3;
    s.tasks = tasks_at(6, 16, 1, 32, 6, 10);
    m.eval_rows = 32, m.eval_batches = 2;
  }
  bench::override_steps(o.steps, m.steps, m.warmup);
  int64_t longest = 0, splits = 0;
  for (const CopeBenchTask& t : s.tasks) {
    splits = std::max<int64_t>(splits, static_cast<int64_t>(t.splits.size()));
    for (const CopeBenchSplit& split : t.splits)
      longest = std::max(longest, PositionTaskData(split.data).max_sequence_length());
  }
  m.max_positions = std::max<int64_t>(64, longest);
  m.random_positions_max = m.max_positions;
  m.cope_positions = longest + 1;  // positions 0 … the longest sequence: no clamp (the authors' block + 1)
  return s;
}

void check_cope_bench_options(const CopeBenchOptions& o) {
  const std::vector<std::string> task_names = kPositionTaskNames.names();
  for (const std::string& t : o.tasks)
    RG_CHECK(known(task_names, t), kOp, "--tasks: unknown task '", t, "' (", joined(task_names), ")");
  for (const std::string& t : o.treatments)
    RG_CHECK(known(every_treatment(true), t), kOp, "--treatments: unknown treatment '", t, "' (",
             joined(every_treatment(true)), ")");
  RG_CHECK(!o.out_dir.empty(), kOp, "--out is empty");
}

CopeBenchResult cope_bench_results(const CopeBenchOptions& options, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  CopeBenchOptions o = options;
  const std::vector<std::string> task_names = kPositionTaskNames.names();
  if (o.tasks.empty())
    o.tasks = o.full ? task_names : std::vector<std::string>{"selective_copy"};
  if (o.treatments.empty())
    o.treatments = o.full ? cope_bench_full_treatments() : std::vector<std::string>{"cope", "rope", "learned"};
  if (o.seeds.empty()) o.seeds = {1, 2, 3};
  check_cope_bench_options(o);
  std::filesystem::create_directories(o.out_dir);

  CopeBenchResult r;
  r.full = o.full;
  r.size = cope_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, cope_bench_size(o).model.steps != r.size.model.steps; }();
  r.tasks = o.tasks;
  r.treatments = o.treatments;
  r.seeds = o.seeds;
  const TaskModelSize& m = r.size.model;
  if (progress)
    *progress << "cope-bench (" << bench::form_name(o.full, r.resized, m.steps)
              << "): " << bench::counted(o.tasks.size(), "task") << " x "
              << bench::counted(o.treatments.size(), "treatment") << " x " << bench::counted(o.seeds.size(), "seed")
              << ", " << m.steps
              << " steps each\n"
              << std::flush;
  // No buckets of lengths: each model is scored on its task's splits, in order.
  TaskModelSize size = m;
  size.buckets.clear();
  std::vector<TaskModel> models;
  for (const std::string& name : o.tasks) {
    const CopeBenchTask& task = r.size.task(*kPositionTaskNames.find(name));
    for (const std::string& treatment : o.treatments)
      for (uint64_t seed : o.seeds) {
        PositionTaskConfig train = task.splits.front().data;
        train.batch_size = m.batch_size;
        train.seed = seed;
        TaskModel model;
        model.task = name;
        model.treatment = treatment;
        model.seed = seed;
        auto data = std::make_shared<PositionTaskData>(train);
        model.train_tokens = longest_training_sequence(*data);
        model.train = data;
        for (const CopeBenchSplit& split : task.splits) {
          PositionTaskConfig c = split.data;
          c.batch_size = m.eval_rows;
          c.seed = seed + 1000;  // held-out rows of their own stream, whatever the training seed saw
          model.buckets.push_back(std::make_shared<PositionTaskData>(c));
          model.data += split_text(split);
        }
        models.push_back(std::move(model));
      }
  }
  const TaskModelLine line = [&r](const TaskModelRun& run) {
    const CopeBenchTask& task = r.size.task(*kPositionTaskNames.find(run.task));
    std::string text = run.task + " " + run.treatment + " seed " + std::to_string(run.seed) + ": error %";
    for (size_t k = 0; k < task.splits.size(); ++k)
      text += " " + task.splits[k].name + " " + std::to_string(std::lround(100 * (1 - run.exact[k])));
    return text;
  };
  r.runs = run_task_models(kOp, size, models, o.out_dir, progress, line);
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace relgrad
