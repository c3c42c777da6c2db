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
  Field f{key, kKinds[static_cast<int>(knob.kind)], schemes_taking(knob.name) + ": " + knob.help, knob.choices, nullptr, nullptr};
  const auto where = [pc, where = knob.where](RunConfig& c) { return where(pc(c)); };
  if (knob.where && f.kind == Kind::Int) bind<int64_t>(f, where);
  else if (knob.where && f.kind == Kind::Double) bind<double>(f, where);
  else if (knob.where) bind<bool>(f, where);
  else if (knob.get) {
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
  Field f{"data." + name, kind, std::move(help), std::move(choices), nullptr, nullptr};
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
  std::vector<Field> out = {{k + "scheme", Kind::String, "positional scheme", names, nullptr, nullptr}};
  bind<std::string>(out[0], [pc](RunConfig& c) -> void* { return &pc(c).scheme; });
  for (const SchemeEntry& e : positional_schemes())
    for (const SchemeKnob& knob : e.knobs) out.push_back(knob_field(k + knob.name, knob, pc));
  return out;
}

std::vector<Field> build_table() {
  using R = RunConfig;
  using M = TransformerConfig;
  std::vector<Field> f = {
      choice("model.type", "model", kModelKindNames, [](RunConfig& c) -> ModelKind& { return c.model_type; }),
      member("model.d_model", "model width C", &R::model, &M::d_model),
      member("model.n_heads", "attention heads H", &R::model, &M::n_heads),
      member("model.d_ff", "feed-forward width", &R::model, &M::d_ff),
      member("model.n_encoder_layers", "encoder blocks", &R::model, &M::n_encoder_layers),
      member("model.n_decoder_layers", "decoder blocks", &R::model, &M::n_decoder_layers),
      choice2("model.activation", "feed-forward activation", kActivationNames, &R::model, &M::activation),
      choice2("model.norm", "normalisation", kNormNames, &R::model, &M::norm),
      member("model.pre_norm", "pre-norm (else post-norm) blocks", &R::model, &M::pre_norm),
      member("model.dropout", "dropout probability", &R::model, &M::dropout),
      member("model.norm_eps", "LayerNorm ε (RMSNorm uses its dtype's ε, as torch's default)",
             &R::model, &M::norm_eps),
      member("model.tie_weights", "LM head shares the embedding", &R::model, &M::tie_weights),
      choice2("model.fused_attention", "attention core: true = fused flash-style (O(T) memory; composite where it does not apply), false = composite, auto = picked per call by speed and memory (layers/attention.h)",
              kAttentionCoreNames, &R::model, &M::attention_core),
      choice2("model.cross_alignment",
              "cross-attention alignment π(i) (explicit: the data places each target query; chorales, harmonize)",
              kCrossAlignmentNames, &R::model, &M::cross_alignment),
      choice2("model.absolute_position", "absolute position term added to the embeddings", kAbsolutePositionNames,
              &R::model, &M::absolute_position),
      member("model.max_positions", "learned: rows of the position table (0 = the data's longest sequence)",
             &R::model, &M::max_positions),
      member("model.random_positions_max", "randomised positions (Ruoss et al.): training draws sorted positions from [0, N); 0 = off",
             &R::model, &M::random_positions_max),
  };
  for (auto& g : positional_fields("encoder_self", &M::encoder_self)) f.push_back(g);
  for (auto& g : positional_fields("decoder_self", &M::decoder_self)) f.push_back(g);
  for (auto& g : positional_fields("cross", &M::cross)) f.push_back(g);
  using D = DataConfig;
  f.push_back(member("data.source", "data", &R::data, &D::source, data_source_names()));
  for (const DataSource* source : data_sources())  // each source's own keys (train/config/sources/)
    for (Field& g : source->fields()) f.push_back(std::move(g));
  std::vector<Field> rest = {
      member("data.val_fraction", "text/music folder: fraction held out", &R::data, &D::val_fraction),
      member("data.context", "text/tokens/music/chorales: tokens per window", &R::data, &D::context),
      member("data.batch_size", "sequences per micro-batch", &R::data, &D::batch_size),
      member("data.seed", "data stream seed", &R::data, &D::seed),
  };
  using O = OptimConfig;
  std::vector<Field> optim = {
      choice2("optim.name", "optimizer", kOptimizerKindNames, &R::optim, &O::name),
      member("optim.lr", "peak learning rate", &R::optim, &O::lr),
      member("optim.min_lr", "final learning rate", &R::optim, &O::min_lr),
      member("optim.warmup_steps", "linear warmup steps", &R::optim, &O::warmup_steps),
      member("optim.decay_steps", "step at which the decay reaches min_lr, held after (0 = train.steps)",
             &R::optim, &O::decay_steps),
      choice2("optim.decay", "decay after warmup", kDecayNames, &R::optim, &O::decay),
      member("optim.weight_decay", "weight decay (tensors of 2+ dims, positional tables included; not biases or norms)",
             &R::optim, &O::weight_decay),
      member("optim.beta1", "adam β1", &R::optim, &O::beta1),
      member("optim.beta2", "adam β2", &R::optim, &O::beta2),
      member("optim.eps", "adam ε", &R::optim, &O::eps),
      member("optim.momentum", "sgd momentum", &R::optim, &O::momentum),
      member("optim.nesterov", "sgd nesterov", &R::optim, &O::nesterov),
      member("optim.clip", "gradient-norm clip (0 = off)", &R::optim, &O::clip),
      member("optim.positional_lr_scale", "lr multiple of the relative positional tables (*.positional.*), own groups following the schedule",
             &R::optim, &O::positional_lr_scale),
  };
  using T = TrainLoopConfig;
  std::vector<Field> train = {
      member("train.steps", "optimizer steps", &R::train, &T::steps),
      member("train.grad_accum", "micro-batches per step", &R::train, &T::grad_accum),
      member("train.batch_shards",
             "each micro-batch's rows cut into this many shards (at most one row each), run side by side on replicas "
             "sharing the weights, one thread each (the same bits at any train.threads; 1 = no cut)",
             &R::train, &T::batch_shards),
      member("train.shard_by_length",
             "with batch_shards > 1: the rows ordered by length and cut where the shards' padded costs are most even, "
             "each shard padded only to its own longest row (fewer padded positions; dropout masks are other draws; "
             "cut in order under cross_alignment right, scaled or explicit and random positions)",
             &R::train, &T::shard_by_length),
      member("train.log_every", "progress/log every n steps", &R::train, &T::log_every),
      member("train.eval_every", "evaluate every n steps (0 = at the end)", &R::train, &T::eval_every),
      member("train.eval_batches", "held-out batches per evaluation", &R::train, &T::eval_batches),
      member("train.save_every", "checkpoint every n steps (0 = at the end)", &R::train, &T::save_every),
      member("train.out_dir", "output directory", &R::train, &T::out_dir),
      choice2("train.log_format", "log file format", kLogFormatNames, &R::train, &T::log_format),
      choice2("train.plot_format", "loss plot format", kPlotFormatNames, &R::train, &T::plot_format),
      member("train.seed", "initialisation and dropout seed", &R::train, &T::seed),
      member("train.threads", "CPU threads: 0 = picked by timing steps and revisited (train/trainer/thread_policy.h), N = N; never above the cores",
             &R::train, &T::threads),
      member("train.collective_timeout_s", "mpirun: seconds to wait for the other ranks (0 = forever)",
             &R::train, &T::collective_timeout_s),
      member("train.device", "where training runs (cuda: the first visible GPU)",
             &R::train, &T::device, {"cpu", "cuda"}),
      choice2("train.dtype", "parameter dtype", kParameterDTypeNames, &R::train, &T::dtype),
      member("train.target_accuracy", "stop once held-out accuracy reaches it (0 = never)",
             &R::train, &T::target_accuracy),
      member("train.samples", "greedy samples shown after training", &R::train, &T::samples),
      choice2("train.nonfinite", "NaN/Inf loss or gradient: stop (exit 3) or skip the step", kNonfinitePolicyNames, &R::train,
              &T::nonfinite),
      member("train.max_skipped_steps", "skip: consecutive skipped steps before stopping",
             &R::train, &T::max_skipped_steps),
      member("train.detect_anomaly", "check every op's output and gradient for NaN/Inf (slow)",
             &R::train, &T::detect_anomaly),
      member("train.profile", "op-level profile of this many steps after the first (0 = off): a table, and profile.json",
             &R::train, &T::profile),
      member("train.tf32", "TF32 for float32 GEMMs on the GPU (no effect on the CPU)", &R::train, &T::tf32),
      choice2("train.precision",
              "matrix products in fp32, or bf16/fp16 operands with float32 accumulation (autocast; fp16 adds "
              "loss scaling); weights, optimizer state, reductions and checkpoints stay float32",
              kPrecisionNames, &R::train, &T::precision),
  };
  using S = SampleConfig;
  std::vector<Field> sample = {
      member("sample.max_new_tokens", "tokens to generate", &R::sample, &S::max_new_tokens),
      member("sample.temperature", "temperature (0 = greedy)", &R::sample, &S::temperature),
      member("sample.top_k", "top-k filter (0 = off)", &R::sample, &S::top_k),
      member("sample.top_p", "nucleus filter (1 = off)", &R::sample, &S::top_p),
      member("sample.seed", "sampling seed", &R::sample, &S::seed),
  };
  for (auto* part : {&rest, &optim, &train, &sample}) f.insert(f.end(), part->begin(), part->end());
  return f;
}

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

