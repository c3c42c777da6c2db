// run_addition_bench's tables, files and CI checks (train/instruments/addition_bench.h).
#include <cmath>
#include <ostream>
#include <sstream>

#include "train/instruments/addition_bench.h"
#include "train/instruments/study_registry.h"
#include "train/instruments/bench_report.h"

namespace relgrad {

namespace {

using bench::fixed;

const TaskModelRun* find_run(const LengthBenchResult& r, const std::string& task, const std::string& treatment,
                               uint64_t seed) {
  for (const TaskModelRun& run : r.runs)
    if (run.task == task && run.treatment == treatment && run.seed == seed) return &run;
  return nullptr;
}

// Fragility: exact match (%) of every seed in bucket `bucket`, a column per seed (markdown).
std::string seed_table(const LengthBenchResult& r, const std::string& task, size_t bucket) {
  bench::Table table;
  for (uint64_t seed : r.seeds) table.columns.push_back("seed " + std::to_string(seed));
  for (const std::string& t : r.treatments) {
    bench::Table::Row row{t, {}};
    for (uint64_t seed : r.seeds) {
      const TaskModelRun* run = find_run(r, task, t, seed);
      row.cells.push_back(run ? fixed(100 * run->exact.at(bucket), 1) : "-");
    }
    table.rows.push_back(std::move(row));
  }
  bench::TableFormat markdown;
  markdown.markdown = true;
  return bench::render_table(table, markdown);
}

// The CI form's checks (addition_bench_failures), each held by a wide margin on seeds 1-24
// (docs/addition.md gives every seed's figures): every model fits the answer's layout in the training
// lengths, and RoPE falls beyond them. Whether fire-random keeps more than RoPE is shown, not asserted:
// at this budget the mean over three seeds ranges from -3.3 to 27.8 points.
constexpr double kTrainTokenFloor = 0.55;
constexpr double kRopeDrop = 0.10;

// A run's per-token accuracy over the buckets beyond training (index >= 1), their mean; NaN without one.
double beyond_training(const TaskModelRun& run) {
  double sum = 0;
  int n = 0;
  for (size_t b = 1; b < run.token.size(); ++b, ++n) sum += run.token[b];
  return n ? sum / n : NAN;
}

// The result restricted to one task and the treatments that ran on it (its tables' rows).
LengthBenchResult task_part(const LengthBenchResult& r, const std::string& task) {
  LengthBenchResult part = r;
  part.tasks = {task};
  part.treatments.clear();
  part.runs.clear();
  for (const std::string& t : r.treatments)
    for (const TaskModelRun& run : r.runs)
      if (run.task == task && run.treatment == t) {
        part.treatments.push_back(t);
        break;
      }
  for (const TaskModelRun& run : r.runs)
    if (run.task == task) part.runs.push_back(run);
  return part;
}

}  // namespace

std::string addition_bench_table(const LengthBenchResult& r) {
  std::string out;
  for (const std::string& task : r.tasks) out += length_bench_table(task_part(r, task));
  return out;
}

std::string addition_bench_markdown(const LengthBenchResult& r, const AdditionBenchOptions& o) {
  std::ostringstream out;
  const TaskModelSize& s = r.size;
  const auto& last = s.buckets.back();
  out << "# relgrad addition-bench (" << bench::form_name(r.full, r.resized, s.steps) << ")\n\n"
      << "Decimal addition, reversed (units first); seeds " << r.seeds.size() << ", " << s.steps
      << " steps per model, batch " << s.batch_size << ", d_model " << s.d_model << ", " << s.n_heads
      << " heads, " << s.layers << " layers; operands of " << s.train_min << "–" << s.train_max
      << " digits in training, up to " << last.second << " in test (" << fixed(double(last.second) / s.train_max, 2)
      << "×); " << addition_hint_symbols(s) << " index markers; randomised treatments L = "
      << s.random_positions_max << "; " << fixed(r.seconds, 0) << " s in all. Output: " << o.out_dir << ".\n\n";
  for (const std::string& task : r.tasks) {
    const LengthBenchResult part = task_part(r, task);
    out << "## " << task << "\n\nExact match (%), mean over seeds (min–max), by digits per operand:\n\n"
        << length_bench_task_table(part, task, true, true) << "\nPer-token accuracy (%):\n\n"
        << length_bench_task_table(part, task, false, true) << "\nExact match (%) at " << s.buckets[1].first
        << "–" << s.buckets[1].second << " digits (the first bucket past training), seed by seed:\n\n"
        << seed_table(part, task, 1) << "\n";
  }
  return out.str();
}

std::vector<std::string> addition_bench_failures(const LengthBenchResult& r) {
  std::vector<std::string> failures;
  for (const TaskModelRun& run : r.runs)  // every model fits the answer's layout (markers, EOS)
    if (!(run.token.at(0) >= kTrainTokenFloor))
      failures.push_back(run.task + " " + run.treatment + " seed " + std::to_string(run.seed) +
                         ": per-token accuracy in the training lengths " + fixed(100 * run.token[0], 1) + "% < " +
                         fixed(100 * kTrainTokenFloor, 0) + "%");
  for (const TaskModelRun& run : r.runs) {  // RoPE does not extrapolate: it loses ground past training
    if (run.treatment != "rope") continue;
    const double beyond = beyond_training(run);
    if (!(beyond <= run.token.at(0) - kRopeDrop))
      failures.push_back(run.task + " rope seed " + std::to_string(run.seed) +
                         ": per-token accuracy beyond training " + fixed(100 * beyond, 1) + "% is not " +
                         fixed(100 * kRopeDrop, 0) + " points below its " + fixed(100 * run.token[0], 1) +
                         "% in the training lengths");
  }
  return failures;
}

int run_addition_bench(const AdditionBenchOptions& options, std::ostream& out) {
  LengthBenchResult r = addition_bench_results(options, &out);
  for (const std::string& task : r.tasks)
    for (const std::string& p : length_bench_pictures(task_part(r, task), options.out_dir)) r.pictures.push_back(p);
  bench::write_results(options.out_dir, length_bench_csv(r), addition_bench_markdown(r, options), "addition-bench");
  out << addition_bench_table(r) << bench::written(options.out_dir, r.pictures) << "\n";
  return bench::form_verdict(r.full, r.resized, addition_bench_failures(r), out);
}

StudyEntry addition_bench_study() {
  StudyEntry e;
  e.name = "addition-bench";
  e.summary = "decimal addition with index hints: FIRE at random positions and the other schemes";
  e.synopsis = "[--full] [--treatments fire-random,rope,...] [--plain-treatments fire,rope,...] [--no-plain]\n"
               "[--seeds 1,2] [--steps N] [--out DIR]";
  e.full_help = "the documented run (docs/addition.md); default: the CI form";
  e.takes_tasks = false;
  e.treatments_help = "with index hints, comma-separated, e.g. fire,fire-random,rope (default: the form's)";
  e.seeds_help = "comma-separated seeds (default: 1,2,3)";
  e.out_help = "folder for the tables, pictures and checkpoints";
  e.flags = {{"--plain-treatments", StudyFlagKind::List,
              "without index hints, comma-separated (default: the form's; full: fire,fire-random,rope)"},
             {"--no-plain", StudyFlagKind::Switch, "no model without index hints"}};
  e.run = [](const StudyArgs& a, std::ostream& out) {
    AdditionBenchOptions o = bench_options<AdditionBenchOptions>(a);
    o.plain_treatments = a.list("--plain-treatments");
    o.plain = !a.has("--no-plain");
    return run_addition_bench(o, out);
  };
  return e;
}

}  // namespace relgrad
