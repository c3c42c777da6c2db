// The run config's key table and its text conversions (train/config/config_fields.h).
#include "train/config/config_fields.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/base/error.h"
#include "layers/schemes.h"
#include "train/config/source.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"
#include "train/trainer/training_log.h"

namespace relgrad::config_detail {

// "seed/huang": the registered schemes that read a knob (layers/schemes.h).
std::string schemes_taking(const std::string& option) {
  std::string out;
  for (const SchemeEntry& e : positional_schemes())
    if (std::find(e.options.begin(), e.options.end(), option) != e.options.end()) out += (out.empty() ? "" : "/") + e.name;
  return out;
}

// The field of one knob at one place: a PositionalConfig member through the knob's where (Choice: get
// and set), or a stored knob's text in PositionalConfig::knobs.
Field knob_field(const std::string& key, const SchemeKnob& knob, std::function<PositionalConfig&(RunConfig&)> pc) {
  static constexpr Kind kKinds[] = {Kind::Int, Kind::Double, Kind::Bool, Kind::String};  // by KnobKind
  Field f{key, kKinds[static_cast<int>(knob.kind)], schemes_taking(knob.name) + ": " + knob.help, knob.choices, nullptr};
  if (knob.where) {
    f.where = [pc, where = knob.where](RunConfig& c) { return where(pc(c)); };
  } else if (knob.get) {
    f.get = [pc, get = knob.get](const RunConfig& c) { return get(pc(const_cast<RunConfig&>(c))); };
    f.set = [pc, set = knob.set](RunConfig& c, const std::string& v) { set(pc(c), v); };
  } else {
    f.get = [pc, name = knob.name](const RunConfig& c) { return knob_text(pc(const_cast<RunConfig&>(c)), name); };
    f.set = [pc, name = knob.name](RunConfig& c, const std::string& v) { pc(c).knobs[name] = v; };
  }
  return f;
}

Field stored_data_field(const std::string& name, Kind kind, std::string help, std::string default_text,
                        std::vector<std::string> choices) {
  Field f{"data." + name, kind, std::move(help), std::move(choices), nullptr};
  f.get = [name, fallback = std::move(default_text)](const RunConfig& c) {
    const auto it = c.data.stored.find(name);
    return it == c.data.stored.end() ? fallback : it->second;
  };
  f.set = [name](RunConfig& c, const std::string& v) { c.data.stored[name] = v; };
  return f;
}

// The keys of one place's PositionalConfig (model.<place>.*): its scheme, then the knobs each
// registered scheme declares (layers/schemes.h), in the registry's order; a knob's help is
// "<schemes that read it>: <what>".
std::vector<Field> positional_fields(const std::string& place, PositionalConfig TransformerConfig::*p) {
  auto pc = [p](RunConfig& c) -> PositionalConfig& { return c.model.*p; };
  const std::string k = "model." + place + ".";
  std::vector<std::string> names;
  for (const SchemeEntry& e : positional_schemes()) names.push_back(e.name);
  std::vector<Field> out = {
      {k + "scheme", Kind::String, "positional scheme", names, [pc](RunConfig& c) -> void* { return &pc(c).scheme; }}};
  for (const SchemeEntry& e : positional_schemes())
    for (const SchemeKnob& knob : e.knobs) out.push_back(knob_field(k + knob.name, knob, pc));
  return out;
}

// model.cross_alignment: a CrossAlignment by name (kCrossAlignmentNames, layers/models.h); explicit: the
// positions come with each batch.
Field cross_alignment_field() {
  return choice2("model.cross_alignment",
                 "cross-attention alignment π(i) (explicit: the data places each target query; chorales, harmonize)",
                 kCrossAlignmentNames, &RunConfig::model, &TransformerConfig::cross_alignment);
}

std::vector<Field> build_table() {
  {
    using R = RunConfig;
    std::vector<Field> f = {
        choice("model.type", "model", kModelKindNames, [](RunConfig& c) -> ModelKind& { return c.model_type; }),
        {"model.d_model", Kind::Int, "model width C", {}, at2(&R::model, &TransformerConfig::d_model)},
        {"model.n_heads", Kind::Int, "attention heads H", {}, at2(&R::model, &TransformerConfig::n_heads)},
        {"model.d_ff", Kind::Int, "feed-forward width", {}, at2(&R::model, &TransformerConfig::d_ff)},
        {"model.n_encoder_layers", Kind::Int, "encoder blocks", {}, at2(&R::model, &TransformerConfig::n_encoder_layers)},
        {"model.n_decoder_layers", Kind::Int, "decoder blocks", {}, at2(&R::model, &TransformerConfig::n_decoder_layers)},
        choice2("model.activation", "feed-forward activation", kActivationNames, &R::model, &TransformerConfig::activation),
        choice2("model.norm", "normalisation", kNormNames, &R::model, &TransformerConfig::norm),
        {"model.pre_norm", Kind::Bool, "pre-norm (else post-norm) blocks", {}, at2(&R::model, &TransformerConfig::pre_norm)},
        {"model.dropout", Kind::Double, "dropout probability", {}, at2(&R::model, &TransformerConfig::dropout)},
        {"model.norm_eps", Kind::Double, "LayerNorm ε (RMSNorm uses its dtype's ε, as torch's default)", {}, at2(&R::model, &TransformerConfig::norm_eps)},
        {"model.tie_weights", Kind::Bool, "LM head shares the embedding", {}, at2(&R::model, &TransformerConfig::tie_weights)},
        choice2("model.fused_attention", "attention core: true = fused flash-style (O(T) memory; composite where it does not apply), false = composite, auto = picked per call by speed and memory (layers/attention.h)",
                kAttentionCoreNames, &R::model, &TransformerConfig::attention_core),
        cross_alignment_field(),
        choice2("model.absolute_position", "absolute position term added to the embeddings", kAbsolutePositionNames,
                &R::model, &TransformerConfig::absolute_position),
        {"model.max_positions", Kind::Int, "learned: rows of the position table (0 = the data's longest sequence)",
         {}, at2(&R::model, &TransformerConfig::max_positions)},
        {"model.random_positions_max", Kind::Int,
         "randomised positions (Ruoss et al.): training draws sorted positions from [0, N); 0 = off",
         {}, at2(&R::model, &TransformerConfig::random_positions_max)},
    };
    for (auto& g : positional_fields("encoder_self", &TransformerConfig::encoder_self)) f.push_back(g);
    for (auto& g : positional_fields("decoder_self", &TransformerConfig::decoder_self)) f.push_back(g);
    for (auto& g : positional_fields("cross", &TransformerConfig::cross)) f.push_back(g);
    using D = DataConfig;
    f.push_back({"data.source", Kind::String, "data", data_source_names(), at2(&R::data, &D::source)});
    for (const DataSource* source : data_sources())  // each source's own keys (train/config/sources/)
      for (Field& g : source->fields()) f.push_back(std::move(g));
    std::vector<Field> rest = {
        {"data.val_fraction", Kind::Double, "text/music folder: fraction held out", {}, at2(&R::data, &D::val_fraction)},
        {"data.context", Kind::Int, "text/tokens/music/chorales: tokens per window", {}, at2(&R::data, &D::context)},
        {"data.batch_size", Kind::Int, "sequences per micro-batch", {}, at2(&R::data, &D::batch_size)},
        {"data.seed", Kind::UInt, "data stream seed", {}, at2(&R::data, &D::seed)},
    };
    using O = OptimConfig;
    std::vector<Field> optim = {
        choice2("optim.name", "optimizer", kOptimizerKindNames, &R::optim, &O::name),
        {"optim.lr", Kind::Double, "peak learning rate", {}, at2(&R::optim, &O::lr)},
        {"optim.min_lr", Kind::Double, "final learning rate", {}, at2(&R::optim, &O::min_lr)},
        {"optim.warmup_steps", Kind::Int, "linear warmup steps", {}, at2(&R::optim, &O::warmup_steps)},
        {"optim.decay_steps", Kind::Int, "step at which the decay reaches min_lr, held after (0 = train.steps)", {},
         at2(&R::optim, &O::decay_steps)},
        choice2("optim.decay", "decay after warmup", kDecayNames, &R::optim, &O::decay),
        {"optim.weight_decay", Kind::Double, "weight decay (tensors of 2+ dims, positional tables included; not biases or norms)", {}, at2(&R::optim, &O::weight_decay)},
        {"optim.beta1", Kind::Double, "adam β1", {}, at2(&R::optim, &O::beta1)},
        {"optim.beta2", Kind::Double, "adam β2", {}, at2(&R::optim, &O::beta2)},
        {"optim.eps", Kind::Double, "adam ε", {}, at2(&R::optim, &O::eps)},
        {"optim.momentum", Kind::Double, "sgd momentum", {}, at2(&R::optim, &O::momentum)},
        {"optim.nesterov", Kind::Bool, "sgd nesterov", {}, at2(&R::optim, &O::nesterov)},
        {"optim.clip", Kind::Double, "gradient-norm clip (0 = off)", {}, at2(&R::optim, &O::clip)},
        {"optim.positional_lr_scale", Kind::Double,
         "lr multiple of the relative positional tables (*.positional.*), own groups following the schedule",
         {}, at2(&R::optim, &O::positional_lr_scale)},
    };
    using T = TrainLoopConfig;
    std::vector<Field> train = {
        {"train.steps", Kind::Int, "optimizer steps", {}, at2(&R::train, &T::steps)},
        {"train.grad_accum", Kind::Int, "micro-batches per step", {}, at2(&R::train, &T::grad_accum)},
        {"train.log_every", Kind::Int, "progress/log every n steps", {}, at2(&R::train, &T::log_every)},
        {"train.eval_every", Kind::Int, "evaluate every n steps (0 = at the end)", {}, at2(&R::train, &T::eval_every)},
        {"train.eval_batches", Kind::Int, "held-out batches per evaluation", {}, at2(&R::train, &T::eval_batches)},
        {"train.save_every", Kind::Int, "checkpoint every n steps (0 = at the end)", {}, at2(&R::train, &T::save_every)},
        {"train.out_dir", Kind::String, "output directory", {}, at2(&R::train, &T::out_dir)},
        choice2("train.log_format", "log file format", kLogFormatNames, &R::train, &T::log_format),
        choice2("train.plot_format", "loss plot format", kPlotFormatNames, &R::train, &T::plot_format),
        {"train.seed", Kind::UInt, "initialisation and dropout seed", {}, at2(&R::train, &T::seed)},
        {"train.threads", Kind::Int, "CPU threads: 0 = picked by timing steps and revisited (train/trainer/thread_policy.h), N = N; never above the cores", {}, at2(&R::train, &T::threads)},
        {"train.collective_timeout_s", Kind::Double, "mpirun: seconds to wait for the other ranks (0 = forever)", {},
         at2(&R::train, &T::collective_timeout_s)},
        {"train.device", Kind::String, "where training runs (cuda: the first visible GPU)", {"cpu", "cuda"}, at2(&R::train, &T::device)},
        choice2("train.dtype", "parameter dtype", kParameterDTypeNames, &R::train, &T::dtype),
        {"train.target_accuracy", Kind::Double, "stop once held-out accuracy reaches it (0 = never)", {},
         at2(&R::train, &T::target_accuracy)},
        {"train.samples", Kind::Int, "greedy samples shown after training", {}, at2(&R::train, &T::samples)},
        choice2("train.nonfinite", "NaN/Inf loss or gradient: stop (exit 3) or skip the step", kNonfinitePolicyNames, &R::train,
                &T::nonfinite),
        {"train.max_skipped_steps", Kind::Int, "skip: consecutive skipped steps before stopping", {},
         at2(&R::train, &T::max_skipped_steps)},
        {"train.detect_anomaly", Kind::Bool, "check every op's output and gradient for NaN/Inf (slow)", {},
         at2(&R::train, &T::detect_anomaly)},
        {"train.profile", Kind::Int,
         "op-level profile of this many steps after the first (0 = off): a table, and profile.json", {},
         at2(&R::train, &T::profile)},
        {"train.tf32", Kind::Bool, "TF32 for float32 GEMMs on the GPU (no effect on the CPU)", {},
         at2(&R::train, &T::tf32)},
        choice2("train.precision",
                "matrix products in fp32, or bf16/fp16 operands with float32 accumulation (autocast; fp16 adds "
                "loss scaling); weights, optimizer state, reductions and checkpoints stay float32",
                kPrecisionNames, &R::train, &T::precision),
    };
    using S = SampleConfig;
    std::vector<Field> sample = {
        {"sample.max_new_tokens", Kind::Int, "tokens to generate", {}, at2(&R::sample, &S::max_new_tokens)},
        {"sample.temperature", Kind::Double, "temperature (0 = greedy)", {}, at2(&R::sample, &S::temperature)},
        {"sample.top_k", Kind::Int, "top-k filter (0 = off)", {}, at2(&R::sample, &S::top_k)},
        {"sample.top_p", Kind::Double, "nucleus filter (1 = off)", {}, at2(&R::sample, &S::top_p)},
        {"sample.seed", Kind::UInt, "sampling seed", {}, at2(&R::sample, &S::seed)},
    };
    for (auto* part : {&rest, &optim, &train, &sample}) f.insert(f.end(), part->begin(), part->end());
    return f;
  }
}

std::string shortest(double v);

// The table, built again when the registered schemes or data sources change (their names are choices,
// their knobs keys: a program may register one after the table is built).
const std::vector<Field>& fields() {
  static std::vector<Field> table;
  static std::vector<std::string> built_for;
  std::vector<std::string> names = data_source_names();
  for (const SchemeEntry& e : positional_schemes()) names.push_back(e.name);
  if (table.empty() || names != built_for) table = build_table(), built_for = std::move(names);
  return table;
}

// A string key whose words include true and false (model.fused_attention: false, true, auto) also
// takes the booleans, as it did when it was a boolean key (configs and checkpoints written then).
bool takes_bool_words(const Field& f) {
  return f.kind == Kind::String && std::find(f.choices.begin(), f.choices.end(), "true") != f.choices.end() &&
         std::find(f.choices.begin(), f.choices.end(), "false") != f.choices.end();
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// "'a', 'b' or 'c'".
std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + ("'" + names[i] + "'");
  return out;
}

const Field& find_field(const std::string& key, const std::string& origin) {
  for (const Field& f : fields())
    if (key == f.key) return f;
  // A table's name given a value (`model = 5` in TOML, --model=5): it holds keys, it is not one.
  std::vector<std::string> inside;
  for (const Field& f : fields())
    if (f.key.rfind(key + ".", 0) == 0) inside.push_back(f.key);
  if (!inside.empty())
    throw Error("[config] " + origin + "unknown key '" + key + "': '" + key +
                "' is a table, not a key; expected a table ([" + key +
                "] in TOML, an object in JSON) holding keys such as " +
                quoted_list({inside.begin(), inside.begin() + std::min<size_t>(3, inside.size())}) +
                ", got a value; `relgrad train --help-config` lists every key");
  // A key without its table (--steps=5, max_length): the keys that end with it.
  std::vector<std::string> ending;
  for (const Field& f : fields())
    if (f.key.size() > key.size() + 1 &&
        f.key.compare(f.key.size() - key.size() - 1, std::string::npos, "." + key) == 0)
      ending.push_back(f.key);
  if (!ending.empty())
    throw Error("[config] " + origin + "unknown key '" + key + "' (did you mean " + quoted_list(ending) +
                "?); `relgrad train --help-config` lists every key");
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const Field& f : fields()) {
    size_t d = edit_distance(key, f.key);
    if (d < best_d) best_d = d, best = f.key;
  }
  std::string hint = best_d <= std::max<size_t>(3, key.size() / 3) ? " (did you mean '" + best + "'?)" : "";
  throw Error("[config] " + origin + "unknown key '" + key + "'" + hint + "; `relgrad train --help-config` lists every key");
}