size_t edit_distance(const std::string& a, const std::string& b, bool swaps) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (swaps && i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
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
  errno = 0;
  char* end = nullptr;
  switch (f.kind) {
    case Kind::Int: {
      // strto* skip blanks and accept "+", hex, "inf": the text must be exactly a decimal number.
      if (!plain_number(value, true, false)) bad_value(f, value, origin, "expected an integer");
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE) bad_value(f, value, origin, "expected an integer");
      return f.set(c, std::to_string(v));
    }
    case Kind::UInt: {
      // At most 2^63 − 1: TOML integers are signed 64-bit, and the printed config must load again.
      if (!plain_number(value, false, false)) bad_value(f, value, origin, "expected a non-negative integer");
      const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
        bad_value(f, value, origin, "expected a non-negative integer up to 2^63 - 1");
      return f.set(c, std::to_string(v));
    }
    case Kind::Double: {
      if (!plain_number(value, true, true)) bad_value(f, value, origin, "expected a finite number");
      const double v = std::strtod(value.c_str(), &end);
      if (*end != '\0' || errno == ERANGE || !std::isfinite(v)) bad_value(f, value, origin, "expected a finite number");
      return f.set(c, shortest(v));
    }
    case Kind::Bool:
      if (value == "true" || value == "1") return f.set(c, "true");
      if (value == "false" || value == "0") return f.set(c, "false");
      bad_value(f, value, origin, "expected true or false");
    case Kind::String:
      // Configs are stored as JSON (checkpoints) and printed as TOML: both need UTF-8.
      if (!valid_utf8(value)) bad_value(f, value, origin, "expected UTF-8 text");
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), value) == f.choices.end()) {
        std::string list;
        for (const auto& ch : f.choices) list += (list.empty() ? "" : ", ") + ch;
        bad_value(f, value, origin, "expected one of " + list);
      }
      return f.set(c, value);
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

}  // namespace relgrad::config_detail
