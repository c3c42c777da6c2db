// run_music_bench's training, evaluation and probes (train/instruments/music_bench.h); the tables, the
// files and the CI checks are in music_bench_report.cpp.
#include "train/instruments/music_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"
#include "core/device.h"
#include "train/config/run_options.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/probe.h"
#include "train/instruments/recipe.h"
#include "train/music/chorales.h"
#include "train/trainer/trainer.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "music-bench";
constexpr int64_t kEvalBatch = 8;         // rows per evaluation batch (whole chorales, decoder-only)
constexpr int64_t kHarmonyEvalBatch = 4;  // rows per evaluation batch (harmonisation: one chorale a row)
constexpr int64_t kHeadReach = 16;        // decoder-only heads: offsets −16 … 16 (four 16th steps)
constexpr int64_t kCrossReach = 12;       // cross heads: offsets −12 … 12 on the source axis

// ---- configs ------------------------------------------------------------------------------------

// The keys every run shares (recipe.h): the size, optimizer, loop and seed, no dropout, one eval batch
// at the end (the bench's own evaluation covers the whole splits), a checkpoint at the end only; the
// data file.
RunConfig base_config(const MusicBenchOptions& o, const MusicBenchSize& s, bool encoder_decoder,
                      int64_t layers, uint64_t seed, const std::string& label) {
  RecipeSize size;
  size.d_model = s.d_model, size.n_heads = s.n_heads, size.d_ff = s.d_ff;
  size.encoder_layers = encoder_decoder ? layers : 0, size.decoder_layers = layers;
  size.steps = s.steps, size.warmup = s.warmup, size.lr = s.lr;
  RunConfig c = recipe_config(encoder_decoder, size, seed);
  c.data.source = "chorales";
  c.data.chorales_path = o.chorales_path;
  c.data.batch_size = s.batch_size;
  c.data.seed = seed;
  c.model.dropout = s.dropout;
  c.model.norm = s.rms_norm ? NormKind::RMSNorm : NormKind::LayerNorm;
  set_bench_loop(c, (std::filesystem::path(o.out_dir) / "runs" / label).string());
  c.train.device = o.device;
  return c;
}

RunConfig continue_config(const MusicBenchOptions& o, const MusicBenchSize& s, const std::string& treatment,
                          uint64_t seed) {
  RunConfig c = base_config(o, s, false, s.layers, seed, treatment + "-s" + std::to_string(seed));
  c.data.chorale_task = ChoraleTask::Continue;
  c.data.context = s.context;
  // Each scheme sized to cover every offset of a training window (FitRule::Window, layers/schemes.h).
  set_decoder_treatment(c, treatment, SchemeFit{FitRule::Window, s.context});
  return c;
}

// Harmonisers: T5 bias in both self-attentions (the project's default), the treatment in
// cross-attention. `alignment`: "left", "scaled" or "explicit" (Batch::tgt_positions, ⌊i / 3⌋).
RunConfig harmony_config(const MusicBenchOptions& o, const MusicBenchSize& s, const std::string& cross,
                         const std::string& alignment, uint64_t seed) {
  RunConfig c = base_config(o, s, true, s.harmony_layers, seed,
                            "harmony-" + cross + "-" + alignment + "-s" + std::to_string(seed));
  const SchemeFit self_fit{FitRule::Window, 3 * s.harmony_steps + 1};
  c.model.encoder_self = fitted(RunConfig::defaults().model.encoder_self, self_fit);
  c.model.decoder_self = fitted(RunConfig::defaults().model.decoder_self, self_fit);
  // The cross scheme covers every offset of a training window under any alignment (left: δ down to −3S).
  if (treatment_kind(cross) == TreatmentKind::Relative) {
    PositionalConfig p;
    p.scheme = cross;
    c.model.cross = fitted(p, SchemeFit{FitRule::Window, 3 * s.harmony_steps + 2});
  }
  c.model.cross_alignment = alignment == "explicit" ? CrossAlignment::Explicit
                            : alignment == "scaled" ? CrossAlignment::Scaled
                                                    : CrossAlignment::Left;
  c.data.chorale_task = ChoraleTask::Harmonize;
  c.data.harmony_steps = s.harmony_steps;
  return c;
}

