// RunConfig's defaults, its cross-key checks (validate) and the sizes taken from the data
// (derive_from_data); the key table and the TOML / JSON / --key=value parsing are in config.cpp. What
// is particular to a data source is asked of its entry (train/config/source.h).
#include "train/config/config.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "layers/schemes.h"
#include "train/config/source.h"

namespace relgrad {

namespace {

// A RoPE scaling set at a place whose scheme does not read it (kerple, alibi, …) would change nothing
// without a word, so it is refused at every place, used by the model or not: in relgrad train, and in
// relgrad eval and sample, whose overrides of a checkpoint's config are validated here (load_run).
void check_scalings_read(const TransformerConfig& model) {
  const PositionalConfig unset;
  const std::pair<const char*, const PositionalConfig*> places[] = {
      {"encoder_self", &model.encoder_self}, {"decoder_self", &model.decoder_self}, {"cross", &model.cross}};
  for (const auto& [place, p] : places) {
    const SchemeEntry* entry = find_scheme(p->scheme);
    if (!entry) continue;  // an unknown name is reported with the names (RunConfig::validate)
    const std::pair<const char*, bool> knobs[] = {{"rope_scaling", p->rope_scaling != unset.rope_scaling},
                                                  {"rope_scaling_factor", p->rope_scaling_factor != unset.rope_scaling_factor},
                                                  {"rope_original_length", p->rope_original_length != unset.rope_original_length}};
    for (const auto& knob_set : knobs) {
      const std::string knob = knob_set.first;  // a plain name: C++17 lambdas capture no structured binding
      const auto reads = [&](const SchemeEntry& e) {
        return std::find(e.options.begin(), e.options.end(), knob) != e.options.end();
      };
      if (!knob_set.second || reads(*entry)) continue;
      std::vector<std::string> readers;
      for (const SchemeEntry& e : positional_schemes())
        if (reads(e)) readers.push_back(e.name);
      std::string names;
      for (size_t i = 0; i < readers.size(); ++i)
        names += (i == 0 ? "" : i + 1 == readers.size() ? " and " : ", ") + readers[i];
      const std::string key = std::string("model.") + place + ".";
      throw Error("[config] " + key + knob + " is set, but " + key + "scheme = " + p->scheme + " takes no " + knob +
                  " (" + names + " do)");
    }
  }
}

}  // namespace

RunConfig RunConfig::defaults() {
  RunConfig c;
  c.model_type = ModelKind::EncoderDecoder;
  c.model.d_model = 64;
  c.model.n_heads = 4;
  c.model.d_ff = 256;
  c.model.n_encoder_layers = 2;
  c.model.n_decoder_layers = 2;
  c.model.dropout = 0.0;
  c.model.attention_core = AttentionCore::Auto;  // model.fused_attention = "auto": the faster core, per call
  c.model.encoder_self = PositionalConfig{"t5"};
  c.model.decoder_self = PositionalConfig{"t5"};
  c.model.cross = PositionalConfig{"seed"};
  c.model.cross.max_length = 32;
  c.model.cross_alignment = CrossAlignment::Left;
  c.data.task = TaskKind::Reverse;
  c.data.min_len = 4;
  c.data.max_len = 16;
  c.data.batch_size = 32;
  c.optim.lr = 3e-3;
  c.optim.warmup_steps = 100;
  c.optim.positional_lr_scale = 10.0;  // the relative tables' lr: configs/default.toml says why
  c.optim.beta1 = 0.8;                 // shorter Adam memories than PyTorch's 0.9/0.999: configs/default.toml
  c.optim.beta2 = 0.95;
  c.train.steps = 1500;
  c.train.batch_shards = 2;  // two half-batches side by side: configs/default.toml
  c.train.shard_by_length = true;  // the short rows in one shard, the long in the other: configs/default.toml
  c.train.log_every = 50;
  c.train.eval_every = 50;
  c.train.save_every = 500;
  c.train.target_accuracy = 0.995;
  c.sample.temperature = 0.0;  // greedy: a synthetic task has one right answer
  return c;
}

void RunConfig::validate() const {
  const auto check = config_check;  // train/config/source.h
  check(data.batch_size >= 1, "data.batch_size must be >= 1, got " + std::to_string(data.batch_size));
  const DataSource& source = data_source(*this);
  source.check_model(*this);
  check(!model.explicit_cross() || data_places_targets(),
        "model.cross_alignment = \"explicit\" needs data that place each target query on the source axis: "
        "data.source = \"chorales\" with data.chorale_task = \"harmonize\" (got " + source.settings_text(*this) +
            "); use left, right or scaled");
  check(model.max_positions >= 0, "model.max_positions must be >= 0 (0 = derived from the data), got " +
                                      std::to_string(model.max_positions));
  if (model.absolute_position == AbsolutePositionKind::Learned && model.max_positions > 0)
    check(model.max_positions >= longest_sequence(),
          "model.max_positions = " + std::to_string(model.max_positions) + " is shorter than the " +
              std::to_string(longest_sequence()) + " tokens the data's longest sequence holds (" +
              source.longest_sequence_keys(*this) + "); raise it, or 0 derives it");
  if (model.random_positions_max > 0)
    check(model.random_positions_max >= longest_sequence(),
          "model.random_positions_max = " + std::to_string(model.random_positions_max) +
              " cannot place the " + std::to_string(longest_sequence()) +
              " distinct positions of the data's longest sequence; raise it (or 0 turns it off)");
  source.check_keys(*this);
  check(data.val_fraction >= 0.0 && data.val_fraction < 1.0, "data.val_fraction must be in [0, 1)");
  check(data.context >= 1, "data.context must be >= 1, got " + std::to_string(data.context));
  check(optim.lr > 0.0, "optim.lr must be > 0");
  check(optim.min_lr >= 0.0 && optim.min_lr <= optim.lr, "optim.min_lr must be in [0, optim.lr]");
  // train.steps first: a negative step count is that key's error, not the warmup's.
  check(train.steps >= 1, "train.steps must be >= 1, got " + std::to_string(train.steps));
  check(optim.warmup_steps >= 0 && optim.warmup_steps <= train.steps,
        "optim.warmup_steps must be in [0, train.steps = " + std::to_string(train.steps) + "], got " +
            std::to_string(optim.warmup_steps));
  check(optim.decay_steps == 0 || optim.decay_steps >= optim.warmup_steps,
        "optim.decay_steps must be 0 (= train.steps) or at least optim.warmup_steps = " +
            std::to_string(optim.warmup_steps) + ", got " + std::to_string(optim.decay_steps));
  check(optim.weight_decay >= 0.0, "optim.weight_decay must be >= 0");
  check(optim.clip >= 0.0, "optim.clip must be >= 0 (0 = off)");
  check(optim.positional_lr_scale > 0.0 && optim.positional_lr_scale <= 1e6,
        "optim.positional_lr_scale must be in (0, 1e6] (1 = the model's lr)");
  check(optim.beta1 >= 0.0 && optim.beta1 < 1.0 && optim.beta2 >= 0.0 && optim.beta2 < 1.0,
        "optim.beta1 and optim.beta2 must be in [0, 1)");
  check(optim.eps > 0.0, "optim.eps must be > 0");
  check(optim.momentum >= 0.0, "optim.momentum must be >= 0");
  check(!optim.nesterov || optim.momentum > 0.0, "optim.nesterov needs optim.momentum > 0");
  check(train.grad_accum >= 1, "train.grad_accum must be >= 1, got " + std::to_string(train.grad_accum));
  check(train.batch_shards >= 1, "train.batch_shards must be >= 1, got " + std::to_string(train.batch_shards));
  check(train.log_every >= 1, "train.log_every must be >= 1");
  check(train.eval_every >= 0 && train.save_every >= 0, "train.eval_every and train.save_every must be >= 0");
  check(train.eval_batches >= 1, "train.eval_batches must be >= 1");
  check(!train.out_dir.empty(), "train.out_dir must not be empty");
  check(train.threads >= 0, "train.threads must be >= 0");
  check(train.collective_timeout_s >= 0, "train.collective_timeout_s must be >= 0");
  check(train.target_accuracy >= 0.0 && train.target_accuracy <= 1.0, "train.target_accuracy must be in [0, 1]");
  check(train.samples >= 0, "train.samples must be >= 0");
  check(train.max_skipped_steps >= 0, "train.max_skipped_steps must be >= 0, got " + std::to_string(train.max_skipped_steps));
  // The first step is the warm-up (StepProfile, train/trainer/trainer.cpp): at most train.steps - 1 are profiled.
  check(train.profile >= 0 && train.profile < train.steps,
        "train.profile must be in [0, train.steps - 1 = " + std::to_string(train.steps - 1) +
            "] (steps profiled after the first, the warm-up; 0 = off), got " + std::to_string(train.profile));
  check(train.precision == kFloat32 || train.dtype == kFloat32,
        std::string("train.precision = ") + kPrecisionNames.name(train.precision) +
            " rounds float32 products: it needs train.dtype = \"float32\", got \"" + dtype_name(train.dtype) + "\"");
  check(sample.max_new_tokens >= 1, "sample.max_new_tokens must be >= 1");
  check(sample.temperature >= 0.0, "sample.temperature must be >= 0");
  check(sample.top_k >= 0, "sample.top_k must be >= 0");
  check(sample.top_p > 0.0 && sample.top_p <= 1.0, "sample.top_p must be in (0, 1]");
  TransformerConfig m = model;
  if (m.vocab_size == 0) m.vocab_size = 1;  // derived from the data later; only the shape checks matter here
  if (m.absolute_position == AbsolutePositionKind::Learned && m.max_positions == 0)  // likewise
    m.max_positions = std::max(longest_sequence(), m.random_positions_max);
  validate_model_values();
  try {
    m.validate("model", model_type == ModelKind::EncoderDecoder);
  } catch (const Error& e) {
    throw Error(std::string("[config] ") + e.what());
  }
}

// The values the layers check only when the model is built (the norm's ε, each scheme's parameters),
// checked here under their config keys: otherwise `--dry-run` accepts them, and the run then fails
// naming a layer ("[RoPE] head_dim ...") with exit code 1 instead of a config error (exit 2). The
// conditions are the layers' own: the norm's (layers/norm.cpp) here, each scheme's by its registry
// entry's check (layers/schemes.h, written beside the scheme's class); tests/test_cli_fixes.cpp checks
// that a config that passes here builds.
void RunConfig::validate_model_values() const {
  const auto check = config_check;  // train/config/source.h
  auto text = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  if (model.norm == NormKind::LayerNorm)
    check(model.norm_eps > 0.0, "model.norm_eps must be > 0 (LayerNorm's ε), got " + text(model.norm_eps));
  struct Place {
    const char* name;
    const PositionalConfig* config;
    bool causal;  // decoder self-attention: T5's buckets are one-sided there
  };
  std::vector<Place> places = {{"decoder_self", &model.decoder_self, true}};
  if (model_type == ModelKind::EncoderDecoder)
    places.insert(places.begin(),
                  {{"encoder_self", &model.encoder_self, false}, {"cross", &model.cross, false}});
  // 0 when the heads do not divide the width: TransformerConfig::validate reports that.
  const int64_t head_dim = model.n_heads > 0 && model.d_model > 0 && model.d_model % model.n_heads == 0
                               ? model.d_model / model.n_heads
                               : 0;
  for (const Place& place : places) {
    const PositionalConfig& p = *place.config;
    const std::string key = std::string("model.") + place.name + ".";
    const SchemeEntry* entry = find_scheme(p.scheme);
    if (!entry) continue;  // an unknown name is reported with the names (RunConfig::validate)
    const SchemeCheck at{p, key, place.causal, model.d_model, model.n_heads, head_dim};
    // Where a scheme may go (its registry entry, layers/schemes.h), as TransformerConfig::validate.
    const Placement where = placement(*entry, place.causal, std::string(place.name) == "cross");
    check(where != Placement::NeedsCausal, at.scheme_key() + " needs causal attention: only model.decoder_self may use it");
    check(where != Placement::SelfOnly, at.scheme_key() +
                                            " is for self-attention (model.encoder_self, model.decoder_self), not cross-attention");
    // Its options, by the entry's own check.
    if (entry->check) {
      const std::string problem = entry->check(at);
      check(problem.empty(), problem);
    }
  }
  check_scalings_read(model);
}


int64_t RunConfig::longest_sequence() const { return data_source(*this).longest_sequence(*this); }

bool RunConfig::data_places_targets() const { return data_source(*this).places_targets(*this); }

bool RunConfig::attention_weights_kept(int64_t rows) const {
  if (model.attention_core != AttentionCore::Auto) return model.attention_core == AttentionCore::Composite;
  const int64_t t = longest_sequence();
  return !fused_core_pays(rows, model.n_heads, t, t, train.dtype, Device::parse(train.device));
}

void RunConfig::derive_from_data() {
  // Randomised positions reach up to random_positions_max − 1, so a derived table covers them too.
  if (model.absolute_position == AbsolutePositionKind::Learned && model.max_positions == 0)
    model.max_positions = std::max(longest_sequence(), model.random_positions_max);
  model.vocab_size = data_source(*this).vocab_size(*this);
  model.src_vocab_size = 0;  // one vocabulary for the source and the target
}

}  // namespace relgrad
