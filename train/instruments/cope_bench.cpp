// run_cope_bench (train/instruments/cope_bench.h): its forms, models, tables and CI checks.
#include "train/instruments/cope_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "train/instruments/recipe.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "cope-bench";

using bench::fixed;

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

// An unknown task or treatment, an empty out_dir: before any training (`relgrad cope-bench`: exit 2).
void check_options(const CopeBenchOptions& o) {
  bench::check_known(kOp, "--tasks: ", "task", o.tasks, kPositionTaskNames.names());
  bench::check_known(kOp, "--treatments: ", "treatment", o.treatments, every_treatment(true));
  RG_CHECK(!o.out_dir.empty(), kOp, "--out is empty");
}

// Trains and scores every model of `o` (a progress line per model to `progress`, may be null).
CopeBenchResult cope_bench_results(CopeBenchOptions o, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  if (o.tasks.empty())
    o.tasks = o.full ? kPositionTaskNames.names() : std::vector<std::string>{"selective_copy"};
  if (o.treatments.empty())
    o.treatments = o.full ? std::vector<std::string>{"none", "learned", "sinusoidal", "t5", "seed", "shaw", "alibi",
                                                     "rope", "cope", "fox", "stick_breaking", "pope"}
                          : std::vector<std::string>{"cope", "rope", "learned"};
  if (o.seeds.empty()) o.seeds = {1, 2, 3};
  check_options(o);
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
        auto data = std::make_shared<PositionTaskData>(train);
        TaskModel model{name, treatment, seed, data, longest_training_sequence(*data), {}, ""};
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

const CopeBenchTask& task_of(const CopeBenchResult& r, const std::string& name) {
  return r.size.task(*kPositionTaskNames.find(name));
}

// What a split holds, for the tables' notes.
std::string describe(const CopeBenchSplit& s) {
  const PositionTaskConfig& c = s.data;
  switch (c.kind) {
    case PositionTaskKind::SelectiveCopy:
      return std::to_string(c.symbols) + " digits among " + std::to_string(c.blanks) + " blanks";
    case PositionTaskKind::Counting:
      return std::to_string(c.min_steps) + "–" + std::to_string(c.max_steps) + " statements, " +
             std::to_string(c.variables) + (c.variables == 1 ? " variable" : " variables");
    case PositionTaskKind::FlipFlop:
      return std::to_string(c.length) + " tokens, p_i = " + fixed(c.ignore, 2);
    case PositionTaskKind::IndirectIndexing:
      return "lists of " + std::to_string(c.min_len) + "–" + std::to_string(c.max_len) + " letters, shifts ±1–" +
             std::to_string(c.max_shift);
  }
  return "";
}

// One task's table: rows treatments, columns splits, "mean (min–max)" error in %.
std::string task_table(const CopeBenchResult& r, const std::string& task, bool exact, bool markdown) {
  const CopeBenchTask& t = task_of(r, task);
  std::vector<std::string> columns;
  for (size_t k = 0; k < t.splits.size(); ++k)
    columns.push_back(t.splits[k].name + (markdown && k == 0 ? " (in-dist)" : ""));
  return bench::spread_table(r.runs, task, r.treatments, columns, exact, bench::Score::Error, {markdown, 16, 20});
}

// The CI form's checks (cope_bench_failures); the margins measured are in docs/cope-tasks.md.
constexpr double kCopeCopyCeiling = 0.1;  // CoPE's error on selective_copy's training split, every seed
constexpr double kCopeCopyMargin = 0.3;   // its mean error on dense and sparse below every other treatment's by

size_t split_index(const CopeBenchTask& t, const std::string& name) {
  for (size_t k = 0; k < t.splits.size(); ++k)
    if (t.splits[k].name == name) return k;
  return t.splits.size();
}

}  // namespace