[[noreturn]] void bad_value(const Field& f, const std::string& value, const std::string& origin, const std::string& why) {
  throw Error("[config] " + origin + f.key + ": " + why + ", got '" + value + "'");
}

// A plain decimal: optional '-' (when allowed), digits, and for reals a '.' and an exponent; no
// blanks, '+', hex, "inf" or "nan" (which strtod / strtoll would otherwise accept).
bool plain_number(const std::string& v, bool negative, bool real) {
  size_t i = 0;
  if (negative && i < v.size() && v[i] == '-') ++i;
  if (i >= v.size() || !(std::isdigit(static_cast<unsigned char>(v[i])) || (real && v[i] == '.'))) return false;
  for (; i < v.size(); ++i) {
    char ch = v[i];
    bool ok = std::isdigit(static_cast<unsigned char>(ch)) ||
              (real && (ch == '.' || ch == 'e' || ch == 'E' || ((ch == '-' || ch == '+') && (v[i - 1] == 'e' || v[i - 1] == 'E'))));
    if (!ok) return false;
  }
  return true;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // overlong forms, surrogates and values past U+10FFFF are not UTF-8
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

// Sets one key from its text form, checking the type; `origin` prefixes errors ("file.toml: ").
void set_from_text(RunConfig& c, const Field& f, const std::string& value, const std::string& origin) {
  switch (f.kind) {
    case Kind::Int: {
      errno = 0;
      char* end = nullptr;
      // strto* skip blanks and accept "+", hex, "inf": the text must be exactly a decimal number.
      if (!plain_number(value, true, false)) bad_value(f, value, origin, "expected an integer");
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE) bad_value(f, value, origin, "expected an integer");
      if (f.where) *static_cast<int64_t*>(f.where(c)) = v;
      else f.set(c, std::to_string(v));
      return;
    }
    case Kind::UInt: {
      errno = 0;
      char* end = nullptr;
      // At most 2^63 − 1: TOML integers are signed 64-bit, and the printed config must load again.
      if (!plain_number(value, false, false)) bad_value(f, value, origin, "expected a non-negative integer");
      unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
        bad_value(f, value, origin, "expected a non-negative integer up to 2^63 - 1");
      if (f.where) *static_cast<uint64_t*>(f.where(c)) = v;
      else f.set(c, std::to_string(v));
      return;
    }
    case Kind::Double: {
      errno = 0;
      char* end = nullptr;
      if (!plain_number(value, true, true)) bad_value(f, value, origin, "expected a finite number");
      double v = std::strtod(value.c_str(), &end);
      if (*end != '\0' || errno == ERANGE || !std::isfinite(v)) bad_value(f, value, origin, "expected a finite number");
      if (f.where) *static_cast<double*>(f.where(c)) = v;
      else f.set(c, shortest(v));
      return;
    }
    case Kind::Bool: {
      bool v;
      if (value == "true" || value == "1") v = true;
      else if (value == "false" || value == "0") v = false;
      else bad_value(f, value, origin, "expected true or false");
      if (f.where) *static_cast<bool*>(f.where(c)) = v;
      else f.set(c, v ? "true" : "false");
      return;
    }
    case Kind::String: {
      // Configs are stored as JSON (checkpoints) and printed as TOML: both need UTF-8.
      if (!valid_utf8(value)) bad_value(f, value, origin, "expected UTF-8 text");
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), value) == f.choices.end()) {
        std::string list;
        for (const auto& ch : f.choices) list += (list.empty() ? "" : ", ") + ch;
        bad_value(f, value, origin, "expected one of " + list);
      }
      if (f.where) *static_cast<std::string*>(f.where(c)) = value;
      else f.set(c, value);
      return;
    }
  }
}

