// run_length_bench (train/instruments/length_bench.h): its forms, models, tables, pictures and CI checks.
#include "train/instruments/length_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "train/data/length_tasks.h"
#include "train/instruments/recipe.h"
#include "train/plot/plot.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "length-bench";

using bench::fixed;

// The longest decoder-only sequence (tokens) of any bucket of `task`.
int64_t longest_sequence(const TaskModelSize& s, LengthTaskKind task) {
  int64_t longest = 0;
  for (const auto& [lo, hi] : s.buckets) {
    LengthTaskConfig c;
    c.kind = task;
    c.min_len = lo;
    c.max_len = hi;
    longest = std::max(longest, LengthTaskData(c).max_sequence_length());
  }
  return longest;
}

// An unknown task or treatment, an empty out_dir: before any training (`relgrad length-bench`: exit 2).
void check_options(const LengthBenchOptions& o) {
  bench::check_known(kOp, "", "task", o.tasks, length_task_names());
  bench::check_known(kOp, "", "treatment", o.treatments, length_bench_treatments());
  RG_CHECK(!o.out_dir.empty(), kOp, "out_dir is empty");
}

// Trains and evaluates every model of `o` (progress lines to `progress`); no tables.
LengthBenchResult length_bench_results(LengthBenchOptions o, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  if (o.tasks.empty())
    o.tasks = o.full ? std::vector<std::string>{"copy", "reverse", "addition", "sorting", "parity"}
                     : std::vector<std::string>{"copy", "reverse"};
  if (o.treatments.empty())
    o.treatments =
        o.full ? every_treatment(/*randomised=*/true) : std::vector<std::string>{"none", "learned", "t5", "rope-random"};
  if (o.seeds.empty()) o.seeds = {1, 2, 3};
  check_options(o);
  std::filesystem::create_directories(o.out_dir);

  LengthBenchResult r;
  r.full = o.full;
  r.size = length_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, length_bench_size(o).steps != r.size.steps; }();
  r.tasks = o.tasks;
  r.treatments = o.treatments;
  r.seeds = o.seeds;
  const TaskModelSize& s = r.size;
  if (progress)
    *progress << "length-bench (" << bench::form_name(o.full, r.resized, s.steps)
              << "): " << bench::counted(o.tasks.size(), "task") << " x "
              << bench::counted(o.treatments.size(), "treatment") << " x " << bench::counted(o.seeds.size(), "seed")
              << ", " << s.steps << " steps each, train lengths " << s.train_min << "-" << s.train_max << "\n"
              << std::flush;
  std::vector<TaskModel> models;
  for (const std::string& task : o.tasks) {
    LengthTaskConfig train_data;
    train_data.kind = length_task_from_string(task);
    train_data.min_len = s.train_min;
    train_data.max_len = s.train_max;
    train_data.batch_size = s.batch_size;
    const int64_t train_tokens = LengthTaskData(train_data).max_sequence_length();
    for (const std::string& treatment : o.treatments)
      for (uint64_t seed : o.seeds) {
        train_data.seed = seed;
        TaskModel m{task, treatment, seed, std::make_shared<LengthTaskData>(train_data), train_tokens, {}, ""};
        for (const auto& [lo, hi] : s.buckets) {
          LengthTaskConfig c = train_data;
          c.min_len = lo;
          c.max_len = hi;
          c.batch_size = s.eval_rows;
          c.seed = seed + 1000;  // held-out inputs of their own stream, whatever the training seed saw
          m.buckets.push_back(std::make_shared<LengthTaskData>(c));
        }
        models.push_back(std::move(m));
      }
  }
  r.runs = run_task_models(kOp, s, models, o.out_dir, progress,
                           [&s](const TaskModelRun& run) { return bucket_line(s, run); });
  r.seconds = seconds_since(start);
  return r;
}

// The CI form's checks (length_bench_failures): measured margins in docs/length-generalisation.md.
constexpr double kTrainTokenFloor = 0.7;
constexpr double kBeyondMargin = 0.15;

// The mean per-token accuracy of (task, treatment, seed) over the buckets beyond training (index >= 1).
double beyond_training(const LengthBenchResult& r, const std::string& task, const std::string& treatment,
                       uint64_t seed) {
  const TaskModelRun* run = bench::find_run(r.runs, task, treatment, seed);
  if (!run) return NAN;
  double sum = 0;
  for (size_t b = 1; b < run->token.size(); ++b) sum += run->token[b];
  return run->token.size() > 1 ? sum / static_cast<double>(run->token.size() - 1) : NAN;
}

