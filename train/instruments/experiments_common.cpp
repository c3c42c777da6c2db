// Shared pieces of the experiments (train/instruments/experiments_internal.h): data plumbing, training
// through the Trainer, evaluation and the probe at an expected offset.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <ostream>

#include "autograd/grad_mode.h"
#include "core/base/error.h"
#include "train/instruments/experiments_internal.h"
#include "train/config/run_options.h"
#include "train/data/dataset.h"
#include "train/trainer/trainer.h"

namespace relgrad::experiments {

// ---- data ---------------------------------------------------------------------------------------

CounterStream row_random(uint64_t seed, uint32_t stream, Split split, int64_t index, int64_t row) {
  uint32_t top = stream & 0x7fffffffu;
  if (split == Split::HeldOut) top |= 0x80000000u;
  return CounterStream(seed, static_cast<uint32_t>(row), static_cast<uint32_t>(index), top);
}

// ---- models and training ------------------------------------------------------------------------

PositionalConfig scheme_config(const std::string& scheme) {
  PositionalConfig p;
  p.scheme = scheme;
  // seed, huang: t3 = 64 covers every offset of these tasks (the default 512 would make Q·Eᵀ
  // (B, H, t2, 2·t3 − 1) about 40× larger than the scores it feeds).
  p.max_length = 64;
  return p;
}

RunConfig experiment_config(bool encoder_decoder, int64_t vocab, const ModelSize& size, uint64_t seed) {
  RunConfig c = recipe_config(encoder_decoder, size, seed, vocab);
  c.model.encoder_self = scheme_config("none");
  c.model.decoder_self = scheme_config("none");
  c.model.cross = scheme_config("none");
  c.optim.positional_lr_scale = size.positional_lr_scale;
  c.train.target_accuracy = 0.0;  // every step trained (the Trainer evaluates only at the end here anyway)
  // The batches are the experiment's own (ExperimentData); these keys only give the config the
  // experiment's vocabulary size, which derive_from_data takes from the data keys.
  c.data.source = "synthetic";
  c.data.task = TaskKind::Copy;
  c.data.num_symbols = vocab - kFirstSymbol;
  c.data.min_len = 1;
  c.data.max_len = 2;
  return c;
}

namespace {

// An experiment's batches as the Trainer's Dataset: batch n of a split is the BatchFn's (32 rows, the
// experiments' batch size); nothing is printed after training.
class ExperimentData final : public Dataset {
 public:
  ExperimentData(BatchFn data, int64_t vocab_size)
      : data_(std::move(data)), vocab_(TokenDataset::ids_vocab(vocab_size)) {}
  Batch batch(int64_t index, Split split) const override { return data_(index, split); }
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return kExperimentRows; }
  void print_samples(SampleModel&, int64_t, const std::string&, std::ostream&) const override {}