// The shortest decimal that reads back as the same double (1e-05, not 1.0000000000000001e-05).
std::string shortest(double v) {
  char buf[40];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string get_text(const RunConfig& config, const Field& f) {
  auto& c = const_cast<RunConfig&>(config);  // where() only takes the address
  if (!f.where) return f.get(config);        // an enum's name, or a stored knob's text
  switch (f.kind) {
    case Kind::Int: return std::to_string(*static_cast<int64_t*>(f.where(c)));
    case Kind::UInt: return std::to_string(*static_cast<uint64_t*>(f.where(c)));
    case Kind::Double: return shortest(*static_cast<double*>(f.where(c)));
    case Kind::Bool: return *static_cast<bool*>(f.where(c)) ? "true" : "false";
    case Kind::String: return *static_cast<std::string*>(f.where(c));
  }
  return "";
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Int: return "integer";
    case Kind::UInt: return "non-negative integer";
    case Kind::Double: return "number";
    case Kind::Bool: return "boolean";
    case Kind::String: return "string";
  }
  return "";
}

std::string a_kind(Kind k) {
  return (k == Kind::Int ? "an " : "a ") + std::string(kind_name(k));
}

// A JSON leaf → the text form set_from_text takes, with the JSON type checked against the key's.

}  // namespace relgrad::config_detail
