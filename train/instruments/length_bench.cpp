// run_length_bench's training and evaluation (train/instruments/length_bench.h); the tables, files,
// pictures and CI checks are in length_bench_report.cpp.
#include "train/instruments/length_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"
#include "train/config/run_options.h"
#include "train/data/length_tasks.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"
#include "train/trainer/trainer.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "length-bench";

using bench::joined;
using bench::known;

// The longest decoder-only sequence (tokens) of any bucket of `task`.
int64_t longest_sequence(const LengthBenchSize& s, LengthTaskKind task) {
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

// The config `relgrad train` would run for this model: a decoder-only synthetic run (recipe.h) whose
// data is replaced by the length task below (trainer_options builds everything else from it).
RunConfig run_config(const std::string& out_dir, const LengthBenchSize& s, const std::string& task,
                     const std::string& treatment, uint64_t seed, int64_t train_tokens, int64_t vocab_size) {
  RecipeSize size;
  size.d_model = s.d_model, size.n_heads = s.n_heads, size.d_ff = s.d_ff;
  size.encoder_layers = 0, size.decoder_layers = s.layers;
  size.steps = s.steps, size.warmup = s.warmup, size.lr = s.lr;
  RunConfig c = recipe_config(false, size, seed);
  // Each scheme sized to the training sequences by its entry (FitRule::WindowEdge): what lies beyond
  // them at test time is the scheme's own extrapolation.
  set_decoder_treatment(c, base_treatment(treatment), SchemeFit{FitRule::WindowEdge, train_tokens, s.cope_positions},
                        s.max_positions);
  c.data.source = "synthetic";
  c.data.task = TaskKind::Copy;
  c.data.num_symbols = vocab_size - kFirstSymbol;  // the same vocabulary size as the task's
  c.data.min_len = s.train_min;
  c.data.max_len = s.train_max;
  c.data.batch_size = s.batch_size;
  c.data.seed = seed;
  set_bench_loop(c, (std::filesystem::path(out_dir) / "runs" /
                     (task + "-" + treatment + "-s" + std::to_string(seed)))
                        .string());
  return c;
}

// Teacher-forced accuracy of `model` on `batches`: {exact match over rows, per-token}. A randomised
// treatment is evaluated as Ruoss et al.'s released code does (its noisy encodings have no training
// switch): each batch at a fresh sorted random subset of [0, L), not at 0 … T − 1, which such a model
// rarely saw in training (measured: far lower accuracy even inside the training lengths).
std::pair<double, double> accuracy(RunModel& model, const std::vector<Batch>& batches,
                                   bool random_positions) {
  NoGradGuard no_grad;
  model.module->eval();
  int64_t rows = 0, rows_right = 0, tokens = 0, tokens_right = 0;
  for (const Batch& host : batches) {
    const Batch b = host.to(model.device);
    const Tensor logits = random_positions ? model.logits_at_random_positions(b) : model.logits(b);  // (B, T, V)
    const int64_t B = logits.size(0), T = logits.size(1);
    const std::vector<int64_t> predicted = argmax(logits, -1).contiguous().to_vector<int64_t>();
    const std::vector<int64_t> wanted = RunModel::targets(b).contiguous().to_vector<int64_t>();
    for (int64_t r = 0; r < B; ++r) {
      bool all = true;
      for (int64_t t = 0; t < T; ++t) {
        const size_t k = static_cast<size_t>(r * T + t);
        if (wanted[k] == kIgnoreIndex) continue;
        ++tokens;
        const bool right = predicted[k] == wanted[k];
        tokens_right += right;
        all = all && right;
      }
      ++rows;
      rows_right += all;
    }
  }
  RG_CHECK(rows > 0 && tokens > 0, kOp, "evaluation scored no answer token");
  return {static_cast<double>(rows_right) / static_cast<double>(rows),
          static_cast<double>(tokens_right) / static_cast<double>(tokens)};
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", 100 * v);
  return buf;
}

}  // namespace

std::vector<std::string> length_bench_treatments() { return every_treatment(/*randomised=*/true); }

LengthBenchSize length_bench_size(const LengthBenchOptions& o) {
  LengthBenchSize s;
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

LengthBenchRun length_bench_run(const LengthBenchSize& s, const LengthBenchModel& m, const std::string& out_dir,
                                std::ostream* progress) {
  RG_CHECK(m.train && m.buckets.size() == s.buckets.size(), kOp, m.task, " ", m.treatment,
           ": need training data and one held-out set per bucket (", s.buckets.size(), "), got ",
           m.buckets.size());
  const auto t0 = std::chrono::steady_clock::now();
  const RunConfig config =
      run_config(out_dir, s, m.task, m.treatment, m.seed, m.train_tokens, m.train->vocab().size);
  std::ostringstream warnings;
  TrainerOptions options = trainer_options(config, &warnings);
  options.data = m.train;
  options.vocab_json.clear();  // the synthetic vocabulary of the config is not the task's
  if (randomised_treatment(m.treatment)) options.model.config.random_positions_max = s.random_positions_max;
  const bool randomised = options.model.config.random_positions_max > 0;
  Trainer trainer(std::move(options), nullptr);
  const TrainResult trained = trainer.train();
  RunModel& model = trainer.model();
  LengthBenchRun run;
  run.task = m.task;
  run.treatment = m.treatment;
  run.seed = m.seed;
  run.train_loss = trained.last_loss;
  if (randomised) manual_seed(m.seed + 2000);  // the evaluation's position draws, reproducible
  std::string line = "  " + m.task + " " + m.treatment + " seed " + std::to_string(m.seed) + ": exact/token %";
  for (size_t k = 0; k < s.buckets.size(); ++k) {
    std::vector<Batch> batches;
    for (int64_t n = 0; n < s.eval_batches; ++n) batches.push_back(m.buckets[k]->batch(n, Split::HeldOut));
    const auto [exact, token] = accuracy(model, batches, randomised);
    run.exact.push_back(exact);
    run.token.push_back(token);
    line += " " + std::to_string(s.buckets[k].first) + "-" + std::to_string(s.buckets[k].second) + ":" +
            percent(exact) + "/" + percent(token);
  }
  run.seconds = seconds_since(t0);
  if (progress) *progress << line << " (" << static_cast<int>(run.seconds) << " s)\n" << std::flush;
  return run;
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
  const LengthBenchSize& s = r.size;
  if (progress)
    *progress << "length-bench (" << bench::form_name(o.full, r.resized, s.steps)
              << "): " << bench::counted(o.tasks.size(), "task") << " x "
              << bench::counted(o.treatments.size(), "treatment") << " x " << bench::counted(o.seeds.size(), "seed")
              << ", " << s.steps
              << " steps each, train lengths " << s.train_min << "-" << s.train_max << "\n"
              << std::flush;
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
        LengthBenchModel m;
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
        r.runs.push_back(length_bench_run(s, m, o.out_dir, progress));
      }
  }
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace relgrad
