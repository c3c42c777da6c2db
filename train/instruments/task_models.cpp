// The synthetic-task benches' models (train/instruments/task_models.h): the config `relgrad train` would
// run for each, its training, its scores, and its record on the study spine.
#include "train/instruments/task_models.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"
#include "core/version.h"
#include "train/config/run_options.h"
#include "train/instruments/recipe.h"
#include "train/instruments/study.h"
#include "train/trainer/trainer.h"

namespace relgrad {

namespace {

std::string key_of(const TaskModel& m) { return m.task + "-" + m.treatment + "-s" + std::to_string(m.seed); }

// The config `relgrad train` would run for this model: a decoder-only synthetic run (recipe.h) whose
// data is replaced by the task's (trainer_options builds everything else from it).
RunConfig run_config(const std::string& out_dir, const TaskModelSize& s, const TaskModel& m, int64_t vocab_size) {
  RunConfig c = bench_recipe(s, false, s.layers, m.seed);
  // Each scheme sized to the training sequences by its entry (FitRule::WindowEdge): what lies beyond
  // them at test time is the scheme's own extrapolation.
  set_decoder_treatment(c, base_treatment(m.treatment),
                        SchemeFit{FitRule::WindowEdge, m.train_tokens, s.cope_positions}, s.max_positions);
  c.data.source = "synthetic";
  c.data.task = TaskKind::Copy;
  c.data.num_symbols = vocab_size - kFirstSymbol;  // the same vocabulary size as the task's
  c.data.min_len = s.train_min;
  c.data.max_len = s.train_max;
  c.data.batch_size = s.batch_size;
  c.data.seed = m.seed;
  set_bench_loop(c, (std::filesystem::path(out_dir) / "runs" / key_of(m)).string());
  return c;
}

// Teacher-forced accuracy of `model` on `batches`: {exact match over rows, per-token}. A randomised
// treatment is evaluated as Ruoss et al.'s released code does (its noisy encodings have no training
// switch): each batch at a fresh sorted random subset of [0, L), not at 0 … T − 1, which such a model
// rarely saw in training (measured: far lower accuracy even inside the training lengths).
std::pair<double, double> accuracy(RunModel& model, const std::vector<Batch>& batches, bool random_positions,
                                   const std::string& study) {
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
  RG_CHECK(rows > 0 && tokens > 0, study, "evaluation scored no answer token");
  return {static_cast<double>(rows_right) / static_cast<double>(rows),
          static_cast<double>(tokens_right) / static_cast<double>(tokens)};
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", 100 * v);
  return buf;
}

TaskModelRun train_task_model(const std::string& study, const TaskModelSize& s, const TaskModel& m,
                              const RunConfig& config) {
  const auto t0 = std::chrono::steady_clock::now();
  std::ostringstream warnings;
  TrainerOptions options = trainer_options(config, &warnings);
  options.data = m.train;
  options.vocab_json.clear();  // the synthetic vocabulary of the config is not the task's
  if (randomised_treatment(m.treatment)) options.model.config.random_positions_max = s.random_positions_max;
  const bool randomised = options.model.config.random_positions_max > 0;
  Trainer trainer(std::move(options), nullptr, &study_model_communicator());
  const TrainResult trained = trainer.train();
  RunModel& model = trainer.model();
  TaskModelRun run;
  run.task = m.task;
  run.treatment = m.treatment;
  run.seed = m.seed;
  run.train_loss = trained.last_loss;
  if (randomised) manual_seed(m.seed + 2000);  // the evaluation's position draws, reproducible
  for (size_t k = 0; k < m.buckets.size(); ++k) {
    std::vector<Batch> batches;
    for (int64_t n = 0; n < s.eval_batches; ++n) batches.push_back(m.buckets[k]->batch(n, Split::HeldOut));
    const auto [exact, token] = accuracy(model, batches, randomised, study);
    run.exact.push_back(exact);
    run.token.push_back(token);
  }
  run.seconds = seconds_since(t0);
  return run;
}

}  // namespace

RunConfig bench_recipe(const BenchModelSize& s, bool encoder_decoder, int64_t layers, uint64_t seed) {
  RecipeSize size;
  size.d_model = s.d_model, size.n_heads = s.n_heads, size.d_ff = s.d_ff;
  size.encoder_layers = encoder_decoder ? layers : 0, size.decoder_layers = layers;
  size.steps = s.steps, size.warmup = s.warmup, size.lr = s.lr;
  return recipe_config(encoder_decoder, size, seed);
}

int64_t parameter_count(RunModel& model) {
  int64_t n = 0;
  for (const Tensor& p : model.module->parameters()) n += p.numel();
  return n;
}

std::string describe(const TaskModelSize& s) {
  std::ostringstream out;
  out << "d_model " << s.d_model << " n_heads " << s.n_heads << " d_ff " << s.d_ff << " layers " << s.layers
      << " batch " << s.batch_size << " steps " << s.steps << " warmup " << s.warmup << " lr " << s.lr
      << " train " << s.train_min << "-" << s.train_max << " buckets";
  for (const auto& [lo, hi] : s.buckets) out << " " << lo << "-" << hi;
  out << " eval " << s.eval_rows << "x" << s.eval_batches << " random " << s.random_positions_max
      << " max_positions " << s.max_positions << " cope " << s.cope_positions;
  return out.str();
}

std::string bucket_line(const TaskModelSize& s, const TaskModelRun& run) {
  std::string line = run.task + " " + run.treatment + " seed " + std::to_string(run.seed) + ": exact/token %";
  for (size_t k = 0; k < s.buckets.size(); ++k)
    line += " " + std::to_string(s.buckets[k].first) + "-" + std::to_string(s.buckets[k].second) + ":" +
            percent(run.exact[k]) + "/" + percent(run.token[k]);
  return line;
}

StudyModel task_study_model(const std::string& study, const TaskModelSize& s, const TaskModel& m,
                            const std::string& out_dir, const TaskModelLine& line) {
  RG_CHECK(m.train && !m.buckets.empty() && (s.buckets.empty() || m.buckets.size() == s.buckets.size()), study,
           m.task, " ", m.treatment, ": need training data and one held-out set per bucket (", s.buckets.size(),
           "), got ", m.buckets.size());
  const RunConfig config = run_config(out_dir, s, m, m.train->vocab().size);
  RunConfig where_free = config;  // the same model wherever out_dir is spelt or moved
  where_free.train.out_dir.clear();
  StudyModel sm;
  sm.key = key_of(m);
  sm.label = m.task + " " + m.treatment + " seed " + std::to_string(m.seed);
  sm.fingerprint = std::string("relgrad ") + version() + "\n" + describe(s) + "\ntask " + m.task + " " + m.data +
                   " train_tokens " + std::to_string(m.train_tokens) + "\n" + config_to_toml(where_free);
  // The model and size are copied: the plan that made them may be gone when the runner calls this.
  sm.run = [study, s, m, config, line] {
    const TaskModelRun run = train_task_model(study, s, m, config);
    StudyRecord r;
    r.line = line(run);
    r.set_series("exact", run.exact);
    r.set_series("token", run.token);
    r.set("train_loss", run.train_loss);
    r.set("seconds", run.seconds);
    return r;
  };
  return sm;
}

TaskModelRun task_model_run(const TaskModel& m, const StudyRecord& record) {
  TaskModelRun run;
  run.task = m.task;
  run.treatment = m.treatment;
  run.seed = m.seed;
  run.exact = record.series("exact");
  run.token = record.series("token");
  run.train_loss = record.get("train_loss");
  run.seconds = record.get("seconds");
  return run;
}

std::vector<TaskModelRun> run_task_models(const std::string& study, const TaskModelSize& s,
                                          const std::vector<TaskModel>& models, const std::string& out_dir,
                                          std::ostream* progress, const TaskModelLine& line) {
  std::vector<StudyModel> spine;
  for (const TaskModel& m : models) spine.push_back(task_study_model(study, s, m, out_dir, line));
  const std::vector<StudyRecord> records = run_study_models(study, spine, out_dir, progress);
  std::vector<TaskModelRun> runs;
  for (size_t i = 0; i < models.size(); ++i) runs.push_back(task_model_run(models[i], records[i]));
  return runs;
}

}  // namespace relgrad