// ---- training and evaluation --------------------------------------------------------------------

struct Score {
  double nll = 0, accuracy = 0;
  int64_t tokens = 0;
};

// The batch on the model's device. Its target positions reach the model only when it places its
// cross-attention queries by them (RunModel::logits, train/trainer/run.cpp).
Batch for_model(const Batch& host, const RunModel& model) { return host.to(model.device); }

Score score(RunModel& model, const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  model.module->eval();
  double loss_sum = 0;
  int64_t tokens = 0, correct = 0;
  for (const Batch& host : batches) {
    const Batch b = for_model(host, model);
    Tensor logits = model.logits(b);  // (B, T, V)
    const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
    const Tensor& targets = RunModel::targets(b);
    loss_sum += cross_entropy(logits.reshape({B * T, V}), targets.reshape({B * T}),
                              CrossEntropyOptions().set_reduction(Reduction::Sum))
                    .item();
    const std::vector<int64_t> predicted = argmax(logits, -1).contiguous().to_vector<int64_t>();
    const std::vector<int64_t> wanted = targets.contiguous().to_vector<int64_t>();
    for (size_t k = 0; k < wanted.size(); ++k) {
      if (wanted[k] == kIgnoreIndex) continue;
      ++tokens;
      correct += predicted[k] == wanted[k];
    }
  }
  Score s;
  s.tokens = tokens;
  s.nll = tokens ? loss_sum / static_cast<double>(tokens) : NAN;
  s.accuracy = tokens ? static_cast<double>(correct) / static_cast<double>(tokens) : NAN;
  RG_CHECK(std::isfinite(s.nll), kOp, "evaluation scored no token or gave a non-finite NLL (", s.nll, ")");
  return s;
}

int64_t parameter_count(RunModel& model) {
  int64_t n = 0;
  for (const Tensor& p : model.module->parameters()) n += p.numel();
  return n;
}

// Trains `config` the way `relgrad train` does; the trained model comes back in eval mode.
std::unique_ptr<Trainer> train_run(const RunConfig& config) {
  std::ostringstream
      warnings;  // the shipped chorales skip nothing; a user file's warnings are not ours to print
  TrainerOptions options = trainer_options(config, &warnings);
  auto trainer = std::make_unique<Trainer>(std::move(options), nullptr);
  trainer->train();
  trainer->model().module->eval();
  return trainer;
}

// The train split's token frequencies (add-one over the vocabulary): the NLL of a model that ignores
// the context, the floor every trained model must beat.
std::pair<double, double> unigram_nll(const ChoraleSet& set) {
  std::vector<double> count(static_cast<size_t>(kChoraleVocabSize), 1.0);
  double total = static_cast<double>(kChoraleVocabSize);
  for (const Chorale& c : set.train) {
    const std::vector<int64_t> t = chorale_tokens(c);
    for (size_t n = 1; n < t.size(); ++n) count[static_cast<size_t>(t[n])] += 1, total += 1;
  }
  auto nll = [&](const std::vector<Chorale>& split) {
    double sum = 0;
    int64_t n_tokens = 0;
    for (const Chorale& c : split) {
      const std::vector<int64_t> t = chorale_tokens(c);
      for (size_t n = 1; n < t.size(); ++n)
        sum -= std::log(count[static_cast<size_t>(t[n])] / total), ++n_tokens;
    }
    return n_tokens ? sum / static_cast<double>(n_tokens) : NAN;
  };
  return {nll(set.valid), nll(set.test)};
}

// ---- probes -------------------------------------------------------------------------------------

std::string file_safe(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '-';
  return s;
}

std::vector<std::string> relative_to(const std::vector<std::string>& paths, const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& p : paths) out.push_back(std::filesystem::path(p).lexically_relative(dir).string());
  return out;
}

