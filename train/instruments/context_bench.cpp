// run_context_bench's training and evaluation (train/instruments/context_bench.h); the tables, files,
// picture and CI checks are in context_bench_report.cpp.
#include "train/instruments/context_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "core/version.h"
#include "layers/schemes.h"
#include "train/config/run_options.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"
#include "train/instruments/study.h"
#include "train/trainer/trainer.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "context-bench";

using bench::joined;
using bench::known;

// The text file: `given` when set (it must be a regular file), else data/kjv.txt (tools/setup.sh writes
// it) in the current folder, then in each folder above the running program (a build folder's
// relgrad and test binaries sit under the repository root).
std::string find_text(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!given.empty()) {
    RG_CHECK(fs::is_regular_file(given, ec), kOp, "--text '", given, "' is not a readable file");
    return given;
  }
  const fs::path rel = fs::path("data") / "kjv.txt";
  if (fs::is_regular_file(rel, ec)) return rel.string();
  std::string tried = (fs::current_path(ec) / rel).string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_regular_file(dir / rel, ec)) return (dir / rel).string();
      tried += ", " + (dir / rel).string();
      if (dir == dir.root_path()) break;
    }
  RG_CHECK(false, kOp, "cannot find ", rel.string(), " (looked in: ", tried,
           "); tools/setup.sh writes it, or give --text FILE");
  return "";
}

// The config `relgrad train` would run for this model: configs/char_lm.toml's data (the text, a 5 %
// validation split, tied embeddings) at the bench's size, one thread, its own run directory.
RunConfig run_config(const ContextBenchOptions& o, const ContextBenchSize& s, const std::string& text,
                     const std::string& treatment, uint64_t seed) {
  RecipeSize size;
  size.d_model = s.d_model, size.n_heads = s.n_heads, size.d_ff = s.d_ff;
  size.encoder_layers = 0, size.decoder_layers = s.layers;
  size.steps = s.steps, size.warmup = s.warmup, size.lr = s.lr;
  RunConfig c = recipe_config(false, size, seed);
  c.model.tie_weights = true;
  const int64_t longest = s.context * s.multiples.back();
  // Each scheme sized to the training context C by its entry (FitRule::HalfWindow): a learned value per
  // distance or bucket saturates at C/2, so the entry every longer distance shares is trained on half
  // the distances a window holds, as T5's defaults (32 buckets up to distance 128) have their last
  // bucket trained at a length of 512; layers/schemes.h has the rule, each scheme's file its sizes.
  set_decoder_treatment(c, treatment, SchemeFit{FitRule::HalfWindow, s.context}, treatment == "learned" ? longest : 0);
  c.data.source = "text";
  c.data.text_path = text;
  c.data.val_fraction = 0.05;
  c.data.context = s.context;
  c.data.batch_size = s.batch_size;
  c.data.seed = seed;
  set_bench_loop(c, (std::filesystem::path(o.out_dir) / "runs" / (treatment + "-s" + std::to_string(seed))).string());
  return c;
}

// The training split's byte frequencies, add-one: the log-probabilities of a model that ignores the
// context, the floor every trained model must beat.
std::vector<double> unigram_log_probs(const TextDataset& text) {
  std::vector<double> count(256, 1.0);
  double total = 256;
  const std::string& bytes = text.bytes();
  for (int64_t i = 0; i < text.train_size(); ++i) count[static_cast<unsigned char>(bytes[i])] += 1, total += 1;
  for (double& c : count) c = std::log(c / total);
  return count;
}

// The unigram NLL of the whole held-out split.
double unigram_nll(const TextDataset& text, const std::vector<double>& log_p) {
  double sum = 0;
  for (int64_t i = text.train_size(); i < text.size(); ++i) sum -= log_p[static_cast<unsigned char>(text.bytes()[i])];
  return text.val_size() ? sum / static_cast<double>(text.val_size()) : NAN;
}

