// Golden training runs: whole models (DecoderLM, EncoderDecoder) against a standalone PyTorch 1.13
// reimplementation written from docs/checkpoint-format.md (tools/gen_golden_train.py, not calling
// relgrad), one file tests/golden/train_<config>.safetensors per configuration. Each file holds the
// config (metadata cfg.*), random weights under relgrad's state_dict names (init.*), ten batches,
// the float64 logits of the initial weights, and ten steps of AdamW (decay_groups, clipping at 1,
// warmup + cosine schedule; metadata train.*) in float64 (losses, grad norms, final weights) and
// float32 (losses, grad norms). Here the same model is built from the same TransformerConfig, the
// weights are loaded with load_state_dict (strict: the names and shapes must match exactly) and the
// run is replayed with relgrad's own AdamW, LrSchedule and clip_grad_norm_, as a training loop would.
// The float64 run also checks the state_dict order, the AdamW state against torch's (for the first
// and last parameter of each group) and a checkpoint of the trained model (names, metadata keys, the
// checksum recomputed from the raw bytes, restore) against docs/checkpoint-format.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "file_testing.h"
#include "layers/models.h"
#include "testing.h"
#include "train/trainer/checkpoint.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"

using namespace relgrad;

namespace {

constexpr double kLogitsAtol = 1e-10, kLogitsRtol = 1e-10;  // float64 forward
constexpr double kTight = 1e-9;                              // float64 losses, grad norms, final weights
constexpr double kLoss32 = 1e-4;                             // float32 losses (PyTorch float32 vs relgrad float32)
const std::string kHint = "regenerate with /usr/bin/python3 tools/gen_golden_train.py if the generator changed";

struct Golden {
  std::string name;
  SafetensorsFile file;

  explicit Golden(const std::string& config)
      : name("train_" + config),
        file(load_safetensors(std::string(RELGRAD_GOLDEN_DIR) + "/train_" + config + ".safetensors")) {
    REQUIRE(meta("generator") == "tools/gen_golden_train.py");
  }
  std::string meta(const std::string& key) const {
    auto it = file.metadata.find(key);
    std::string report = name + " has no metadata '" + key + "'; " + kHint;
    REQUIRE_MESSAGE(it != file.metadata.end(), report);
    return it->second;
  }
  double meta_double(const std::string& key) const { return std::stod(meta(key)); }
  int64_t meta_int(const std::string& key) const { return std::stoll(meta(key)); }
  Tensor at(const std::string& key) const {
    auto it = file.tensors.find(key);
    std::string report = name + " has no tensor '" + key + "'; " + kHint;
    REQUIRE_MESSAGE(it != file.tensors.end(), report);
    return it->second;
  }
  bool encoder_decoder() const { return meta("model") == "encoder-decoder"; }
  // The tensors under `prefix`, with the prefix removed (init.*, final.*).
  std::vector<std::pair<std::string, Tensor>> with_prefix(const std::string& prefix) const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [key, t] : file.tensors)
      if (key.compare(0, prefix.size(), prefix) == 0) out.emplace_back(key.substr(prefix.size()), t);
    return out;
  }
};

bool parse_bool(const std::string& s) {
  INFO("config value '" << s << "'");
  REQUIRE((s == "true" || s == "false"));
  return s == "true";
}

