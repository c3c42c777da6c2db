// run_music_bench's training, evaluation and probes (train/instruments/music_bench.h); the tables, the
// files and the CI checks are in music_bench_report.cpp.
#include "train/instruments/music_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"
#include "core/device.h"
#include "core/version.h"
#include "train/config/run_options.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/probe.h"
#include "train/instruments/recipe.h"
#include "train/instruments/study.h"
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
  RunConfig c = bench_recipe(s, encoder_decoder, layers, seed);
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

// The attention modules a probe reports, in the model's order: a decoder-only model's self-attention
// layers, or a harmoniser's cross-attention layers. A record names a head's module by its index here
// (a record holds numbers only); record_probe checks that the probe named each so.
std::vector<std::string> probed_layers(bool cross, int64_t layers) {
  std::vector<std::string> names;
  for (int64_t k = 0; k < layers; ++k)
    names.push_back(cross ? "decoder.layers." + std::to_string(k) + ".cross_attn"
                          : "layers." + std::to_string(k) + ".self_attn");
  return names;
}

constexpr const char* kCurveKinds[] = {"response", "attention_mass"};  // ProbeCurve::kind

// The two files write_probe_pictures draws of one (layer, kind) group, relative to the out dir.
std::vector<std::string> picture_files(const std::string& dir, const std::string& layer, const char* kind) {
  const std::string stem = (std::filesystem::path(dir) / (layer + "." + kind)).string();
  return {stem + ".heatmap.png", stem + ".curves.svg"};
}

// A head summary's numbers but its layer and offsets, as its record names them (head.N.NAME):
// `f(name, field)` for each, to write them into a record or read them back.
template <class F>
void head_numbers(HeadSummary& h, F&& f) {
  f("head", h.head), f("mass_at_zero", h.mass_at_zero), f("mass_same_voice", h.mass_same_voice);
  f("mass_next_voice", h.mass_next_voice), f("mass_near", h.mass_near), f("response_peak", h.response_peak);
  f("has_response", h.has_response);
}

// The probe's curves into `r`: the pictures drawn into out_dir/dir (picture_layer.K, picture_kind.K per
// (layer, kind) group drawn) and each head's summary (heads, then head.N.*).
void record_probe(StudyRecord& r, const std::vector<ProbeCurve>& curves, const std::string& out_dir,
                  const std::string& dir, const std::vector<std::string>& layers) {
  const std::vector<std::string> written = write_probe_pictures(curves, (std::filesystem::path(out_dir) / dir).string());
  std::vector<double> picture_layer, picture_kind;
  for (size_t n = 0; n < written.size(); n += 2) {
    std::vector<std::string> files;
    for (size_t f = n; f < std::min(n + 2, written.size()); ++f)
      files.push_back(std::filesystem::path(written[f]).lexically_relative(out_dir).string());
    bool found = false;
    for (size_t l = 0; l < layers.size() && !found; ++l)
      for (size_t k = 0; k < 2 && !found; ++k)
        if (picture_files(dir, layers[l], kCurveKinds[k]) == files) {
          found = true;
          picture_layer.push_back(static_cast<double>(l)), picture_kind.push_back(static_cast<double>(k));
        }
    RG_CHECK(found, kOp, "the probe drew '", files.front(), "', which is no picture pair of ", bench::joined(layers));
  }
  r.set_series("picture_layer", picture_layer);
  r.set_series("picture_kind", picture_kind);
  std::vector<HeadSummary> heads = summarise_heads(curves, "");
  r.set("heads", static_cast<double>(heads.size()));
  for (size_t n = 0; n < heads.size(); ++n) {
    const std::string p = "head." + std::to_string(n) + ".";
    const auto layer = std::find(layers.begin(), layers.end(), heads[n].layer);
    RG_CHECK(layer != layers.end(), kOp, "the probe named a layer '", heads[n].layer, "', none of ", bench::joined(layers));
    r.set(p + "layer", static_cast<double>(layer - layers.begin()));
    head_numbers(heads[n], [&](const char* name, auto& v) { r.set(p + name, static_cast<double>(v)); });
    r.set_series(p + "top_offset", std::vector<double>(heads[n].top_offsets.begin(), heads[n].top_offsets.end()));
    r.set_series(p + "top_mass", heads[n].top_mass);
  }
}