// The offsets of `mass` in decreasing mass, `count` of them.
void top_offsets(const ProbeCurve& mass, size_t count, HeadSummary& h) {
  std::vector<size_t> order(mass.delta.size());
  for (size_t n = 0; n < order.size(); ++n) order[n] = n;
  auto value = [&](size_t n) { return std::isfinite(mass.value[n]) ? mass.value[n] : -1.0; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value(a) > value(b); });
  for (size_t n = 0; n < std::min(count, order.size()); ++n) {
    h.top_offsets.push_back(mass.delta[order[n]]);
    h.top_mass.push_back(value(order[n]));
  }
}

double mass_where(const ProbeCurve& mass, const std::function<bool(int64_t)>& pick) {
  double sum = 0;
  for (size_t n = 0; n < mass.delta.size(); ++n)
    if (pick(mass.delta[n]) && std::isfinite(mass.value[n])) sum += mass.value[n];
  return sum;
}

// Per head of every attention module of `curves` (both kinds from probe()): the summary above.
std::vector<HeadSummary> summarise_heads(const std::vector<ProbeCurve>& curves, const std::string& model) {
  std::vector<HeadSummary> heads;
  for (const ProbeCurve& c : curves) {
    if (c.kind != "attention_mass") continue;
    HeadSummary h;
    h.model = model;
    h.layer = c.layer;
    h.head = c.head;
    top_offsets(c, 4, h);
    h.mass_at_zero = mass_where(c, [](int64_t d) { return d == 0; });
    h.mass_same_voice = mass_where(c, [](int64_t d) { return d < 0 && d % 4 == 0; });
    h.mass_next_voice = mass_where(c, [](int64_t d) { return d < 0 && (-d) % 4 == 3; });
    h.mass_near = mass_where(c, [](int64_t d) { return d <= -1 && d >= -3; });
    for (const ProbeCurve& r : curves) {
      if (r.kind != "response" || r.head != c.head) continue;
      if (std::find(r.shared_by.begin(), r.shared_by.end(), c.layer) == r.shared_by.end()) continue;
      if (std::none_of(r.value.begin(), r.value.end(), [](double v) { return std::isfinite(v); })) continue;
      h.response_peak = peak_offset(r);
      h.has_response = true;
    }
    heads.push_back(std::move(h));
  }
  return heads;
}

// The decoder-only model's heads on the first held-out evaluation batch; pictures into `dir`.
std::vector<HeadSummary> probe_decoder(RunModel& model, const ChoraleSet& set, int64_t context,
                                       const std::string& label, const std::string& dir,
                                       std::vector<std::string>& pictures) {
  const std::vector<Batch> batches = chorale_eval_batches(set, ChoraleSplit::Valid, context, kEvalBatch);
  RG_CHECK(!batches.empty(), kOp, "the valid split has no chorale to probe");
  const std::vector<AttentionRecord> records = record_attention(model, batches.front().to(model.device));
  std::vector<ProbeCurve> curves = positional_response(records, kHeadReach);
  for (ProbeCurve& c : attention_mass_by_offset(records, kHeadReach)) curves.push_back(std::move(c));
  for (const std::string& p : write_probe_pictures(curves, dir)) pictures.push_back(p);
  return summarise_heads(curves, label);
}