// The TransformerConfig the file describes: every cfg.* key is read, and every one must be known. The
// later fields (cross_explicit, absolute_position, max_positions) are in the files of configurations that
// use them, all three together; a file without them has their defaults.
TransformerConfig config_of(const Golden& g) {
  TransformerConfig c;
  int64_t scheme_knobs = 0;  // a scheme's own keys, in the files of the places that use it (cope_positions)
  auto place = [&](const std::string& key, PositionalConfig& p, const std::string& field, const std::string& v) {
    if (field == "scheme") p.scheme = v;
    else if (field == "max_length") p.max_length = std::stoll(v);
    else if (field == "out_of_range")
      p.out_of_range = v == "zero" ? OutOfRange::Zero : v == "clip" ? OutOfRange::Clip : OutOfRange::Error;
    else if (field == "clip") p.clip = std::stoll(v);
    else if (field == "shaw_values") p.shaw_values = parse_bool(v);
    else if (field == "per_head") p.per_head = parse_bool(v);
    else if (field == "num_buckets") p.num_buckets = std::stoll(v);
    else if (field == "max_distance") p.max_distance = std::stoll(v);
    else if (field == "rope_base") p.rope_base = std::stod(v);
    else if (field == "cope_positions") p.cope_positions = std::stoll(v), ++scheme_knobs;
    else if (field == "xpos_scale_base") p.xpos_scale_base = std::stod(v), ++scheme_knobs;
    else if (field == "rope_fraction") p.rope_fraction = std::stod(v), ++scheme_knobs;
    else if (field == "rope_scaling") p.rope_scaling = kRopeScalingNames.find(v).value(), ++scheme_knobs;
    else if (field == "rope_scaling_factor") p.rope_scaling_factor = std::stod(v), ++scheme_knobs;
    else if (field == "rope_original_length") p.rope_original_length = std::stoll(v), ++scheme_knobs;
    else if (field == "kerple_variant") p.kerple_variant = kKerpleVariantNames.find(v).value(), ++scheme_knobs;
    else if (field == "sandwich_dim") p.sandwich_dim = std::stoll(v), ++scheme_knobs;
    else if (field == "dynamic_bias_depth") p.dynamic_bias_depth = std::stoll(v), ++scheme_knobs;
    else if (field == "dynamic_bias_log_distance") p.dynamic_bias_log_distance = parse_bool(v), ++scheme_knobs;
    else if (field == "fire_width") p.fire_width = std::stoll(v), ++scheme_knobs;
    else if (field == "fire_threshold") p.fire_threshold = std::stoll(v), ++scheme_knobs;
    else FAIL(g.name << ": unknown config key " << key);
  };
  int64_t fields = 0, later_fields = 0;
  bool explicit_cross = false;  // cfg.cross_explicit: the file's flag beside its alignment name
  for (const auto& [key, v] : g.file.metadata) {
    if (key.compare(0, 4, "cfg.") != 0) continue;
    ++fields;
    const std::string k = key.substr(4);
    if (k == "vocab_size") c.vocab_size = std::stoll(v);
    else if (k == "src_vocab_size") c.src_vocab_size = std::stoll(v);
    else if (k == "d_model") c.d_model = std::stoll(v);
    else if (k == "n_heads") c.n_heads = std::stoll(v);
    else if (k == "d_ff") c.d_ff = std::stoll(v);
    else if (k == "n_encoder_layers") c.n_encoder_layers = std::stoll(v);
    else if (k == "n_decoder_layers") c.n_decoder_layers = std::stoll(v);
    else if (k == "activation") c.activation = activation_from_name(v, "golden");
    else if (k == "norm") c.norm = norm_from_name(v, "golden");
    else if (k == "pre_norm") c.pre_norm = parse_bool(v);
    else if (k == "dropout") c.dropout = std::stod(v);
    else if (k == "norm_eps") c.norm_eps = std::stod(v);
    else if (k == "tie_weights") c.tie_weights = parse_bool(v);
    else if (k == "cross_explicit") explicit_cross = parse_bool(v), ++later_fields;
    else if (k == "absolute_position") c.absolute_position = absolute_position_from_name(v, "golden"), ++later_fields;
    else if (k == "max_positions") c.max_positions = std::stoll(v), ++later_fields;
    else if (k == "cross_alignment")
      c.cross_alignment = v == "left" ? CrossAlignment::Left : v == "right" ? CrossAlignment::Right : CrossAlignment::Scaled;
    else if (k.compare(0, 13, "encoder_self.") == 0) place(key, c.encoder_self, k.substr(13), v);
    else if (k.compare(0, 13, "decoder_self.") == 0) place(key, c.decoder_self, k.substr(13), v);
    else if (k.compare(0, 6, "cross.") == 0) place(key, c.cross, k.substr(6), v);
    else FAIL(g.name << ": unknown config key " << key);
  }
  if (explicit_cross) c.cross_alignment = CrossAlignment::Explicit;
  REQUIRE_MESSAGE((later_fields == 0 || later_fields == 3), g.name << " has " << later_fields
                                                                << " of the 3 later cfg.* keys; " << kHint);
  REQUIRE_MESSAGE(fields == 14 + later_fields + 3 * 9 + scheme_knobs,
                  g.name << " has " << fields << " cfg.* keys; " << kHint);
  return c;
}

// One model of either kind, built with a private generator (the default one is left alone).
struct Model {
  std::unique_ptr<DecoderLM> lm;
  std::unique_ptr<EncoderDecoder> encdec;

