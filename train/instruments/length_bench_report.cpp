// run_length_bench's tables, files, pictures and CI checks (train/instruments/length_bench.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/instruments/length_bench.h"
#include "train/plot/plot.h"

namespace relgrad {

namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string bucket_name(const std::pair<int64_t, int64_t>& b) {
  return std::to_string(b.first) + "-" + std::to_string(b.second);
}

// Mean, min and max over seeds of one (task, treatment)'s bucket values; none when no run matched.
struct Spread {
  double mean = NAN, lo = NAN, hi = NAN;
  int n = 0;
};
Spread spread(const LengthBenchResult& r, const std::string& task, const std::string& treatment,
              size_t bucket, bool exact) {
  Spread s;
  double sum = 0;
  for (const LengthBenchRun& run : r.runs) {
    if (run.task != task || run.treatment != treatment) continue;
    const double v = (exact ? run.exact : run.token).at(bucket);
    s.lo = s.n ? std::min(s.lo, v) : v;
    s.hi = s.n ? std::max(s.hi, v) : v;
    sum += v;
    ++s.n;
  }
  if (s.n) s.mean = sum / s.n;
  return s;
}

// One table (exact or per-token) for one task: rows treatments, columns buckets, "mean (min–max)" in %.
std::string task_table(const LengthBenchResult& r, const std::string& task, bool exact, bool markdown) {
  std::ostringstream out;
  const auto& buckets = r.size.buckets;
  if (markdown) {
    out << "| treatment |";
    for (size_t b = 0; b < buckets.size(); ++b)
      out << " " << bucket_name(buckets[b]) << (b == 0 ? " (train)" : "") << " |";
    out << "\n|---|";
    for (size_t b = 0; b < buckets.size(); ++b) out << "---:|";
    out << "\n";
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-18s", "treatment");
    out << buf;
    for (size_t b = 0; b < buckets.size(); ++b) {
      std::snprintf(buf, sizeof buf, "%16s", (bucket_name(buckets[b]) + (b == 0 ? " (train)" : "")).c_str());
      out << buf;
    }
    out << "\n";
  }
  for (const std::string& t : r.treatments) {
    if (markdown)
      out << "| " << t << " |";
    else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "  %-18s", t.c_str());
      out << buf;
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
      const Spread s = spread(r, task, t, b, exact);
      std::string cell = s.n == 0 ? "-" : fixed(100 * s.mean, 1);
      if (s.n > 1) cell += " (" + fixed(100 * s.lo, 1) + "–" + fixed(100 * s.hi, 1) + ")";
      if (markdown)
        out << " " << cell << " |";
      else {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%16s", cell.c_str());
        out << buf;
      }
    }
    out << "\n";
  }
  return out.str();
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
          series.y.push_back(spread(r, task, t, b, exact).mean);
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
  for (const LengthBenchRun& run : r.runs) {
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
  out << "length generalisation (" << (r.full ? "full" : "CI") << " form, " << r.seeds.size() << " seeds, "
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
  out << "# relgrad length-bench (" << (r.full ? "full" : "CI") << " form)\n\n"
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
  for (const LengthBenchRun& run : r.runs)
    for (size_t b = 0; b < run.exact.size(); ++b)
      out << run.task << "," << run.treatment << "," << run.seed << "," << r.size.buckets[b].first << ","
          << r.size.buckets[b].second << "," << fixed(run.exact[b], 4) << "," << fixed(run.token[b], 4) << ","
          << fixed(run.train_loss, 4) << "," << fixed(run.seconds, 1) << "\n";
  return out.str();
}

std::vector<std::string> length_bench_failures(const LengthBenchResult& r) {
  std::vector<std::string> failures;
  const auto has = [&](const std::string& t) {
    return std::find(r.treatments.begin(), r.treatments.end(), t) != r.treatments.end();
  };
  for (const std::string& task : r.tasks) {
    // Every model learns the training lengths (per token: exact match needs a longer budget).
    for (const LengthBenchRun& run : r.runs)
      if (run.task == task && !(run.token.at(0) >= kTrainTokenFloor))
        failures.push_back(task + " " + run.treatment + " seed " + std::to_string(run.seed) +
                           ": per-token accuracy in the training lengths " + fixed(100 * run.token[0], 1) +
                           "% < " + fixed(100 * kTrainTokenFloor, 0) + "%");
    // Beyond the training lengths NoPE is ahead of learned absolute positions, every seed, by a margin.
    if (has("none") && has("learned"))
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
  const std::filesystem::path dir(options.out_dir);
  write_file_atomic((dir / "results.csv").string(), length_bench_csv(r), "length-bench");
  write_file_atomic((dir / "results.md").string(), length_bench_markdown(r, options), "length-bench");
  out << length_bench_table(r);
  out << "wrote " << (dir / "results.csv").string() << ", " << (dir / "results.md").string();
  for (const std::string& p : r.pictures) out << ", " << (dir / p).string();
  out << "\n";
  if (r.full) return 0;
  const std::vector<std::string> failures = length_bench_failures(r);
  for (const std::string& f : failures) out << "CI check failed: " << f << "\n";
  if (failures.empty()) out << "CI checks hold\n";
  return failures.empty() ? 0 : 1;
}

}  // namespace relgrad
