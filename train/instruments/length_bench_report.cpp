// run_length_bench's tables, files, pictures and CI checks (train/instruments/length_bench.h).
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "train/instruments/study_registry.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/length_bench.h"
#include "train/plot/plot.h"

namespace relgrad {

namespace {

using bench::fixed;

std::string bucket_name(const std::pair<int64_t, int64_t>& b) {
  return std::to_string(b.first) + "-" + std::to_string(b.second);
}

// One table (exact or per-token) for one task: rows treatments, columns buckets, "mean (min–max)" in %.
std::string task_table(const LengthBenchResult& r, const std::string& task, bool exact, bool markdown) {
  std::vector<std::string> columns;
  for (size_t b = 0; b < r.size.buckets.size(); ++b)
    columns.push_back(bucket_name(r.size.buckets[b]) + (b == 0 ? " (train)" : ""));
  return bench::spread_table(r.runs, task, r.treatments, columns, exact, bench::Score::Accuracy,
                             {markdown, 18, 16});
}

// Per task, exact match and per-token accuracy (means over seeds) against the bucket's longest input
// length, one line per treatment; into out_dir/length-<task>.svg.
std::vector<std::string> write_pictures(const LengthBenchResult& r, const std::string& out_dir) {
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

// The CI form's checks (length_bench_failures): measured margins in docs/length-generalisation.md.
constexpr double kTrainTokenFloor = 0.7;
constexpr double kBeyondMargin = 0.15;

// The mean per-token accuracy of (task, treatment, seed) over the buckets beyond training (index >= 1).
double beyond_training(const LengthBenchResult& r, const std::string& task, const std::string& treatment,
                       uint64_t seed) {
  for (const TaskModelRun& run : r.runs) {
    if (run.task != task || run.treatment != treatment || run.seed != seed) continue;
    double sum = 0;
    for (size_t b = 1; b < run.token.size(); ++b) sum += run.token[b];
    return run.token.size() > 1 ? sum / static_cast<double>(run.token.size() - 1) : NAN;
  }
  return NAN;
}

}  // namespace

std::string length_bench_task_table(const LengthBenchResult& r, const std::string& task, bool exact,
                                    bool markdown) {
  return task_table(r, task, exact, markdown);
}

std::vector<std::string> length_bench_pictures(const LengthBenchResult& r, const std::string& out_dir) {
  return write_pictures(r, out_dir);
}

std::string length_bench_table(const LengthBenchResult& r) {
  std::ostringstream out;
  out << r.heading << " (" << bench::form_name(r.full, r.resized, r.size.steps) << ", "
      << bench::counted(r.seeds.size(), "seed") << ", "
      << r.size.steps << " steps; d_model " << r.size.d_model << ", " << r.size.layers << " layers)\n";
  for (const std::string& task : r.tasks) {
    out << task << ": exact match %, mean over seeds (min-max), by " << r.length_unit << "\n"
        << task_table(r, task, true, false);
    out << task << ": per-token accuracy %\n" << task_table(r, task, false, false);
  }
  return out.str();
}

std::string length_bench_markdown(const LengthBenchResult& r, const LengthBenchOptions& o) {
  std::ostringstream out;
  out << "# relgrad length-bench (" << bench::form_name(r.full, r.resized, r.size.steps) << ")\n\n"
      << "Seeds " << r.seeds.size() << ", " << r.size.steps << " steps per model, batch " << r.size.batch_size
      << ", d_model " << r.size.d_model << ", " << r.size.n_heads << " heads, " << r.size.layers
      << " layers; training input lengths " << r.size.train_min << "–" << r.size.train_max
      << "; randomised treatments L = " << r.size.random_positions_max << "; " << fixed(r.seconds, 0)
      << " s in all. Output: " << o.out_dir << ".\n\n";
  for (const std::string& task : r.tasks) {
    out << "## " << task << "\n\nExact match (%), mean over seeds (min–max), by input length:\n\n"
        << task_table(r, task, true, true) << "\nPer-token accuracy (%):\n\n"
        << task_table(r, task, false, true) << "\n";
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
  r.pictures = write_pictures(r, options.out_dir);
  bench::write_results(options.out_dir, length_bench_csv(r), length_bench_markdown(r, options), "length-bench");
  out << length_bench_table(r) << bench::written(options.out_dir, r.pictures) << "\n";
  return bench::form_verdict(r.full, r.resized, length_bench_failures(r), out);
}

namespace {

LengthBenchOptions length_options(const StudyArgs& a) {
  LengthBenchOptions o = bench_options<LengthBenchOptions>(a);
  o.tasks = a.options.tasks;
  return o;
}

}  // namespace

StudyEntry length_bench_study() {
  StudyEntry e;
  e.name = "length-bench";
  e.summary = "length generalisation of positional treatments on synthetic algorithmic tasks";
  e.synopsis = "[--full] [--tasks copy,reverse,...] [--treatments none,t5,...] [--seeds 1,2] [--steps N] [--out DIR]";
  e.full_help = "the documented run (about an hour on 2 cores); default: the CI form";
  e.tasks_help = "comma-separated: copy, reverse, addition, sorting, parity (default: the form's)";
  e.treatments_help = "comma-separated, e.g. none,t5,rope,seed (default: the form's)";
  e.seeds_help = "comma-separated seeds (default: 1,2,3)";
  e.out_help = "folder for the tables, pictures and checkpoints";
  e.check = [](const StudyArgs& a) { check_length_bench_options(length_options(a)); };
  e.run = [](const StudyArgs& a, std::ostream& out) { return run_length_bench(length_options(a), out); };
  return e;
}

}  // namespace relgrad