// The unigram NLL of the bytes the evaluation at `context` scores: the targets of held-out batches
// 0 … K − 1 of the text at data.seed kContextBenchEvalSeed, the windows relgrad eval draws
// (TextData::batch is TextDataset::batch at the run's batch size and context).
double scored_unigram_nll(const std::string& path, const ContextBenchSize& s, int64_t context,
                          const std::vector<double>& log_p) {
  const TextDataset text(path, 0.05, kContextBenchEvalSeed);
  double sum = 0;
  int64_t n = 0;
  for (int64_t k = 0; k < context_bench_eval_batches(s, context); ++k)
    for (int64_t id : text.batch(k, s.batch_size, context, Split::HeldOut).targets.to_vector<int64_t>()) {
      sum -= log_p[static_cast<size_t>(id)];
      ++n;
    }
  return n ? sum / static_cast<double>(n) : NAN;
}

int64_t parameter_count(RunModel& model) {
  int64_t n = 0;
  for (const Tensor& p : model.module->parameters()) n += p.numel();
  return n;
}

// One model on the study spine (train/instruments/study.h): trained through the Trainer, then scored at
// every evaluation context by context_bench_eval on its checkpoint; its record holds params, nll.K,
// tokens.K, train_loss and seconds.
StudyModel study_model(const ContextBenchOptions& o, const ContextBenchSize& s, const std::string& text,
                       const std::string& data, const std::string& treatment, uint64_t seed) {
  const RunConfig config = run_config(o, s, text, treatment, seed);
  RunConfig where_free = config;  // the same model wherever out_dir is spelt or moved
  where_free.train.out_dir.clear();
  std::ostringstream fingerprint;
  fingerprint << "relgrad " << version() << "\nmultiples";
  for (int64_t m : s.multiples) fingerprint << " " << m;
  fingerprint << " eval_tokens " << s.eval_tokens << " eval seed " << kContextBenchEvalSeed << "\ntext " << data
              << "\n" << config_to_toml(where_free);
  StudyModel m;
  m.key = treatment + "-s" + std::to_string(seed);
  m.label = treatment + " seed " + std::to_string(seed);
  m.fingerprint = fingerprint.str();
  m.run = [config, s, label = m.label] {
    const auto t0 = std::chrono::steady_clock::now();
    std::ostringstream warnings;  // a text file skips nothing; nothing is printed
    Trainer trainer(trainer_options(config, &warnings), nullptr, &study_model_communicator());
    const TrainResult trained = trainer.train();
    StudyRecord r;
    r.line = label + ": NLL";
    r.set("params", static_cast<double>(parameter_count(trainer.model())));
    r.set("train_loss", trained.last_loss);
    omp_set_num_threads(1);  // the evaluation as the training: one thread (recipe.h)
    std::vector<double> nll, tokens;
    for (int64_t multiple : s.multiples) {
      const int64_t context = multiple * s.context;
      const EvalResult e = context_bench_eval(trainer.checkpoint_path(), context, context_bench_eval_batches(s, context));
      RG_CHECK(std::isfinite(e.loss), kOp, label, ": held-out loss at context ", context, " is not finite (", e.loss, ")");
      nll.push_back(e.loss);
      tokens.push_back(static_cast<double>(e.tokens));
      char buf[48];
      std::snprintf(buf, sizeof buf, " %lldx %.3f", static_cast<long long>(multiple), e.loss);
      r.line += buf;
    }
    r.set_series("nll", nll);
    r.set_series("tokens", tokens);
    r.set("seconds", seconds_since(t0));
    return r;
  };
  return m;
}

}  // namespace

std::vector<std::string> context_bench_treatments() { return every_treatment(/*randomised=*/false); }

ContextBenchSize context_bench_size(const ContextBenchOptions& o) {
  ContextBenchSize s;
  if (o.full) {
    s.d_model = 64, s.n_heads = 4, s.d_ff = 256, s.layers = 2;
    s.context = 32, s.batch_size = 32;
    s.steps = 1000, s.warmup = 50, s.lr = 2e-3;
    s.multiples = {1, 2, 4, 8, 16};
    s.eval_tokens = 65536;
  } else {
    s.d_model = 32, s.n_heads = 4, s.d_ff = 128, s.layers = 2;
    s.context = 16, s.batch_size = 32;
    s.steps = 600, s.warmup = 40, s.lr = 3e-3;
    s.multiples = {1, 2, 4, 8};
    s.eval_tokens = 8192;
  }
  bench::override_steps(o.steps, s.steps, s.warmup);
  return s;
}