 private:
  BatchFn data_;
  Vocab vocab_;
};

// A model's run directory (the Trainer's log and final checkpoint) in the system's temporary folder,
// removed with everything in it once the model is scored: the experiments keep numbers and pictures.
class ScratchRunDir {
 public:
  ScratchRunDir() {
    static std::atomic<int> made{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("relgrad-experiments-" + std::to_string(::getpid()) + "-" + std::to_string(made++)))
                .string();
  }
  ~ScratchRunDir() {
    std::error_code ignored;  // a folder left behind in the temporary directory is no error
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void train_run(RunConfig config, const BatchFn& data, std::ostream* progress, const std::string& label,
               const std::function<void(RunModel&)>& score) {
  const ScratchRunDir dir;
  set_bench_loop(config, dir.path());
  TrainerOptions options = trainer_options(config);
  options.data = std::make_shared<ExperimentData>(data, config.model.vocab_size);
  options.vocab_json.clear();  // the config's synthetic vocabulary is not the experiment's
  if (progress) *progress << "  " << label << "\n";
  ThreadCountGuard threads;  // the Trainer runs on one thread (set_bench_loop)
  Trainer trainer(std::move(options), progress);
  trainer.train();
  trainer.model().module->eval();
  score(trainer.model());
}

Evaluation evaluate_on(RunModel& model, const BatchFn& data, int64_t batches, const PositionFilter& subset) {
  // As `relgrad eval` evaluates; the subset's tokens are counted in the same pass.
  int64_t tokens = 0, correct = 0;
  std::function<void(int64_t, int64_t, bool)> count;
  if (subset)
    count = [&](int64_t t, int64_t target, bool right) {
      if (!subset(t, target)) return;
      ++tokens;
      correct += right;
    };
  const EvalResult all = evaluate(model, ExperimentData(data, 0), batches, nullptr, {}, count);
  Evaluation e{all.loss, all.accuracy, -1.0};
  if (subset) e.subset_accuracy = tokens ? static_cast<double>(correct) / static_cast<double>(tokens) : 0.0;
  return e;
}

// ---- probing ------------------------------------------------------------------------------------

namespace {

// Per head: the mean weight on key π(i) + δ over the valid queries that have that key (in range,
// not padding, not hidden by the causal mask); NaN for a head with no such query.
std::vector<double> mass_on_needed_key(const AttentionRecord& rec, const ProbeSpec& spec,
                                       const std::vector<int64_t>& targets) {
  const int64_t B = rec.weights.size(0), H = rec.weights.size(1), t2 = rec.weights.size(2),
                t1 = rec.weights.size(3);
  std::vector<double> w = rec.weights.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> sum(static_cast<size_t>(H), 0.0);
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < t2; ++i) {
      const int64_t j = spec.key_of ? spec.key_of(i) : rec.positions[i] + spec.expected;
      if (!rec.query_valid[b * t2 + i] || j < 0 || j >= t1 || !rec.key_valid[b * t1 + j]) continue;
      if (spec.queries && !spec.queries(i, targets[static_cast<size_t>(b * t2 + i)])) continue;
      if (rec.causal && j > rec.positions[i]) continue;
      ++n;
      for (int64_t h = 0; h < H; ++h) sum[h] += w[((b * H + h) * t2 + i) * t1 + j];
    }
  for (double& s : sum) s = n ? s / static_cast<double>(n) : NAN;
  return sum;
}

}  // namespace

const ProbeCurve* best_curve(const ProbedRun& run, const std::string& kind) {
  for (const ProbeCurve& c : run.curves)
    if (c.kind == kind && c.head == run.head &&
        std::find(c.shared_by.begin(), c.shared_by.end(), run.layer) != c.shared_by.end())
      return &c;
  return nullptr;
}

ProbedRun probe_expected(RunModel& model, const Batch& batch, const ProbeSpec& spec) {
  std::vector<AttentionRecord> records = record_attention(model, batch), mine;
  const std::vector<int64_t> targets = RunModel::targets(batch).contiguous().to_vector<int64_t>();  // (B, t2)
  ProbedRun run;
  run.place = spec.place;
  run.expected = spec.expected;
  run.mass_expected = -1.0;
  for (const AttentionRecord& rec : records) {
    if (rec.place != spec.place) continue;
    mine.push_back(rec);
    std::vector<double> mass = mass_on_needed_key(rec, spec, targets);
    for (size_t h = 0; h < mass.size(); ++h)
      if (std::isfinite(mass[h]) && mass[h] > run.mass_expected) {
        run.mass_expected = mass[h];
        run.layer = rec.layer;
        run.head = static_cast<int>(h);
        run.scheme = rec.scheme;
      }
  }
  RG_CHECK(run.head >= 0, "experiments", "no ", spec.place, " attention query has the key the task needs");
  run.curves = probe(mine);
  if (const ProbeCurve* mass = best_curve(run, "attention_mass")) run.mass_peak = peak_offset(*mass);
  if (const ProbeCurve* c = best_curve(run, "response")) {
    ProbeCurve near = *c;  // the offsets within reach: far ones are rare in training and keep their init
    near.delta.clear();
    near.value.clear();
    for (size_t n = 0; n < c->delta.size(); ++n)
      if (spec.reach <= 0 || std::abs(c->delta[n]) <= spec.reach)
        near.delta.push_back(c->delta[n]), near.value.push_back(c->value[n]);
    if (has_finite(near)) {
      run.response_peak = peak_offset(near);
      run.response_plateau = std::count(near.value.begin(), near.value.end(), value_at(near, run.response_peak));
    }
  }
  return run;
}

ProbedRun train_and_probe(const std::string& label, const RunConfig& config, const BatchFn& data,
                          const ProbeSpec& spec, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  ProbedRun run;
  train_run(config, data, progress, label, [&](RunModel& model) {
    const Evaluation e = evaluate_on(model, data, spec.eval_batches, spec.subset);
    run = probe_expected(model, data(0, Split::HeldOut), spec);
    run.accuracy = e.accuracy;
    run.loss = e.loss;
    run.subset_accuracy = e.subset_accuracy;
  });
  run.label = label;
  run.seconds = seconds_since(start);
  return run;
}

// ---- text ---------------------------------------------------------------------------------------

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t n = 0; n < items.size(); ++n) out += (n ? sep : "") + items[n];
  return out;
}

std::string spoken_list(const std::vector<int64_t>& items, size_t from) {
  std::string out;
  for (size_t n = from; n < items.size(); ++n)
    out += (n == from ? "" : n + 1 == items.size() ? " and " : ", ") + std::to_string(items[n]);
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent(double v) { return fixed(100.0 * v, 1) + " %"; }

std::string offset_text(int64_t d) {
  if (d == 0) return "0";
  return (d < 0 ? "−" : "+") + std::to_string(d < 0 ? -d : d);
}

std::string peak_text(const ProbedRun& r) {
  if (r.response_peak == kNoResponsePeak) return "—";
  if (r.response_plateau > 1) {  // several offsets share the top value: a clipped edge row or a T5 bucket
    if (r.response_peak < 0)
      return offset_text(r.response_peak) + " … " + offset_text(r.response_peak + r.response_plateau - 1) +
             " (shared)";
    return offset_text(r.response_peak) + " … (shared by " + std::to_string(r.response_plateau) + ")";
  }
  return offset_text(r.response_peak);
}

std::string model_text(const ModelSize& m, bool encoder_decoder) {
  std::string layers = encoder_decoder
                           ? std::to_string(m.encoder_layers) + " + " + std::to_string(m.decoder_layers) +
                                 " layers (encoder + decoder)"
                           : std::to_string(m.decoder_layers) + " layer" + (m.decoder_layers > 1 ? "s" : "");
  return layers + ", d_model " + std::to_string(m.d_model) + ", " + std::to_string(m.n_heads) +
         " heads, d_ff " + std::to_string(m.d_ff) + ", pre-norm, no dropout; AdamW lr " + fixed(m.lr, 4) +
         " (warmup " + std::to_string(m.warmup) + ", cosine), clip 1, " + std::to_string(m.steps) +
         " steps of 32 sequences";
}

std::string seconds_text(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else
    std::snprintf(buf, sizeof buf, "%d min %02d s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

}  // namespace relgrad::experiments