const CopeBenchTask& CopeBenchSize::task(PositionTaskKind kind) const {
  for (const CopeBenchTask& t : tasks)
    if (t.kind == kind) return t;
  RG_CHECK(false, kOp, "no task ", kPositionTaskNames.name(kind), " at this size");
  return tasks.front();
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

std::string cope_bench_table(const CopeBenchResult& r) {
  std::ostringstream out;
  out << "CoPE's tasks and indirect indexing (" << bench::form_name(r.full, r.resized, r.size.model.steps) << ", "
      << bench::counted(r.seeds.size(), "seed") << ", " << r.size.model.steps << " steps; d_model " << r.size.model.d_model << ", " << r.size.model.layers
      << " layers)\n";
  for (const std::string& task : r.tasks) {
    out << task << ": error rate %, mean over seeds (min-max)\n" << task_table(r, task, true, false);
    out << task << ": per-token error rate %\n" << task_table(r, task, false, false);
  }
  return out.str();
}

std::string cope_bench_markdown(const CopeBenchResult& r, const CopeBenchOptions& o) {
  const TaskModelSize& m = r.size.model;
  std::ostringstream out;
  out << "# relgrad cope-bench (" << bench::form_name(r.full, r.resized, m.steps) << ")\n\n"
      << "Seeds " << r.seeds.size() << ", " << m.steps << " steps per model, batch " << m.batch_size << ", d_model "
      << m.d_model << ", " << m.n_heads << " heads, " << m.layers << " layers; " << m.eval_rows * m.eval_batches
      << " held-out rows per split; " << fixed(r.seconds, 0) << " s in all. Output: " << o.out_dir << ".\n\n";
  for (const std::string& task : r.tasks) {
    const CopeBenchTask& t = task_of(r, task);
    out << "## " << task << "\n\n";
    for (const CopeBenchSplit& s : t.splits) out << "- " << s.name << ": " << describe(s) << "\n";
    out << "\nError rate (%): a row is an error unless every scored token is right; mean over seeds (min–max):\n\n"
        << task_table(r, task, true, true) << "\nPer-token error rate (%):\n\n"
        << task_table(r, task, false, true) << "\n";
  }
  return out.str();
}

std::string cope_bench_csv(const CopeBenchResult& r) {
  std::ostringstream out;
  out << "task,treatment,seed,split,error,token_error,train_loss,seconds\n";
  for (const TaskModelRun& run : r.runs) {
    const CopeBenchTask& t = task_of(r, run.task);
    for (size_t k = 0; k < run.exact.size(); ++k)
      out << run.task << "," << run.treatment << "," << run.seed << "," << t.splits.at(k).name << ","
          << fixed(1 - run.exact[k], 4) << "," << fixed(1 - run.token[k], 4) << "," << fixed(run.train_loss, 4) << ","
          << fixed(run.seconds, 1) << "\n";
  }
  return out.str();
}

std::vector<std::string> cope_bench_failures(const CopeBenchResult& r) {
  std::vector<std::string> failures;
  if (!bench::known(r.tasks, "selective_copy") || !bench::known(r.treatments, "cope")) return failures;
  const CopeBenchTask& copy = task_of(r, "selective_copy");
  for (uint64_t seed : r.seeds) {
    const TaskModelRun* run = bench::find_run(r.runs, "selective_copy", "cope", seed);
    const double e = run ? 1 - run->exact.at(0) : NAN;
    if (!(e <= kCopeCopyCeiling))
      failures.push_back("selective_copy cope seed " + std::to_string(seed) + ": error on the training split " +
                         fixed(100 * e, 1) + "% > " + fixed(100 * kCopeCopyCeiling, 0) + "%");
  }
  for (const std::string split : {"dense", "sparse"}) {
    const size_t k = split_index(copy, split);
    const double cope = bench::seed_spread(r.runs, "selective_copy", "cope", k, true, bench::Score::Error).mean;
    for (const std::string& other : r.treatments) {
      const double e = bench::seed_spread(r.runs, "selective_copy", other, k, true, bench::Score::Error).mean;
      if (other != "cope" && !(cope <= e - kCopeCopyMargin))
        failures.push_back("selective_copy " + split + ": cope's mean error " + fixed(100 * cope, 1) +
                           "% is not " + fixed(100 * kCopeCopyMargin, 0) + " points below " + other + "'s " +
                           fixed(100 * e, 1) + "%");
    }
  }
  return failures;
}

int run_cope_bench(const CopeBenchOptions& options, std::ostream& out) {
  const CopeBenchResult r = cope_bench_results(options, &out);
  return bench::finish(kOp, options.out_dir,
                       {cope_bench_table(r), cope_bench_markdown(r, options), cope_bench_csv(r), {}, cope_bench_failures(r)},
                       r.full, r.resized, out);
}

StudyEntry cope_bench_study() {
  StudyEntry e;
  e.name = kOp;
  e.summary = "CoPE's selective copy, counting and flip-flop, and PoPE's indirect indexing, by treatment";
  e.synopsis = "[--full] [--tasks selective_copy,counting,...] [--treatments cope,rope,...] [--seeds 1,2] [--steps N]\n"
               "[--out DIR]";
  e.full_help = "the documented run (docs/cope-tasks.md); default: the CI form";
  e.tasks_help = "comma-separated: selective_copy, counting, flip_flop, indirect_indexing (default: the form's)";
  e.treatments_help = "comma-separated, e.g. cope,rope,learned (default: the form's)";
  e.seeds_help = "comma-separated seeds (default: 1,2,3)";
  e.out_help = "folder for the tables and checkpoints";
  e.check = [](const StudyArgs& a) { check_options(bench::options_of<CopeBenchOptions>(a)); };
  e.run = [](const StudyArgs& a, std::ostream& out) {
    return run_cope_bench(bench::options_of<CopeBenchOptions>(a), out);
  };
  return e;
}

}  // namespace relgrad
