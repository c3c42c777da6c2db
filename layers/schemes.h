// The positional schemes by config name: one registry read by the models (layers/models.h), the run
// config (its scheme choices, its knobs and which knobs each scheme reads), the benches (their
// treatments and how each scheme is sized to their windows) and the probe. Adding a scheme = its file
// (a PositionalScheme, layers/positional.h, and its SchemeEntry beside it) plus one registry line: a
// line in the built-in list of layers/schemes.cpp, or register_scheme() from a program's own code
// before it builds a model or reads a config. docs/relative-attention.md walks through an example.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/distance_bias.h"
#include "layers/fire.h"
#include "layers/positional.h"
#include "layers/rotary.h"

namespace relgrad {

// One place's positional scheme and its parameters (only those of the chosen scheme are read).
struct PositionalConfig {
  std::string scheme = "none";  // a registered name: none, seed, huang, shaw, t5, alibi, rope, transformer_xl, …
  int64_t max_length = 512;     // seed, huang: t3, the table covers |δ| ≤ t3 − 1
  OutOfRange out_of_range = OutOfRange::Zero;  // seed, huang: δ beyond the table
  int64_t clip = 16;            // shaw: k, distances clipped to [−k, k]
  bool shaw_values = true;      // shaw: also the a^V value term
  bool per_head = false;        // seed, huang, shaw: one table per head instead of one shared
  int64_t num_buckets = 32;     // t5
  int64_t max_distance = 128;   // t5
  double rope_base = 10000.0;   // rope
  // The content-dependent schemes (layers/contextual.h): cope (fox and stick_breaking take no knob).
  int64_t cope_positions = 64;  // cope: the embedded positions e[0 … n − 1] (the paper's npos_max)
  // The rotary family (layers/rotary.h, layers/rotary_variants.h): xpos, p_rope, pope, and the RoPE
  // scalings, which rope, xpos and p_rope take (set at evaluation: relgrad eval / sample --model.…).
  double xpos_scale_base = 512.0;  // xpos: γ of the decay ζ_k^(−δ/γ)
  double rope_fraction = 0.75;     // p_rope: the share p of the D/2 frequencies that rotate (the highest)
  RopeScalingKind rope_scaling = RopeScalingKind::None;  // rope, xpos, p_rope: none, linear, ntk or yarn
  double rope_scaling_factor = 1.0;   // s ≥ 1: the new length over the trained one
  int64_t rope_original_length = 0;   // yarn: the trained context L
  // The distance-bias family (layers/distance_bias.h): kerple, sandwich, dynamic_bias.
  KerpleVariant kerple_variant = KerpleVariant::Log;  // kerple: −r1·log(1 + r2·|δ|) or −r1·|δ|^r2
  int64_t sandwich_dim = 128;             // sandwich: d', the width of the sinusoidal embeddings
  int64_t dynamic_bias_depth = 2;         // dynamic_bias: hidden layers of the MLP
  bool dynamic_bias_log_distance = false;  // dynamic_bias: the MLP reads sign(x)·log(|x| + 1)
  // FIRE (layers/fire.h): fire.
  int64_t fire_width = 32;       // fire: the width of the MLP f_θ (Linear(1, w) → ReLU → Linear(w, H))
  int64_t fire_threshold = 512;  // fire: L0, the threshold L = |L_multiplier·L0| starts at
  // The knobs of schemes registered from outside layers/ (SchemeKnob::stored): their text form by knob
  // name, absent = the knob's default. Read with knob_text / knob_int / knob_double / knob_bool.
  std::map<std::string, std::string> knobs = {};
};

// ---- a scheme's knobs: the keys model.<place>.<name> it declares beside its class ----

enum class KnobKind { Int, Double, Bool, Choice };

// One knob: its name, type, help (the config prefixes the names of the schemes that read it) and where
// its value lives: a PositionalConfig member (where; Choice: get and set by name) or, for a scheme
// registered from outside layers/, PositionalConfig::knobs (all null; default_text is its default).
// The checks of its value are the scheme's entry check (SchemeEntry::check), which names the key.
struct SchemeKnob {
  std::string name;
  KnobKind kind;
  std::string help;
  std::vector<std::string> choices = {};                           // Choice: the allowed words
  std::function<void*(PositionalConfig&)> where = nullptr;         // Int: int64_t, Double: double, Bool: bool
  std::function<std::string(const PositionalConfig&)> get = nullptr;  // Choice: the value's name
  std::function<void(PositionalConfig&, const std::string&)> set = nullptr;  // Choice: one of choices
  std::string default_text = {};                                   // stored knobs: the default, as text