  Model(const Golden& g, DType dtype) {
    Generator init(7);
    TransformerConfig c = config_of(g);
    if (g.encoder_decoder()) encdec = std::make_unique<EncoderDecoder>(c, &init);
    else lm = std::make_unique<DecoderLM>(c, &init);
    module().to(dtype);
    module().load_state_dict(g.with_prefix("init."));  // strict: every name and shape must match
  }
  Module& module() { return lm ? static_cast<Module&>(*lm) : static_cast<Module&>(*encdec); }

  // Logits (B, T, V) of batch s; with cross_explicit the batch's tgt_positions place the cross queries.
  Tensor forward(const Golden& g, int64_t s) {
    const std::string b = "batch" + std::to_string(s) + ".";
    if (lm) return lm->forward(g.at(b + "tokens"), g.at(b + "mask"));
    const Tensor positions = encdec->config.explicit_cross() ? g.at(b + "tgt_positions") : Tensor();
    return encdec->forward(g.at(b + "src"), g.at(b + "tgt"), g.at(b + "src_mask"), g.at(b + "tgt_mask"),
                           positions);
  }
};

struct Trajectory {
  std::vector<double> losses, norms, lrs;
};

// The training loop of train/optim/optim.h, with the file's hyperparameters; the optimizer stays in `keep`.
Trajectory train(const Golden& g, Model& m, std::unique_ptr<AdamW>& keep) {
  const double max_lr = g.meta_double("train.max_lr");
  keep = std::make_unique<AdamW>(
      decay_groups(m.module().named_parameters(), max_lr, g.meta_double("train.weight_decay")),
      AdamWOptions(max_lr)
          .betas(g.meta_double("train.beta1"), g.meta_double("train.beta2"))
          .eps(g.meta_double("train.eps")));
  AdamW& opt = *keep;
  LrSchedule schedule(max_lr, g.meta_int("train.warmup_steps"), g.meta_int("train.total_steps"),
                      g.meta_double("train.min_lr"));
  const double max_norm = g.meta_double("train.max_norm");
  Trajectory t;
  const int64_t steps = g.meta_int("steps");
  for (int64_t step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor logits = m.forward(g, step);  // (B, T, V)
    const int64_t n = logits.size(0) * logits.size(1), V = logits.size(2);
    Tensor targets = g.at("batch" + std::to_string(step) + ".targets");
    Tensor loss = cross_entropy(logits.reshape({n, V}), targets.reshape({n}));  // ignore_index −100, mean
    loss.backward();
    t.norms.push_back(clip_grad_norm_(m.module().parameters(), max_norm));
    const double lr = schedule.lr_at(step);
    opt.set_lr(lr);
    opt.step();
    t.losses.push_back(loss.item());
    t.lrs.push_back(lr);
  }
  return t;
}

// max |a − b| over all elements (shapes must be equal).
double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  std::vector<double> x = a.detach().to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> y = b.to(kFloat64).contiguous().to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

void check_series(const Golden& g, const std::vector<double>& actual, const std::string& key, double atol,
                  double rtol) {
  std::vector<double> expected = g.at(key).to_vector<double>();
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO(g.name << " " << key << " step " << i << ": relgrad " << actual[i] << ", PyTorch " << expected[i] << " ("
                << kHint << ")");
    CHECK(std::fabs(actual[i] - expected[i]) <= atol + rtol * std::fabs(expected[i]));
  }
  MESSAGE(g.name << " " << key << ": max |relgrad - PyTorch| = " << max_abs_diff(actual, expected));
}

// docs §2: state_dict() order (which fixes named_parameters() and so the optimizer's param indices).
void check_state_dict_order(const Golden& g, const Module& model) {
  std::string names;
  for (const auto& [name, _] : model.state_dict()) names += (names.empty() ? "" : ",") + name;
  INFO(g.name << " state_dict order (" << kHint << ")");
  CHECK(names == g.meta("state_dict_order"));
}