// record_probe's record back: the head summaries of `model` and the pictures' paths.
void read_probe(const StudyRecord& r, const std::string& model, const std::string& dir,
                const std::vector<std::string>& layers, MusicBenchResult& result) {
  const std::vector<double> picture_layer = r.series("picture_layer"), picture_kind = r.series("picture_kind");
  for (size_t n = 0; n < picture_layer.size(); ++n)
    for (const std::string& file : picture_files(dir, layers.at(static_cast<size_t>(picture_layer[n])),
                                                 kCurveKinds[static_cast<size_t>(picture_kind.at(n))]))
      result.pictures.push_back(file);
  for (size_t n = 0; n < static_cast<size_t>(r.get("heads")); ++n) {
    const std::string p = "head." + std::to_string(n) + ".";
    HeadSummary h;
    h.model = model;
    h.layer = layers.at(static_cast<size_t>(r.get(p + "layer")));
    head_numbers(h, [&](const char* name, auto& v) { v = static_cast<std::decay_t<decltype(v)>>(r.get(p + name)); });
    for (double d : r.series(p + "top_offset")) h.top_offsets.push_back(static_cast<int64_t>(d));
    h.top_mass = r.series(p + "top_mass");
    result.heads.push_back(std::move(h));
  }
}

// The decoder-only model's heads on the first held-out evaluation batch.
std::vector<ProbeCurve> probe_decoder(RunModel& model, const ChoraleSet& set, int64_t context) {
  const std::vector<Batch> batches = chorale_eval_batches(set, ChoraleSplit::Valid, context, kEvalBatch);
  RG_CHECK(!batches.empty(), kOp, "the valid split has no chorale to probe");
  const std::vector<AttentionRecord> records = record_attention(model, batches.front().to(model.device));
  std::vector<ProbeCurve> curves = positional_response(records, kHeadReach);
  for (ProbeCurve& c : attention_mass_by_offset(records, kHeadReach)) curves.push_back(std::move(c));
  return curves;
}

// The harmoniser's cross heads on the first held-out chorales, with π(i) = ⌊i / 3⌋, the query's own
// 16th step on the source axis, whatever alignment the model used: δ = 0 is then the soprano note
// sounding with the predicted alto / tenor / bass note. (The probe places queries by the model's
// cross_alignment; an explicitly aligned model's positions are the batch's tgt_positions, set here.)
std::vector<ProbeCurve> probe_cross(RunModel& model, const ChoraleSet& set) {
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
  return curves;
}

// What every model of a plan shares: the data, the held-out batches and what a model's fingerprint
// holds beyond its config.
struct Plan {
  std::string out_dir, common;  // common: the version, the chorale file and the evaluation
  ChoraleSet set;
  std::vector<Batch> valid, test, hvalid, htest;
};