  // A member knob: the kind follows the member's type (int64_t, double, bool).
  static SchemeKnob member(std::string name, std::string help, int64_t PositionalConfig::*m);
  static SchemeKnob member(std::string name, std::string help, double PositionalConfig::*m);
  static SchemeKnob member(std::string name, std::string help, bool PositionalConfig::*m);
  // A member enum with a name table (core/base/name_table.h): its words are the table's names.
  template <class E, size_t N>
  static SchemeKnob choice(std::string name, std::string help, const NameTable<E, N>& names, E PositionalConfig::*m) {
    return {std::move(name), KnobKind::Choice, std::move(help), names.names(), nullptr,
            [m, &names](const PositionalConfig& p) { return std::string(names.name(p.*m)); },
            [m, &names](PositionalConfig& p, const std::string& v) { p.*m = *names.find(v); }};
  }
  // A knob stored by name in PositionalConfig::knobs, `default_text` its default ("4", "0.5", "true", a
  // word of `choices` for a Choice).
  static SchemeKnob stored(std::string name, KnobKind kind, std::string help, std::string default_text,
                           std::vector<std::string> choices = {});
};

// A stored knob's value in `p` (the one set, else its declared default); an Error naming the knob when
// no registered scheme declares it.
std::string knob_text(const PositionalConfig& p, const std::string& name);
int64_t knob_int(const PositionalConfig& p, const std::string& name);
double knob_double(const PositionalConfig& p, const std::string& name);
bool knob_bool(const PositionalConfig& p, const std::string& name);

// ---- what the benches and the probe ask of a scheme (train/instruments/) ----

// How a bench sizes the schemes it compares to training windows of `window` tokens (SchemeEntry::fit).
// Each rule is one bench's protocol; each scheme says what its knobs become under it.
enum class FitRule {
  Window,      // music-bench: an entry of its own for every offset of a window (|δ| ≤ T − 1)
  WindowEdge,  // length-bench: Window, every farther offset reading the edge entry; normalisers at T
  HalfWindow,  // context-bench: learned entries saturate at T/2 (T5's defaults' ratio), decays at T/2,
               // normalisers and position counts at T
};
struct SchemeFit {
  FitRule rule;
  int64_t window;         // T
  int64_t positions = 0;  // content-dependent positions (cope's npos) when > 0, else the rule's
};

// The farthest offset a scheme's table has an entry of its own for, and the knob that sets it.
struct TableReach {
  int64_t offset;
  std::string knob;
};

// What a scheme's mechanism predicts for a model that needs the offset δ* (experiment limits): whether
// it can represent δ* alone, and why, in a phrase of the report.
struct LimitPrediction {
  bool holds;
  std::string why;
};

// What an entry's check is given: the place's options, the config key prefix its messages name
// ("model.decoder_self."), whether the place is causal, and the attention's sizes (head_dim 0 when
// the heads do not divide the width, which TransformerConfig::validate reports).
struct SchemeCheck {
  const PositionalConfig& config;
  const std::string& key;
  bool causal;
  int64_t d_model, n_heads, head_dim;
  std::string scheme_key() const { return key + "scheme = " + config.scheme; }  // "model.x.scheme = rope"
};

// What a factory is given: the place's config and the attention it serves.
struct SchemeContext {
  const PositionalConfig& config;
  const std::string& place;   // "encoder_self", "decoder_self" or "cross"
  int64_t d_model, n_heads, head_dim;
  bool causal;                // the place's attention is causal (decoder self-attention)
  Generator* init;            // initialisation; null = the default generator
  int64_t table_heads() const { return config.per_head ? n_heads : 0; }  // 0: one table shared by the heads
};

struct SchemeEntry {
  std::string name;                  // the config name; the scheme's name() returns the same
  std::vector<std::string> options;  // the PositionalConfig keys it reads (the config's help names it there)
  std::function<std::shared_ptr<PositionalScheme>(const SchemeContext&)> make;  // null: no scheme ("none")
  bool shared_by_stack = false;      // one object for every layer of a stack (T5's one table)
  bool causal_only = false;          // refused where attention is not causal (a past-only table)
  bool self_only = false;            // refused for cross-attention
  // The problem with the options it reads, as a message naming config keys ("" = none); null: nothing
  // to check. The conditions are the scheme constructor's own, checked before any model is built, so
  // that a bad value is a config error naming its key (also under --dry-run), not a layer's error.
  std::function<std::string(const SchemeCheck&)> check = nullptr;
  // A lower bound of the elements its parameters hold, per layer (per stack when shared_by_stack),
  // for D-dimensional heads (the checkpoint-fit check of train/config/run_options.cpp); null: 0.
  std::function<double(const PositionalConfig&, double n_heads, double head_dim)> parameters = nullptr;
  // ---- its knobs, and what the benches and the probe ask of it (declared beside its class) ----
  // The knobs it declares (model.<place>.<name>), in the order the config lists them; a knob a family
  // shares is declared once, by one entry of the family, and named in the `options` of each reader.
  std::vector<SchemeKnob> knobs = {};
  // Sizes its knobs to a bench's training windows; null: its defaults serve any length.
  std::function<void(PositionalConfig&, const SchemeFit&)> fit = nullptr;
  // It reads explicit positions (PositionalScheme::set_position_map), so random_positions_max can
  // randomise it (Ruoss et al. 2023): the benches offer "<name>-random".
  bool random_positions = false;
  // The farthest offset its table reaches (the probe's reach covers it); null: no table.
  std::function<TableReach(const PositionalConfig&)> table_reach = nullptr;
  // Its prediction for a needed offset δ* (`bidirectional`: a non-causal place); null: none to make.
  std::function<LimitPrediction(const PositionalConfig&, int64_t expected, bool bidirectional)> predict = nullptr;
  // Known to extrapolate: a model trained at C keeps its held-out loss at 16 × C with its default
  // knobs (measured: docs/extrapolation.md). relgrad sample feeds such a model every token; any other
  // gets a sliding window of its training context by default (train/config/run_options.h).
  bool extrapolates = false;
  // What it is, in a few words, for the benches' tables ("relative bias, T5 buckets"); "" for none.
  std::string summary = "";
};

// Where an entry may serve: the one rule the model (TransformerConfig::validate) and the run config
// (RunConfig::validate) both apply, each phrasing its own message.
enum class Placement { Allowed, NeedsCausal, SelfOnly };
Placement placement(const SchemeEntry& entry, bool causal, bool cross);

// Every registered scheme: the built-ins in the order of layers/schemes.cpp, then register_scheme's.
const std::vector<SchemeEntry>& positional_schemes();
// The entry for a config name; null when none is registered under it.
const SchemeEntry* find_scheme(const std::string& name);
// "none, seed, …, rope or transformer_xl": the names for error messages.
std::string scheme_names_text();
// Whether `p` puts a positional term in its attention: a registered scheme whose entry builds one (every
// one but "none").
bool has_positional_term(const PositionalConfig& p);
// Whether `p`'s scheme reads the knob `knob` (its entry's options); false for an unknown scheme.
bool scheme_reads(const PositionalConfig& p, const std::string& knob);
// `p` with its scheme's knobs sized to a bench's windows (SchemeEntry::fit; unchanged without one).
PositionalConfig fitted(PositionalConfig p, const SchemeFit& fit);
// Adds a scheme (an error for an empty or taken name, or a knob another scheme declares). Register
// before building the models that use it; the run config (train/config/config_fields.cpp) takes its
// name among its choices and its knobs among its keys at its next use.
void register_scheme(SchemeEntry entry);
// Removes a scheme that register_scheme added (tests); built-ins stay.
void unregister_scheme(const std::string& name);

}  // namespace relgrad