// docs §1.5: relgrad's group<g>.param<i> slots equal torch's AdamW state at index Σ len(earlier groups) + i.
void check_optimizer_state(const Golden& g, const Optimizer& opt) {
  std::map<std::string, Tensor> ours;
  for (const auto& [name, t] : opt.state_tensors()) ours.emplace(name, t);
  int64_t compared = 0;
  for (const auto& entry : g.with_prefix("optim.")) {
    const auto& name = entry.first;
    const auto& expected = entry.second;
    auto it = ours.find(name);
    INFO(g.name << " optimizer state '" << name << "' (" << kHint << ")");
    REQUIRE(it != ours.end());
    if (expected.dtype() == kInt64) CHECK(it->second.item() == expected.item());
    else CHECK_CLOSE(it->second, expected, 1e-12, 1e-8);
    ++compared;
  }
  CHECK(compared >= 6);  // step, exp_avg, exp_avg_sq of at least one parameter per group
  CHECK(ours.at("step_count").item() == g.meta_int("steps"));
}

// docs §1: a checkpoint of the trained model holds model.<state_dict> and optim.<state_tensors>, the
// nine metadata keys, and the checksum is the FNV-1a 64 of the data section (recomputed here from the
// raw bytes); restoring it into a fresh model gives the same logits.
void check_checkpoint(const Golden& g, Model& m, const AdamW& opt) {
  relgrad::testing::TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  CheckpointMeta meta;
  meta.step = g.meta_int("steps");
  meta.config_json = "{}";
  meta.extra["golden"] = g.name;
  save_checkpoint(path, m.module(), &opt, meta);

  SafetensorsFile file = load_safetensors(path);
  std::set<std::string> expected_names, names;
  for (const auto& [name, _] : m.module().state_dict()) expected_names.insert("model." + name);
  for (const auto& [name, _] : opt.state_tensors()) expected_names.insert("optim." + name);
  for (const auto& [name, _] : file.tensors) names.insert(name);
  CHECK(names == expected_names);
  std::set<std::string> keys;
  for (const auto& [key, _] : file.metadata) keys.insert(key);
  CHECK(keys == std::set<std::string>{"checksum", "config", "data_position", "extra.golden", "format_version",
                                      "header_checksum", "num_threads", "optimizer", "rng_offset", "rng_seed", "step",
                                      "writer"});
  CHECK(file.metadata.at("format_version") == "1");
  CHECK(file.metadata.at("optimizer") == "AdamW");

  const std::string raw = relgrad::testing::read_bytes(path);
  REQUIRE(raw.size() >= 8);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(raw[k]);
  REQUIRE(8 + n <= raw.size());
  CHECK((8 + n) % 8 == 0);  // the header is padded so the data section is 8-byte aligned
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t k = 8 + n; k < raw.size(); ++k) h = (h ^ static_cast<unsigned char>(raw[k])) * 0x100000001b3ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  CHECK(file.metadata.at("checksum") == std::string(hex));

  Checkpoint ck = load_checkpoint(path);
  Model fresh(g, kFloat64);
  restore(ck, fresh.module(), nullptr, nullptr);
  CHECK_CLOSE(fresh.forward(g, 0), m.forward(g, 0), 0, 0);
}

void check_golden_training(const std::string& config) {
  Golden g(config);

  SUBCASE("float64 logits of the initial weights") {
    Model m(g, kFloat64);
    Tensor logits = m.forward(g, 0);
    INFO(g.name << " logits (" << kHint << ")");
    CHECK_CLOSE(logits, g.at("logits"), kLogitsAtol, kLogitsRtol);
    MESSAGE(g.name << " logits: max |relgrad - PyTorch| = " << max_abs_diff(logits, g.at("logits")));
  }
  SUBCASE("float64 training: losses, grad norms, lr, final weights, optimizer state, checkpoint") {
    Model m(g, kFloat64);
    std::unique_ptr<AdamW> opt;
    Trajectory t = train(g, m, opt);
    check_series(g, t.lrs, "lr", 0, 1e-14);
    check_series(g, t.losses, "loss64", kTight, kTight);
    check_series(g, t.norms, "grad_norm64", kTight, kTight);
    double worst = 0;
    auto finals = g.with_prefix("final.");
    auto params = m.module().named_parameters();
    REQUIRE_MESSAGE(finals.size() == params.size(), g.name << ": " << finals.size() << " final weights for "
                                                           << params.size() << " parameters; " << kHint);
    std::map<std::string, Tensor> by_name(finals.begin(), finals.end());
    for (const auto& entry : params) {
      const auto& name = entry.first;
      const auto& p = entry.second;
      auto it = by_name.find(name);
      REQUIRE_MESSAGE(it != by_name.end(), g.name << " has no final." << name << "; " << kHint);
      INFO(g.name << " final." << name << " (" << kHint << ")");
      CHECK_CLOSE(p, it->second, kTight, kTight);
      worst = std::max(worst, max_abs_diff(p, it->second));
    }
    MESSAGE(g.name << " final weights: max |relgrad - PyTorch| = " << worst);
    check_state_dict_order(g, m.module());
    check_optimizer_state(g, *opt);
    check_checkpoint(g, m, *opt);
  }
  SUBCASE("float32 training: losses and grad norms") {
    Model m(g, kFloat32);
    std::unique_ptr<AdamW> opt;
    Trajectory t = train(g, m, opt);
    check_series(g, t.losses, "loss32", kLoss32, 0);
    check_series(g, t.norms, "grad_norm32", 1e-3, 1e-4);
  }
}

}  // namespace