// The harmoniser's cross heads on the first held-out chorales, with π(i) = ⌊i / 3⌋, the query's own
// 16th step on the source axis, whatever alignment the model used: δ = 0 is then the soprano note
// sounding with the predicted alto / tenor / bass note. (The probe places queries by the model's
// cross_alignment; an explicitly aligned model's positions are the batch's tgt_positions, set here.)
std::vector<HeadSummary> probe_cross(RunModel& model, const ChoraleSet& set,
                                     const std::string& label, const std::string& dir,
                                     std::vector<std::string>& pictures, double& best_mass) {
  ChoraleSet few;
  for (size_t n = 0; n < std::min<size_t>(set.valid.size(), kHarmonyEvalBatch); ++n)
    few.valid.push_back(set.valid[n]);
  const std::vector<Batch> batches = harmony_eval_batches(few, ChoraleSplit::Valid, kHarmonyEvalBatch);
  RG_CHECK(!batches.empty() && batches.front().tgt_positions.defined(), kOp,
           "harmony_eval_batches gave no batch with tgt_positions to probe");
  const Batch batch = for_model(batches.front(), model);
  std::vector<AttentionRecord> records = record_attention(model, batch), cross;
  const std::vector<int64_t> step_of = batches.front().tgt_positions.contiguous().to_vector<int64_t>();
  for (AttentionRecord& r : records) {
    if (r.place != "cross") continue;
    RG_CHECK(r.positions.size() == step_of.size(), kOp, r.layer, ": ", r.positions.size(), " queries, ",
             step_of.size(), " target positions");
    r.positions = step_of;
    cross.push_back(std::move(r));
  }
  std::vector<ProbeCurve> curves = positional_response(cross, kCrossReach);
  for (ProbeCurve& c : attention_mass_by_offset(cross, kCrossReach)) curves.push_back(std::move(c));
  for (const std::string& p : write_probe_pictures(curves, dir)) pictures.push_back(p);
  std::vector<HeadSummary> heads = summarise_heads(curves, label);
  best_mass = 0;
  for (const HeadSummary& h : heads) best_mass = std::max(best_mass, h.mass_at_zero);
  return heads;
}

void progress_line(std::ostream* out, const std::string& text) {
  if (out) *out << text << "\n" << std::flush;
}

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

MusicBenchSize music_bench_size(const MusicBenchOptions& o) {
  MusicBenchSize s;
  if (!o.full) {
    // CI: about a tenth of the full run's work per model, two treatments (see run_music_bench's defaults).
    s.d_model = 64, s.n_heads = 4, s.d_ff = 256, s.layers = 2;
    s.context = 128, s.batch_size = 16, s.steps = 300, s.warmup = 30, s.lr = 3e-3;
    s.harmony_steps = 16, s.harmony_layers = 2;
  }
  if (o.pope_size) {
    // The paper's Table 2 setup (its learning-rate warm-up is not given: the full form's 100 steps).
    s.d_model = 256, s.n_heads = 8, s.d_ff = 1024, s.layers = 6;
    s.context = 2048, s.batch_size = 4, s.steps = 3000, s.warmup = 100, s.lr = 6e-4;
    s.dropout = 0.2, s.rms_norm = true;
  }
  bench::override_steps(o.steps, s.steps, s.warmup);
  return s;
}