int64_t context_bench_eval_batches(const ContextBenchSize& s, int64_t context) {
  return std::max<int64_t>(1, s.eval_tokens / (s.batch_size * context));
}

EvalResult context_bench_eval(const std::string& checkpoint, int64_t context, int64_t batches) {
  LoadedRun run = load_run(checkpoint);
  // What relgrad eval's --data.context and --data.seed overrides do (train/command/checkpoint_overrides.cpp):
  // the changed config validated, the model's max_positions kept.
  RunConfig c = run.config;
  c.data.context = context;
  c.data.seed = kContextBenchEvalSeed;
  c.validate();
  const RunData data(c);
  return evaluate(*run.model, data.dataset(), batches);
}

std::string check_context_bench_options(const ContextBenchOptions& o) {
  for (const std::string& t : o.treatments)
    RG_CHECK(known(context_bench_treatments(), t), kOp, "--treatments: unknown treatment '", t, "' (",
             joined(context_bench_treatments()), ")");
  RG_CHECK(!o.out_dir.empty(), kOp, "--out is empty");
  return find_text(o.text_path);
}

ContextBenchResult context_bench_results(const ContextBenchOptions& options, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const ThreadCountGuard restore_threads;
  ContextBenchOptions o = options;
  if (o.treatments.empty())
    o.treatments = o.full ? context_bench_treatments() : std::vector<std::string>{"sinusoidal", "t5", "alibi", "rope"};
  if (o.seeds.empty()) o.seeds = o.full ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{1, 2};
  const std::string text = check_context_bench_options(o);

  ContextBenchResult r;
  r.full = o.full;
  r.size = context_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, context_bench_size(o).steps != r.size.steps; }();
  r.treatments = o.treatments;
  r.seeds = o.seeds;
  r.text_path = text;
  const ContextBenchSize& s = r.size;
  {
    const TextDataset corpus(r.text_path, 0.05);
    const int64_t longest = s.context * s.multiples.back();
    RG_CHECK(corpus.val_size() > longest, kOp, "'", r.text_path, "' has a held-out split of ", corpus.val_size(),
             " bytes (5 %), too short for the longest evaluation context, ", longest, " bytes");
    const std::vector<double> log_p = unigram_log_probs(corpus);
    r.unigram_nll = unigram_nll(corpus, log_p);
    for (int64_t m : s.multiples)
      r.scored_unigram_nll.push_back(scored_unigram_nll(r.text_path, s, m * s.context, log_p));
  }
  std::filesystem::create_directories(o.out_dir);
  if (progress)
    *progress << "context-bench (" << bench::form_name(o.full, r.resized, s.steps)
              << "): " << bench::counted(o.treatments.size(), "treatment") << " x "
              << bench::counted(o.seeds.size(), "seed") << ", " << s.steps << " steps each, trained at context " << s.context
              << ", evaluated at " << s.context << "-" << s.context * s.multiples.back() << " on " << r.text_path
              << "\n"
              << std::flush;
  const std::string data = file_fingerprint(r.text_path, kOp);
  std::vector<StudyModel> models;
  for (const std::string& treatment : o.treatments)
    for (uint64_t seed : o.seeds) models.push_back(study_model(o, s, r.text_path, data, treatment, seed));
  const std::vector<StudyRecord> records = run_study_models(kOp, models, o.out_dir, progress);
  for (size_t i = 0; i < records.size(); ++i) {
    ContextBenchRun run;
    run.treatment = o.treatments[i / o.seeds.size()];
    run.seed = o.seeds[i % o.seeds.size()];
    run.params = static_cast<int64_t>(records[i].get("params"));
    run.nll = records[i].series("nll");
    for (double t : records[i].series("tokens")) run.tokens.push_back(static_cast<int64_t>(t));
    run.train_loss = records[i].get("train_loss");
    run.seconds = records[i].get("seconds");
    r.runs.push_back(std::move(run));
  }
  r.seconds = seconds_since(start);
  r.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return r;
}

}  // namespace relgrad
