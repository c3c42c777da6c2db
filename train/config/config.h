// The run configuration of `relgrad train`: one typed struct, read from a TOML or JSON file and
// `--key=value` overrides, printed back as the effective config and stored (as JSON) in every
// checkpoint, so that `relgrad sample` / `eval` rebuild exactly the model that was trained.
//
// Keys are dotted paths; in a file they are nested tables (TOML) or objects (JSON):
//
//   [model]                      model.type, model.d_model, model.n_heads, ...
//   [model.encoder_self]         model.encoder_self.scheme, .max_length, .num_buckets, ...
//   [data]   [optim]   [train]   [sample]
//
// Every key is listed, with its type, default and meaning, by `relgrad train --help-config`
// (config_help()) and in docs/cli.md. An unknown key is an error that names it (and the nearest
// valid key, to catch typos); a value of the wrong type or out of range is an error naming the key and
// the value. Nothing is written anywhere until the whole config has been read and validated.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "layers/models.h"
#include "train/data/data.h"
#include "train/trainer/options.h"  // OptimConfig, TrainLoopConfig: the [optim] and [train] sections

namespace relgrad {

inline constexpr int64_t kMaxSyntheticLength = 4096;  // data.max_len's limit (validate)
inline constexpr int64_t kMaxHarmonySteps = 4096;     // data.harmony_steps' limit (validate)

// data.chorale_task: what a chorales run learns (train/config/sources/chorales.cpp).
enum class ChoraleTask { Continue, Harmonize };
inline constexpr NameTable<ChoraleTask, 2> kChoraleTaskNames{
    {{ChoraleTask::Continue, "continue"}, {ChoraleTask::Harmonize, "harmonize"}}};

struct DataConfig {
  std::string source = "synthetic";  // a registered source's name (train/config/source_registry.cpp)
  TaskKind task = TaskKind::Copy;    // synthetic: kTaskKindNames (train/data/data.h)
  int64_t num_symbols = 10;
  int64_t min_len = 4;
  int64_t max_len = 16;
  int64_t lag = 1;
  int64_t period = 3;
  std::string text_path = "data/kjv.txt";  // text: any file (UTF-8 or not: the vocabulary is bytes)
  std::string token_path;                  // tokens: a token data file (train/data/token_file.h)
  std::string music_dir;                   // music: a folder of .mid files; empty = synthetic pieces
  std::string music_styles = "scale,arpeggio,chords,canon,random_walk";  // music, synthetic pieces
  int64_t canon_lag_beats = 2;             // music, synthetic canons: the follower's delay
  std::string chorales_path;               // chorales: the chorale file; empty = the shipped one
  ChoraleTask chorale_task = ChoraleTask::Continue;  // chorales: kChoraleTaskNames
  int64_t harmony_steps = 32;              // chorales, harmonize: 16th steps (source tokens) per window
  double val_fraction = 0.1;
  int64_t context = 128;                   // text, tokens, music, chorales (continue): tokens per window
  int64_t batch_size = 32;                 // sequences per micro-batch
  uint64_t seed = 0;                       // the data streams' Philox key
  // The keys of data sources registered from outside train/config (stored_data_field,
  // train/config/config_fields.h): their text by key name (data.<name>), set ones only.
  std::map<std::string, std::string> stored = {};
};

struct SampleConfig {
  int64_t max_new_tokens = 64;
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
};

struct RunConfig {
  ModelKind model_type = ModelKind::EncoderDecoder;  // model.type: kModelKindNames (train/trainer/options.h)
  TransformerConfig model;  // vocab sizes are derived from the data (not settable)
  DataConfig data;
  OptimConfig optim;
  TrainLoopConfig train;
  SampleConfig sample;

  // The default run of the README: an encoder–decoder with T5 bias in both self-attentions and the
  // seed's diagonal method in cross-attention, learning the reverse task (see configs/default.toml).
  static RunConfig defaults();

  // Cross-field checks (model dims, task parameters, data/model compatibility); "[config] ...".
  void validate() const;
  // Part of validate(): the model's values that only its layers would check (the norm's ε, each
  // positional scheme's parameters), named by their config keys.
  void validate_model_values() const;
  // Fills model.vocab_size / src_vocab_size from the data, and model.max_positions when
  // model.absolute_position = "learned" leaves it at 0 (longest_sequence()).
  void derive_from_data();
  // The longest sequence (source or target) a batch of the data holds, from the config alone (its
  // source's DataSource::longest_sequence, train/config/source.h).
  int64_t longest_sequence() const;
  // Whether the data gives each target query its place on the source axis (Batch::tgt_positions),
  // what model.cross_alignment = "explicit" needs (DataSource::places_targets).
  bool data_places_targets() const;
  // Whether every attention call of a training step, over micro-batches of `rows` rows, surely runs the
  // composite core, which keeps the (B, H, t2, t1) weights for the backward pass: what the memory bound
  // of `relgrad train` (train/command/subcommands/train.cpp) may count. model.fused_attention = false: yes;
  // true: no. auto: only when even a call over the longest sequence (longest_sequence() queries and keys)
  // stays under fused_core_pays's limit on train.device (layers/attention.h), so that auto picks the
  // composite core for every call; where it would pick the fused core for some call, the weights are not
  // counted, so that the bound stays a lower bound.
  bool attention_weights_kept(int64_t rows) const;
};

// The synthetic-music settings of a config (data.music_styles parsed; errors list the valid styles).
struct SynthMusicConfig;
SynthMusicConfig music_synth_config(const RunConfig& config);

// Setting keys. Each throws relgrad::Error "[config] ..." naming the key (and the file, when given).
void set_config_value(RunConfig& config, const std::string& key, const std::string& value);
void apply_overrides(RunConfig& config, const std::vector<std::string>& args);  // "--key=value" / "key=value"
// Reads TOML (.toml) or JSON (.json; also any file whose first non-blank byte is '{') into `config`
// on top of what it holds.
void load_config_file(RunConfig& config, const std::string& path);
// load_config_file in two steps: reading the file (an Error that is a missing or unreadable file,
// at most 1 MiB) and applying its text (an Error that is a bad key or value); `relgrad train` gives
// the first exit code 1, the second 2 (docs/cli.md).
std::string read_config_file(const std::string& path);
void load_config_text(RunConfig& config, const std::string& text, const std::string& path);
bool is_config_key(const std::string& key);  // a settable key such as "train.steps"
void load_config_json_text(RunConfig& config, const std::string& json, const std::string& origin);

std::string config_to_json(const RunConfig& config);  // nested, every key, stable order
std::string config_to_toml(const RunConfig& config);  // the effective config as a loadable TOML file
std::string config_help();                            // key, type, default, description: one per line

}  // namespace relgrad
