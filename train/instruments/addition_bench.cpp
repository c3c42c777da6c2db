// run_addition_bench (train/instruments/addition_bench.h): the forms, the models
// (train/instruments/task_models.h), the tables and the CI checks.
#include "train/instruments/addition_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "train/instruments/probe.h"  // InstrumentOptionError
#include "train/instruments/recipe.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "addition-bench";

using bench::fixed;

std::string task_name(AdditionFormat format) { return std::string("addition_") + kAdditionFormatNames.name(format); }

// The marker vocabulary of a form: one marker per digit of the longest test sum.
int64_t hint_symbols(const TaskModelSize& s) { return s.buckets.back().second + 1; }

AdditionHintsConfig data_config(AdditionFormat format, const TaskModelSize& s, int64_t lo, int64_t hi,
                                int64_t rows, uint64_t seed) {
  AdditionHintsConfig c;
  c.format = format;
  c.min_digits = lo;
  c.max_digits = hi;
  c.hint_symbols = hint_symbols(s);
  c.batch_size = rows;
  c.seed = seed;
  return c;
}

// Trains and scores every model (progress lines to `progress`, may be null).
LengthBenchResult addition_bench_results(AdditionBenchOptions o, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  if (o.treatments.empty())
    o.treatments = o.full ? std::vector<std::string>{"fire", "fire-random", "rope", "rope-random", "t5", "alibi",
                                                     "kerple", "none", "learned-random"}
                          : std::vector<std::string>{"fire-random", "rope"};
  if (o.plain_treatments.empty() && o.full) o.plain_treatments = {"fire", "fire-random", "rope"};
  if (!o.plain) o.plain_treatments.clear();
  if (o.seeds.empty()) o.seeds = {1, 2, 3};
  const std::vector<std::string>& accepted = length_bench_treatments();
  for (const auto* list : {&o.treatments, &o.plain_treatments})
    for (const std::string& t : *list)
      if (!bench::known(accepted, t))
        throw InstrumentOptionError(std::string("[addition-bench] ") +
                                    (list == &o.treatments ? "--treatments" : "--plain-treatments") + " '" + t +
                                    "': unknown treatment (" + bench::joined(accepted) + ")");
  if (o.out_dir.empty()) throw InstrumentOptionError("[addition-bench] --out is empty");
  std::filesystem::create_directories(o.out_dir);

  LengthBenchResult r;
  r.full = o.full;
  r.size = addition_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, addition_bench_size(o).steps != r.size.steps; }();
  r.heading = "decimal addition";
  r.treatments = o.treatments;  // the tables' rows: every treatment of either format, hints' first
  for (const std::string& t : o.plain_treatments)
    if (!bench::known(r.treatments, t)) r.treatments.push_back(t);
  r.seeds = o.seeds;
  r.length_unit = "digits per operand";
  std::vector<std::pair<AdditionFormat, std::vector<std::string>>> formats = {{AdditionFormat::Hints, o.treatments}};
  if (!o.plain_treatments.empty()) formats.emplace_back(AdditionFormat::Plain, o.plain_treatments);
  for (const auto& f : formats) r.tasks.push_back(task_name(f.first));
  const TaskModelSize& s = r.size;
  if (progress)
    *progress << "addition-bench (" << bench::form_name(o.full, r.resized, s.steps) << "): "
              << bench::counted(o.treatments.size(), "treatment") << " with index hints, " << o.plain_treatments.size()
              << " without, x " << bench::counted(o.seeds.size(), "seed") << ", " << s.steps
              << " steps each, operands of " << s.train_min << "-" << s.train_max << " digits\n"
              << std::flush;
  std::vector<TaskModel> models;
  for (const auto& [format, list] : formats) {
    const AdditionHintsConfig train_config = data_config(format, s, s.train_min, s.train_max, s.batch_size, 0);
    const int64_t train_tokens = AdditionHintsData(train_config).max_sequence_length();
    for (const std::string& treatment : list)
      for (uint64_t seed : o.seeds) {
        AdditionHintsConfig train = train_config;
        train.seed = seed;
        TaskModel m{task_name(format), treatment, seed, std::make_shared<AdditionHintsData>(train), train_tokens, {}, ""};
        for (const auto& [lo, hi] : s.buckets)  // held-out inputs of their own stream
          m.buckets.push_back(
              std::make_shared<AdditionHintsData>(data_config(format, s, lo, hi, s.eval_rows, seed + 1000)));
        models.push_back(std::move(m));
      }
  }
  r.runs = run_task_models(kOp, s, models, o.out_dir, progress,
                           [&s](const TaskModelRun& run) { return bucket_line(s, run); });
  r.seconds = seconds_since(start);
  return r;
}

// Fragility: exact match (%) of every seed in bucket `bucket`, a column per seed (markdown).
std::string seed_table(const LengthBenchResult& r, const std::string& task, size_t bucket) {
  bench::Table table;
  for (uint64_t seed : r.seeds) table.columns.push_back("seed " + std::to_string(seed));
  for (const std::string& t : r.treatments) {
    bench::Table::Row row{t, {}};
    for (uint64_t seed : r.seeds) {
      const TaskModelRun* run = bench::find_run(r.runs, task, t, seed);
      row.cells.push_back(run ? fixed(100 * run->exact.at(bucket), 1) : "-");
    }
    table.rows.push_back(std::move(row));
  }
  return bench::render_table(table, {true});
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

TaskModelSize addition_bench_size(const AdditionBenchOptions& o) {
  TaskModelSize s;
  if (o.full) {
    s.d_model = 64, s.n_heads = 4, s.d_ff = 256, s.layers = 3;
    s.batch_size = 32, s.steps = 2000, s.warmup = 100, s.lr = 3e-3;
    s.train_min = 1, s.train_max = 6;
    s.buckets = {{1, 6}, {7, 9}, {10, 12}, {13, 15}};  // up to 2.5× the training digits, the paper's ratio
  } else {
    s.d_model = 32, s.n_heads = 2, s.d_ff = 64, s.layers = 2;
    s.batch_size = 32, s.steps = 600, s.warmup = 60, s.lr = 3e-3;
    s.train_min = 1, s.train_max = 3;
    s.buckets = {{1, 3}, {4, 5}, {6, 7}, {8, 8}};
  }
  s.eval_rows = 32, s.eval_batches = 2;
  bench::override_steps(o.steps, s.steps, s.warmup);
  // Learned tables and random positions reach the longest test sequence (hints: 6·digits + 4 tokens).
  AdditionHintsConfig longest;
  longest.max_digits = s.buckets.back().second;
  longest.hint_symbols = longest.max_digits + 1;
  s.max_positions = std::max<int64_t>(64, AdditionHintsData(longest).max_sequence_length());
  s.random_positions_max = s.max_positions;
  return s;
}

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
      << "×); " << hint_symbols(s) << " index markers; randomised treatments L = " << s.random_positions_max
      << "; " << fixed(r.seconds, 0) << " s in all. Output: " << o.out_dir << ".\n\n";
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
  return bench::finish(kOp, options.out_dir,
                       {addition_bench_table(r), addition_bench_markdown(r, options), length_bench_csv(r), r.pictures,
                        addition_bench_failures(r)},
                       r.full, r.resized, out);
}

StudyEntry addition_bench_study() {
  StudyEntry e;
  e.name = kOp;
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
    AdditionBenchOptions o = bench::options_of<AdditionBenchOptions>(a);
    o.plain_treatments = a.list("--plain-treatments");
    o.plain = !a.has("--no-plain");
    return run_addition_bench(o, out);
  };
  return e;
}

}  // namespace relgrad
