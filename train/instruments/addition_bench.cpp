// run_addition_bench (train/instruments/addition_bench.h): the forms and the models
// (train/instruments/task_models.h); the tables and CI checks are in addition_bench_report.cpp.
#include "train/instruments/addition_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <ostream>

#include "train/instruments/bench_report.h"
#include "train/instruments/probe.h"  // InstrumentOptionError
#include "train/instruments/recipe.h"

namespace relgrad {

namespace {

AdditionHintsConfig data_config(AdditionFormat format, const TaskModelSize& s, int64_t lo, int64_t hi,
                                int64_t rows, uint64_t seed) {
  AdditionHintsConfig c;
  c.format = format;
  c.min_digits = lo;
  c.max_digits = hi;
  c.hint_symbols = addition_hint_symbols(s);
  c.batch_size = rows;
  c.seed = seed;
  return c;
}

}  // namespace

std::string addition_task_name(AdditionFormat format) {
  return std::string("addition_") + kAdditionFormatNames.name(format);
}

std::vector<std::string> addition_bench_treatments(bool full) {
  if (full)
    return {"fire", "fire-random", "rope", "rope-random", "t5", "alibi", "kerple", "none", "learned-random"};
  return {"fire-random", "rope"};
}

std::vector<std::string> addition_bench_plain_treatments(bool full) {
  if (full) return {"fire", "fire-random", "rope"};
  return {};
}

int64_t addition_hint_symbols(const TaskModelSize& s) { return s.buckets.back().second + 1; }

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

LengthBenchResult addition_bench_results(const AdditionBenchOptions& options, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  AdditionBenchOptions o = options;
  if (o.treatments.empty()) o.treatments = addition_bench_treatments(o.full);
  if (o.plain_treatments.empty()) o.plain_treatments = addition_bench_plain_treatments(o.full);
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
  for (const auto& f : formats) r.tasks.push_back(addition_task_name(f.first));
  const TaskModelSize& s = r.size;
  if (progress)
    *progress << "addition-bench (" << bench::form_name(o.full, r.resized, s.steps) << "): "
              << bench::counted(o.treatments.size(), "treatment") << " with index hints, " << o.plain_treatments.size()
              << " without, x " << bench::counted(o.seeds.size(), "seed") << ", " << s.steps << " steps each, operands of " << s.train_min << "-" << s.train_max
              << " digits\n"
              << std::flush;
  std::vector<TaskModel> models;
  for (const auto& [format, list] : formats) {
    const AdditionHintsConfig train_config =
        data_config(format, s, s.train_min, s.train_max, s.batch_size, 0);
    const int64_t train_tokens = AdditionHintsData(train_config).max_sequence_length();
    for (const std::string& treatment : list)
      for (uint64_t seed : o.seeds) {
        TaskModel m;
        m.task = addition_task_name(format);
        m.treatment = treatment;
        m.seed = seed;
        AdditionHintsConfig train = train_config;
        train.seed = seed;
        m.train = std::make_shared<AdditionHintsData>(train);
        m.train_tokens = train_tokens;
        for (const auto& [lo, hi] : s.buckets)  // held-out inputs of their own stream
          m.buckets.push_back(
              std::make_shared<AdditionHintsData>(data_config(format, s, lo, hi, s.eval_rows, seed + 1000)));
        models.push_back(std::move(m));
      }
  }
  r.runs = run_task_models("addition-bench", s, models, o.out_dir, progress,
                           [&s](const TaskModelRun& run) { return bucket_line(s, run); });
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace relgrad
