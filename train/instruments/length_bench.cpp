// run_length_bench's forms and models (train/instruments/length_bench.h); the tables, files,
// pictures and CI checks are in length_bench_report.cpp.
#include "train/instruments/length_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <ostream>

#include "core/base/error.h"
#include "train/data/length_tasks.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "length-bench";

using bench::joined;
using bench::known;

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

}  // namespace

std::vector<std::string> length_bench_treatments() { return every_treatment(/*randomised=*/true); }

TaskModelSize length_bench_size(const LengthBenchOptions& o) {
  TaskModelSize s;
  if (o.full) {
    s.d_model = 64, s.n_heads = 4, s.d_ff = 256, s.layers = 2;
    s.batch_size = 32, s.steps = 3000, s.warmup = 200, s.lr = 1e-3;
    s.train_min = 1, s.train_max = 8;
    s.buckets = {{1, 8}, {9, 12}, {13, 16}, {17, 24}};
    s.eval_rows = 32, s.eval_batches = 2;
  } else {
    s.d_model = 32, s.n_heads = 2, s.d_ff = 64, s.layers = 2;
    s.batch_size = 32, s.steps = 1500, s.warmup = 100, s.lr = 3e-3;
    s.train_min = 1, s.train_max = 6;
    s.buckets = {{1, 6}, {7, 9}, {10, 12}};
    s.eval_rows = 32, s.eval_batches = 2;
  }
  bench::override_steps(o.steps, s.steps, s.warmup);
  int64_t longest = 0;
  for (const std::string& task : length_task_names())
    longest = std::max(longest, longest_sequence(s, length_task_from_string(task)));
  s.max_positions = std::max<int64_t>(64, longest);
  s.random_positions_max = s.max_positions;
  return s;
}

void check_length_bench_options(const LengthBenchOptions& o) {
  for (const std::string& t : o.tasks)
    RG_CHECK(known(length_task_names(), t), kOp, "unknown task '", t, "' (", joined(length_task_names()),
             ")");
  for (const std::string& t : o.treatments)
    RG_CHECK(known(length_bench_treatments(), t), kOp, "unknown treatment '", t, "' (",
             joined(length_bench_treatments()), ")");
  RG_CHECK(!o.out_dir.empty(), kOp, "out_dir is empty");
}

LengthBenchResult length_bench_results(const LengthBenchOptions& options, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  LengthBenchOptions o = options;
  if (o.tasks.empty())
    o.tasks = o.full ? std::vector<std::string>{"copy", "reverse", "addition", "sorting", "parity"}
                     : std::vector<std::string>{"copy", "reverse"};
  if (o.treatments.empty())
    o.treatments =
        o.full ? every_treatment(/*randomised=*/true) : std::vector<std::string>{"none", "learned", "t5", "rope-random"};
  if (o.seeds.empty()) o.seeds = {1, 2, 3};
  check_length_bench_options(o);
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
              << ", " << s.steps
              << " steps each, train lengths " << s.train_min << "-" << s.train_max << "\n"
              << std::flush;
  std::vector<TaskModel> models;
  for (const std::string& task : o.tasks) {
    const LengthTaskKind kind = length_task_from_string(task);
    LengthTaskConfig train_data;
    train_data.kind = kind;
    train_data.min_len = s.train_min;
    train_data.max_len = s.train_max;
    train_data.batch_size = s.batch_size;
    const int64_t train_tokens = LengthTaskData(train_data).max_sequence_length();
    for (const std::string& treatment : o.treatments)
      for (uint64_t seed : o.seeds) {
        train_data.seed = seed;
        TaskModel m;
        m.task = task;
        m.treatment = treatment;
        m.seed = seed;
        m.train = std::make_shared<LengthTaskData>(train_data);
        m.train_tokens = train_tokens;
        for (const auto& [lo, hi] : s.buckets) {
          LengthTaskConfig c;
          c.kind = kind;
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

}  // namespace relgrad