std::string length_bench_markdown(const LengthBenchResult& r, const std::string& out_dir) {
  std::ostringstream out;
  out << "# relgrad length-bench (" << bench::form_name(r.full, r.resized, r.size.steps) << ")\n\n"
      << "Seeds " << r.seeds.size() << ", " << r.size.steps << " steps per model, batch " << r.size.batch_size
      << ", d_model " << r.size.d_model << ", " << r.size.n_heads << " heads, " << r.size.layers
      << " layers; training input lengths " << r.size.train_min << "–" << r.size.train_max
      << "; randomised treatments L = " << r.size.random_positions_max << "; " << fixed(r.seconds, 0)
      << " s in all. Output: " << out_dir << ".\n\n";
  for (const std::string& task : r.tasks) {
    out << "## " << task << "\n\nExact match (%), mean over seeds (min–max), by input length:\n\n"
        << length_bench_task_table(r, task, true, true) << "\nPer-token accuracy (%):\n\n"
        << length_bench_task_table(r, task, false, true) << "\n";
  }
  return out.str();
}

}  // namespace

std::vector<std::string> length_bench_treatments() { return every_treatment(/*randomised=*/true); }

TaskModelSize length_bench_size(const LengthBenchOptions& o) {
  TaskModelSize s;
  if (o.full) {
    s.d_model = 64, s.n_heads = 4, s.d_ff = 256, s.layers = 2;
    s.batch_size = 32, s.steps = 3000, s.warmup = 200, s.lr = 1e-3;
    s.train_min = 1, s.train_max = 8;
    s.buckets = {{1, 8}, {9, 12}, {13, 16}, {17, 24}};
  } else {
    s.d_model = 32, s.n_heads = 2, s.d_ff = 64, s.layers = 2;
    s.batch_size = 32, s.steps = 1500, s.warmup = 100, s.lr = 3e-3;
    s.train_min = 1, s.train_max = 6;
    s.buckets = {{1, 6}, {7, 9}, {10, 12}};
  }
  s.eval_rows = 32, s.eval_batches = 2;
  bench::override_steps(o.steps, s.steps, s.warmup);
  int64_t longest = 0;
  for (const std::string& task : length_task_names())
    longest = std::max(longest, longest_sequence(s, length_task_from_string(task)));
  s.max_positions = std::max<int64_t>(64, longest);
  s.random_positions_max = s.max_positions;
  return s;
}

// One table (exact or per-token) for one task: rows treatments, columns buckets, "mean (min–max)" in %.
std::string length_bench_task_table(const LengthBenchResult& r, const std::string& task, bool exact,
                                    bool markdown) {
  std::vector<std::string> columns;
  for (size_t b = 0; b < r.size.buckets.size(); ++b)
    columns.push_back(std::to_string(r.size.buckets[b].first) + "-" + std::to_string(r.size.buckets[b].second) +
                      (b == 0 ? " (train)" : ""));
  return bench::spread_table(r.runs, task, r.treatments, columns, exact, bench::Score::Accuracy,
                             {markdown, 18, 16});
}

std::vector<std::string> length_bench_pictures(const LengthBenchResult& r, const std::string& out_dir) {
  std::vector<std::string> files;
  for (const std::string& task : r.tasks) {
    std::vector<PlotPanel> panels;
    for (bool exact : {true, false}) {
      PlotPanel panel;
      panel.title = task + ": " + (exact ? "exact match" : "per-token accuracy") + " by " + r.length_unit +
                    " (train " + std::to_string(r.size.train_min) + "-" + std::to_string(r.size.train_max) + ")";
      panel.x_label = "longest " + r.length_unit + " of the bucket";
      panel.y_label = exact ? "exact match" : "per-token accuracy";
      for (const std::string& t : r.treatments) {
        PlotSeries series;
        series.label = t;
        for (size_t b = 0; b < r.size.buckets.size(); ++b) {
          series.x.push_back(static_cast<double>(r.size.buckets[b].second));
          series.y.push_back(bench::seed_spread(r.runs, task, t, b, exact, bench::Score::Accuracy).mean);
        }
        panel.series.push_back(std::move(series));
      }
      panels.push_back(std::move(panel));
    }
    const std::string name = "length-" + task + ".svg";
    write_plot((std::filesystem::path(out_dir) / name).string(), panels);
    files.push_back(name);
  }
  return files;
}