TEST_CASE("golden training: EncoderDecoder, T5 self, seed cross (Left), pre-norm LayerNorm, gelu, tied") {
  check_golden_training("encdec_default");
}
TEST_CASE("golden training: DecoderLM, Shaw with values, post-norm RMSNorm, relu, untied") {
  check_golden_training("lm_shaw_postnorm");
}
TEST_CASE("golden training: DecoderLM, RoPE, pre-norm LayerNorm (eps 1e-6), gelu_tanh, tied") {
  check_golden_training("lm_rope");
}
TEST_CASE("golden training: DecoderLM, Huang per-head table shorter than the sequence, untied") {
  check_golden_training("lm_huang_perhead");
}
TEST_CASE("golden training: EncoderDecoder, Transformer-XL encoder, ALiBi decoder, RoPE cross, RMSNorm") {
  check_golden_training("encdec_xl_alibi_rope");
}
TEST_CASE("golden training: EncoderDecoder, per-head seed (clip), Huang, Shaw cross (Scaled), post-norm") {
  check_golden_training("encdec_scaled_postnorm");
}
TEST_CASE("golden training: EncoderDecoder, 3-head symmetric ALiBi, causal Transformer-XL, seed cross (Right)") {
  check_golden_training("encdec_alibi3_xl_right");
}
TEST_CASE("golden training: DecoderLM, sinusoidal absolute positions only, odd d_model (15), tied") {
  check_golden_training("lm_sinusoidal");
}
TEST_CASE("golden training: EncoderDecoder, learned absolute tables, Shaw cross at explicit positions") {
  check_golden_training("encdec_learned_explicit");
}
TEST_CASE("golden training: DecoderLM, CoPE with 4 embedded positions (clamped), pre-norm LayerNorm") {
  check_golden_training("lm_cope");
}
TEST_CASE("golden training: EncoderDecoder, symmetric ALiBi encoder, FoX decoder, RoPE cross, RMSNorm") {
  check_golden_training("encdec_fox");
}
TEST_CASE("golden training: DecoderLM, stick-breaking weights, post-norm, one row left-padded") {
  check_golden_training("lm_stick_breaking");
}
TEST_CASE("golden training: DecoderLM, xPos with a short decay scale under YaRN scaling (ramp and temperature)") {
  check_golden_training("lm_xpos_yarn");
}
TEST_CASE("golden training: EncoderDecoder, PoPE self-attentions (clamped offsets), p-RoPE cross under NTK, Right") {
  check_golden_training("encdec_pope_prope");
}
TEST_CASE("golden training: DecoderLM, p-RoPE (3 of 4 pairs rotate) under linear scaling") {
  check_golden_training("lm_prope_linear");
}
TEST_CASE("golden training: DecoderLM, KERPLE's power kernel, post-norm, untied") {
  check_golden_training("lm_kerple_power");
}
TEST_CASE("golden training: DecoderLM, the dynamic position bias (depth 2, plain distance)") {
  check_golden_training("lm_dynamic_bias");
}
TEST_CASE("golden training: EncoderDecoder, Sandwich encoder, KERPLE log decoder, dynamic bias cross (Scaled)") {
  check_golden_training("encdec_distance_bias");
}
TEST_CASE("golden training: DecoderLM, FIRE with a short threshold (L0 = 4)") {
  check_golden_training("lm_fire");
}
TEST_CASE("golden training: EncoderDecoder, FIRE in every place (L0 = 3, the paper's defaults, L0 = 5 under Right)") {
  check_golden_training("encdec_fire");
}