MusicBenchResult music_bench_results(const MusicBenchOptions& options, std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadCountGuard restore_threads;
  MusicBenchOptions o = options;
  if (o.treatments.empty())
    o.treatments = o.full ? every_treatment(/*randomised=*/false) : std::vector<std::string>{"none", "huang"};
  if (o.seeds.empty()) o.seeds = o.full ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{1, 2};
  const std::vector<std::string> every = every_treatment(/*randomised=*/false);
  for (const std::string& t : o.treatments)
    RG_CHECK(std::find(every.begin(), every.end(), t) != every.end(), kOp, "unknown treatment '", t, "' (",
             bench::joined(every), ")");
  RG_CHECK(!o.out_dir.empty(), kOp, "out_dir is empty");
  RG_CHECK(!(o.full && o.pope_size), kOp, "--full and --pope-size are two sizes: choose one");
  Device::parse(o.device);  // a bad device names itself before anything trains
  std::filesystem::create_directories(o.out_dir);

  MusicBenchResult r;
  r.full = o.full;
  r.size = music_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, music_bench_size(o).steps != r.size.steps; }();
  const MusicBenchSize& s = r.size;
  const ChoraleSet set = read_chorales(o.chorales_path.empty() ? default_chorales_path() : o.chorales_path);
  r.train_chorales = static_cast<int64_t>(set.train.size());
  r.valid_chorales = static_cast<int64_t>(set.valid.size());
  r.test_chorales = static_cast<int64_t>(set.test.size());
  std::tie(r.unigram_valid_nll, r.unigram_test_nll) = unigram_nll(set);
  const std::vector<Batch> valid = chorale_eval_batches(set, ChoraleSplit::Valid, s.context, kEvalBatch);
  const std::vector<Batch> test = chorale_eval_batches(set, ChoraleSplit::Test, s.context, kEvalBatch);
  progress_line(progress, std::string("music-bench (") +
                              (o.pope_size ? "PoPE size" : bench::form_name(o.full, r.resized, s.steps)) + "): " +
                              bench::counted(o.treatments.size(), "treatment") + " x " +
                              bench::counted(o.seeds.size(), "seed") + ", " + std::to_string(s.steps) +
                              " steps each; unigram valid NLL " + fixed3(r.unigram_valid_nll));

  for (const std::string& treatment : o.treatments)
    for (uint64_t seed : o.seeds) {
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<Trainer> trainer = train_run(continue_config(o, s, treatment, seed));
      RunModel& model = trainer->model();
      MusicBenchRun run;
      run.treatment = treatment;
      run.seed = seed;
      run.params = parameter_count(model);
      const Score v = score(model, valid), t = score(model, test);
      run.valid_nll = v.nll, run.valid_accuracy = v.accuracy, run.valid_tokens = v.tokens;
      run.test_nll = t.nll, run.test_accuracy = t.accuracy, run.test_tokens = t.tokens;
      if ((treatment == "huang" || treatment == "seed") && seed == o.seeds.front()) {
        const std::string label = treatment + " (seed " + std::to_string(seed) + ")";
        const std::string dir =
            (std::filesystem::path(o.out_dir) / ("probe-" + file_safe(treatment))).string();
        for (HeadSummary& h : probe_decoder(model, set, s.context, label, dir, r.pictures))
          r.heads.push_back(h);
      }
      run.seconds = seconds_since(t0);
      progress_line(progress, "  " + treatment + " seed " + std::to_string(seed) + ": valid NLL " +
                                  fixed3(run.valid_nll) + ", test NLL " + fixed3(run.test_nll) +
                                  ", accuracy " + fixed3(run.valid_accuracy) + ", " + fixed3(run.seconds) +
                                  " s");
      r.runs.push_back(run);
    }

  if (o.harmony) {
    const std::vector<Batch> hvalid = harmony_eval_batches(set, ChoraleSplit::Valid, kHarmonyEvalBatch);
    const std::vector<Batch> htest = harmony_eval_batches(set, ChoraleSplit::Test, kHarmonyEvalBatch);
    std::vector<std::pair<std::string, std::string>> variants = {{"seed", "explicit"}, {"none", "left"}};
    if (o.full) variants.insert(variants.begin() + 1, {{"seed", "scaled"}, {"seed", "left"}});
    const uint64_t seed = o.seeds.front();
    for (const auto& [cross, alignment] : variants) {
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<Trainer> trainer = train_run(harmony_config(o, s, cross, alignment, seed));
      RunModel& model = trainer->model();
      HarmonyRun h;
      h.label = cross == "none" ? "none" : cross + ", " + alignment;
      h.seed = seed;
      h.params = parameter_count(model);
      const Score v = score(model, hvalid), t = score(model, htest);
      h.valid_nll = v.nll, h.valid_accuracy = v.accuracy, h.test_nll = t.nll, h.test_accuracy = t.accuracy;
      const std::string label = "harmony " + h.label + " (seed " + std::to_string(seed) + ")";
      const std::string dir =
          (std::filesystem::path(o.out_dir) / ("probe-harmony-" + file_safe(cross + "-" + alignment)))
              .string();
      for (HeadSummary& head :
           probe_cross(model, set, label, dir, r.pictures, h.same_step_mass))
        r.heads.push_back(head);
      h.seconds = seconds_since(t0);
      progress_line(progress, "  harmony " + h.label + ": valid NLL " + fixed3(h.valid_nll) + ", accuracy " +
                                  fixed3(h.valid_accuracy) + ", same-step cross mass " +
                                  fixed3(h.same_step_mass) + ", " + fixed3(h.seconds) + " s");
      r.harmony.push_back(h);
    }
  }
  r.pictures = relative_to(r.pictures, o.out_dir);
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace relgrad