std::string length_bench_table(const LengthBenchResult& r) {
  std::ostringstream out;
  out << r.heading << " (" << bench::form_name(r.full, r.resized, r.size.steps) << ", "
      << bench::counted(r.seeds.size(), "seed") << ", " << r.size.steps << " steps; d_model " << r.size.d_model
      << ", " << r.size.layers << " layers)\n";
  for (const std::string& task : r.tasks) {
    out << task << ": exact match %, mean over seeds (min-max), by " << r.length_unit << "\n"
        << length_bench_task_table(r, task, true, false);
    out << task << ": per-token accuracy %\n" << length_bench_task_table(r, task, false, false);
  }
  return out.str();
}

std::string length_bench_csv(const LengthBenchResult& r) {
  std::ostringstream out;
  out << "task,treatment,seed,bucket_lo,bucket_hi,exact,token,train_loss,seconds\n";
  for (const TaskModelRun& run : r.runs)
    for (size_t b = 0; b < run.exact.size(); ++b)
      out << run.task << "," << run.treatment << "," << run.seed << "," << r.size.buckets[b].first << ","
          << r.size.buckets[b].second << "," << fixed(run.exact[b], 4) << "," << fixed(run.token[b], 4) << ","
          << fixed(run.train_loss, 4) << "," << fixed(run.seconds, 1) << "\n";
  return out.str();
}

std::vector<std::string> length_bench_failures(const LengthBenchResult& r) {
  std::vector<std::string> failures;
  for (const std::string& task : r.tasks) {
    // Every model learns the training lengths (per token: exact match needs a longer budget).
    for (const TaskModelRun& run : r.runs)
      if (run.task == task && !(run.token.at(0) >= kTrainTokenFloor))
        failures.push_back(task + " " + run.treatment + " seed " + std::to_string(run.seed) +
                           ": per-token accuracy in the training lengths " + fixed(100 * run.token[0], 1) +
                           "% < " + fixed(100 * kTrainTokenFloor, 0) + "%");
    // Beyond the training lengths NoPE is ahead of learned absolute positions, every seed, by a margin.
    if (bench::known(r.treatments, "none") && bench::known(r.treatments, "learned"))
      for (uint64_t seed : r.seeds) {
        const double nope = beyond_training(r, task, "none", seed),
                     ape = beyond_training(r, task, "learned", seed);
        if (!(nope >= ape + kBeyondMargin))
          failures.push_back(task + " seed " + std::to_string(seed) +
                             ": none's per-token accuracy beyond training " + fixed(100 * nope, 1) +
                             "% is not " + fixed(100 * kBeyondMargin, 0) + " points above learned's " +
                             fixed(100 * ape, 1) + "%");
      }
  }
  return failures;
}

int run_length_bench(const LengthBenchOptions& options, std::ostream& out) {
  LengthBenchResult r = length_bench_results(options, &out);
  r.pictures = length_bench_pictures(r, options.out_dir);
  return bench::finish(kOp, options.out_dir,
                       {length_bench_table(r), length_bench_markdown(r, options.out_dir), length_bench_csv(r),
                        r.pictures, length_bench_failures(r)},
                       r.full, r.resized, out);
}

StudyEntry length_bench_study() {
  StudyEntry e;
  e.name = kOp;
  e.summary = "length generalisation of positional treatments on synthetic algorithmic tasks";
  e.synopsis = "[--full] [--tasks copy,reverse,...] [--treatments none,t5,...] [--seeds 1,2] [--steps N] [--out DIR]";
  e.full_help = "the documented run (about an hour on 2 cores); default: the CI form";
  e.tasks_help = "comma-separated: copy, reverse, addition, sorting, parity (default: the form's)";
  e.treatments_help = "comma-separated, e.g. none,t5,rope,seed (default: the form's)";
  e.seeds_help = "comma-separated seeds (default: 1,2,3)";
  e.out_help = "folder for the tables, pictures and checkpoints";
  e.check = [](const StudyArgs& a) { check_options(bench::options_of<LengthBenchOptions>(a)); };
  e.run = [](const StudyArgs& a, std::ostream& out) {
    return run_length_bench(bench::options_of<LengthBenchOptions>(a), out);
  };
  return e;
}

}  // namespace relgrad
