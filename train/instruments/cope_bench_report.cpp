// run_cope_bench's tables, files and CI checks (train/instruments/cope_bench.h).
#include <cmath>
#include <ostream>
#include <sstream>

#include "train/instruments/study_registry.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/cope_bench.h"

namespace relgrad {

namespace {

using bench::fixed;

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

// The error rate on one split of (task, treatment): mean, min and max over seeds.
bench::Spread error_spread(const CopeBenchResult& r, const std::string& task, const std::string& treatment,
                           size_t split, bool exact) {
  return bench::seed_spread(r.runs, task, treatment, split, exact, bench::Score::Error);
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

double error_of(const CopeBenchResult& r, const std::string& task, const std::string& treatment, uint64_t seed,
                size_t split) {
  for (const TaskModelRun& run : r.runs)
    if (run.task == task && run.treatment == treatment && run.seed == seed) return 1 - run.exact.at(split);
  return NAN;
}

size_t split_index(const CopeBenchTask& t, const std::string& name) {
  for (size_t k = 0; k < t.splits.size(); ++k)
    if (t.splits[k].name == name) return k;
  return t.splits.size();
}

}  // namespace

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
    const double e = error_of(r, "selective_copy", "cope", seed, 0);
    if (!(e <= kCopeCopyCeiling))
      failures.push_back("selective_copy cope seed " + std::to_string(seed) + ": error on the training split " +
                         fixed(100 * e, 1) + "% > " + fixed(100 * kCopeCopyCeiling, 0) + "%");
  }
  for (const std::string split : {"dense", "sparse"}) {
    const size_t k = split_index(copy, split);
    const double cope = error_spread(r, "selective_copy", "cope", k, true).mean;
    for (const std::string& other : r.treatments) {
      const double e = error_spread(r, "selective_copy", other, k, true).mean;
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
  bench::write_results(options.out_dir, cope_bench_csv(r), cope_bench_markdown(r, options), "cope-bench");
  out << cope_bench_table(r) << bench::written(options.out_dir, {}) << "\n";
  return bench::form_verdict(r.full, r.resized, cope_bench_failures(r), out);
}

namespace {

CopeBenchOptions cope_options(const StudyArgs& a) {
  CopeBenchOptions o = bench_options<CopeBenchOptions>(a);
  o.tasks = a.options.tasks;
  return o;
}

}  // namespace

StudyEntry cope_bench_study() {
  StudyEntry e;
  e.name = "cope-bench";
  e.summary = "CoPE's selective copy, counting and flip-flop, and PoPE's indirect indexing, by treatment";
  e.synopsis = "[--full] [--tasks selective_copy,counting,...] [--treatments cope,rope,...] [--seeds 1,2] [--steps N]\n"
               "[--out DIR]";
  e.full_help = "the documented run (docs/cope-tasks.md); default: the CI form";
  e.tasks_help = "comma-separated: selective_copy, counting, flip_flop, indirect_indexing (default: the form's)";
  e.treatments_help = "comma-separated, e.g. cope,rope,learned (default: the form's)";
  e.seeds_help = "comma-separated seeds (default: 1,2,3)";
  e.out_help = "folder for the tables and checkpoints";
  e.check = [](const StudyArgs& a) { check_cope_bench_options(cope_options(a)); };
  e.run = [](const StudyArgs& a, std::ostream& out) { return run_cope_bench(cope_options(a), out); };
  return e;
}

}  // namespace relgrad