// A model on the study spine (train/instruments/study.h): `config` trained, scored on `valid` and
// `test`, probed into out_dir/`probe_dir` when that is not empty (`layers`: probed_layers). Its record:
// params, valid_nll, test_nll, valid_accuracy, test_accuracy, valid_tokens, test_tokens, seconds, and the
// probe's (record_probe).
StudyModel music_model(const std::shared_ptr<const Plan>& plan, const RunConfig& config, bool harmony,
                       const std::string& key, const std::string& label, const std::string& probe_dir,
                       const std::vector<std::string>& layers) {
  RunConfig where_free = config;  // the same model wherever out_dir is spelt or moved
  where_free.train.out_dir.clear();
  StudyModel m;
  m.key = key;
  m.label = label;
  m.fingerprint = plan->common + "probe " + probe_dir + "\n" + config_to_toml(where_free);
  m.run = [plan, config, harmony, label, probe_dir, layers] {
    const auto t0 = std::chrono::steady_clock::now();
    std::ostringstream warnings;  // the shipped chorales skip nothing; a user file's are not ours to print
    Trainer trainer(trainer_options(config, &warnings), nullptr, &study_model_communicator());
    trainer.train();  // the path `relgrad train` takes; score() puts the model in eval mode
    RunModel& model = trainer.model();
    const Score v = score(model, harmony ? plan->hvalid : plan->valid);
    const Score t = score(model, harmony ? plan->htest : plan->test);
    StudyRecord r;
    r.set("params", static_cast<double>(parameter_count(model)));
    r.set("valid_nll", v.nll), r.set("test_nll", t.nll), r.set("valid_accuracy", v.accuracy);
    r.set("test_accuracy", t.accuracy), r.set("valid_tokens", static_cast<double>(v.tokens));
    r.set("test_tokens", static_cast<double>(t.tokens));
    r.line = label + ": valid NLL " + bench::fixed(v.nll, 3);
    if (!probe_dir.empty()) {
      const std::vector<ProbeCurve> curves =
          harmony ? probe_cross(model, plan->set) : probe_decoder(model, plan->set, config.data.context);
      record_probe(r, curves, plan->out_dir, probe_dir, layers);
    }
    if (harmony) {  // the best cross head's mass on the same 16th step's soprano note
      double best = 0;
      for (size_t n = 0; n < static_cast<size_t>(r.get("heads")); ++n)
        best = std::max(best, r.get("head." + std::to_string(n) + ".mass_at_zero"));
      r.set("same_step_mass", best);
      r.line += ", accuracy " + bench::fixed(v.accuracy, 3) + ", same-step cross mass " + bench::fixed(best, 3);
    } else {
      r.line += ", test NLL " + bench::fixed(t.nll, 3) + ", accuracy " + bench::fixed(v.accuracy, 3);
    }
    r.set("seconds", seconds_since(t0));
    return r;
  };
  return m;
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
  bench::check_known(kOp, "", "treatment", o.treatments, every_treatment(/*randomised=*/false));
  RG_CHECK(!o.out_dir.empty(), kOp, "out_dir is empty");
  RG_CHECK(!(o.full && o.pope_size), kOp, "--full and --pope-size are two sizes: choose one");
  Device::parse(o.device);  // a bad device names itself before anything trains
  std::filesystem::create_directories(o.out_dir);

  MusicBenchResult r;
  r.full = o.full;
  r.size = music_bench_size(o);
  r.resized = [o, &r]() mutable { return o.steps = -1, music_bench_size(o).steps != r.size.steps; }();
  const MusicBenchSize& s = r.size;
  const std::string chorales = o.chorales_path.empty() ? default_chorales_path() : o.chorales_path;
  auto plan = std::make_shared<Plan>();
  plan->out_dir = o.out_dir;
  plan->set = read_chorales(chorales);
  const ChoraleSet& set = plan->set;
  r.train_chorales = static_cast<int64_t>(set.train.size());
  r.valid_chorales = static_cast<int64_t>(set.valid.size());
  r.test_chorales = static_cast<int64_t>(set.test.size());
  std::tie(r.unigram_valid_nll, r.unigram_test_nll) = unigram_nll(set);
  plan->valid = chorale_eval_batches(set, ChoraleSplit::Valid, s.context, kEvalBatch);
  plan->test = chorale_eval_batches(set, ChoraleSplit::Test, s.context, kEvalBatch);
  if (o.harmony) {
    plan->hvalid = harmony_eval_batches(set, ChoraleSplit::Valid, kHarmonyEvalBatch);
    plan->htest = harmony_eval_batches(set, ChoraleSplit::Test, kHarmonyEvalBatch);
  }
  plan->common = std::string("relgrad ") + version() + "\nchorales " + file_fingerprint(chorales, kOp) + "\neval batch " +
                 std::to_string(kEvalBatch) + " " + std::to_string(kHarmonyEvalBatch) + " reach " +
                 std::to_string(kHeadReach) + " " + std::to_string(kCrossReach) + "\n";
  if (progress)
    *progress << "music-bench (" << (o.pope_size ? "PoPE size" : bench::form_name(o.full, r.resized, s.steps))
              << "): " << bench::counted(o.treatments.size(), "treatment") << " x "
              << bench::counted(o.seeds.size(), "seed") << ", " << s.steps << " steps each; unigram valid NLL "
              << bench::fixed(r.unigram_valid_nll, 3) << "\n"
              << std::flush;

  // The models in the tables' order: treatments × seeds, then the harmonisers at the first seed.
  struct Made {
    std::string treatment, label, probe_dir;  // label: the heads' model; treatment: the harmoniser's row
    uint64_t seed;
    std::vector<std::string> layers;
  };
  std::vector<Made> made;
  std::vector<StudyModel> models;
  const std::vector<std::string> self_layers = probed_layers(false, s.layers);
  for (const std::string& treatment : o.treatments)
    for (uint64_t seed : o.seeds) {
      const bool probed = (treatment == "huang" || treatment == "seed") && seed == o.seeds.front();
      const std::string key = treatment + "-s" + std::to_string(seed);
      made.push_back({treatment, treatment + " (seed " + std::to_string(seed) + ")",
                      probed ? "probe-" + file_safe(treatment) : "", seed, self_layers});
      models.push_back(music_model(plan, continue_config(o, s, treatment, seed), false, key,
                                   treatment + " seed " + std::to_string(seed), made.back().probe_dir, self_layers));
    }
  if (o.harmony) {
    std::vector<std::pair<std::string, std::string>> variants = {{"seed", "explicit"}, {"none", "left"}};
    if (o.full) variants.insert(variants.begin() + 1, {{"seed", "scaled"}, {"seed", "left"}});
    const uint64_t seed = o.seeds.front();
    const std::vector<std::string> cross_layers = probed_layers(true, s.harmony_layers);
    for (const auto& [cross, alignment] : variants) {
      const std::string row = cross == "none" ? "none" : cross + ", " + alignment;
      const std::string key = "harmony-" + cross + "-" + alignment + "-s" + std::to_string(seed);
      made.push_back({row, "harmony " + row + " (seed " + std::to_string(seed) + ")",
                      "probe-harmony-" + file_safe(cross + "-" + alignment), seed, cross_layers});
      models.push_back(music_model(plan, harmony_config(o, s, cross, alignment, seed), true, key, "harmony " + row,
                                   made.back().probe_dir, cross_layers));
    }
  }
  const std::vector<StudyRecord> records = run_study_models(kOp, models, o.out_dir, progress);

  const auto scores = [](const StudyRecord& rec, MusicScores& run) {
    run.params = static_cast<int64_t>(rec.get("params"));
    run.valid_nll = rec.get("valid_nll"), run.test_nll = rec.get("test_nll");
    run.valid_accuracy = rec.get("valid_accuracy"), run.test_accuracy = rec.get("test_accuracy");
    run.seconds = rec.get("seconds");
  };
  for (size_t i = 0; i < records.size(); ++i) {
    const StudyRecord& rec = records[i];
    const Made& m = made[i];
    if (!m.probe_dir.empty()) read_probe(rec, m.label, m.probe_dir, m.layers, r);
    if (i < o.treatments.size() * o.seeds.size()) {
      MusicBenchRun run;
      run.treatment = m.treatment, run.seed = m.seed;
      scores(rec, run);
      run.valid_tokens = static_cast<int64_t>(rec.get("valid_tokens"));
      run.test_tokens = static_cast<int64_t>(rec.get("test_tokens"));
      r.runs.push_back(run);
    } else {
      HarmonyRun h;
      h.label = m.treatment, h.seed = m.seed;
      scores(rec, h);
      h.same_step_mass = rec.get("same_step_mass");
      r.harmony.push_back(h);
    }
  }
  r.seconds = seconds_since(start);
  return r;
}

}  // namespace relgrad
