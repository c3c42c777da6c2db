// The data sources by config name (data.source): one registry entry per source holds all that is
// particular to it — its keys' checks, its dataset, its vocabulary without opening files, its longest
// sequence, what `relgrad sample` and `eval` feed its models — so the config checks, the trainer's
// options, the memory estimate and the commands ask the entry instead of comparing names.
// Adding a source = its file (a DataSource with its keys; the built-ins are train/config/sources/<name>.cpp) plus one
// entry: a line in the built-in list of train/config/source_registry.cpp, or register_data_source()
// from a program's own code. docs/design.md ("Data sources") walks through an example.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "core/base/name_table.h"
#include "train/config/config.h"
#include "train/data/dataset.h"
#include "train/trainer/sampler.h"

namespace relgrad {

struct LoadedRun;  // train/config/run_options.h
class RunData;     // train/config/run_options.h
namespace config_detail {
struct Field;  // train/config/config_fields.h
}

// What the ids of a vocabulary are, as a checkpoint stores it (extra.vocab, vocab_to_json): bytes,
// the ids of a token file, or named tokens.
enum class VocabKind { Bytes, Ids, Names };
inline constexpr NameTable<VocabKind, 3> kVocabKindNames{
    {{VocabKind::Bytes, "bytes"}, {VocabKind::Ids, "ids"}, {VocabKind::Names, "names"}}};

// An input of `relgrad sample` or `eval` the user has to change (an option that does not fit the
// model, a token not in its vocabulary): the command exits 2 on it, as on any usage error.
class InputError : public Error {
  using Error::Error;
};

// What `relgrad sample` was asked for, as a source's sample() reads it: the command's options less the
// sampling options, which come merged (SamplingOptions).
struct SampleRequest {
  std::string input, prompt;            // --input "tokens", --prompt TEXT
  std::string format = "text", output;  // --format text|midi, -o PATH
  std::string prompt_midi, melody;      // --prompt-midi FILE, --melody FILE
  int64_t num = 1;                      // samples (relgrad sample: -n, else default_sample_count())
  int64_t chorale = -1;                 // --chorale N; -1: not given
  bool max_new_tokens_given = false;    // --max-new-tokens was given
};

// The options of `relgrad sample` a source takes beyond --input / --prompt; the others are refused by
// the command before sample() runs, naming the sources that take them.
struct SampleOptionsTaken {
  bool chorale = false;      // --chorale N, --melody FILE
  bool midi_out = false;     // --format midi
  bool midi_prompt = false;  // --prompt-midi FILE
};

// The fewest tokens a row of a batch holds, for the memory estimate (rows counted at their shortest):
// source and target of an encoder–decoder, tokens of a language model.
struct ShortestRow {
  double source, target, tokens;
};

// The length an input may have before `relgrad sample` / `eval` warn that the model never saw it, and
// the keys that set it ("data.max_len + data.lag + 1").
struct InputLimit {
  int64_t tokens;
  std::string keys;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::string name() const = 0;  // its data.source value

  // ---- the config ----
  // Its own keys (data.<name>: type, help, where in DataConfig they live), declared beside it; the
  // config lists them after data.source, in the registry's order. Default: none.
  virtual std::vector<config_detail::Field> fields() const;
  // Its checks, "[config] ..." naming the key (config_check). RunConfig::validate calls check_model
  // first among the data checks (what model its data trains and the keys its sequence lengths come
  // from: longest_sequence() relies on them), check_keys after the model's position limits.
  // The default check_model: its data trains a language model (model.type = "decoder-only").
  virtual void check_model(const RunConfig& c) const;
  virtual void check_keys(const RunConfig&) const {}
  // The settings that pick its data, for messages: `data.source = "<name>"` by default.
  virtual std::string settings_text(const RunConfig& c) const;
  // The longest sequence (source or target) a batch holds, from the config alone, and the keys that
  // set it (model.max_positions' messages). Default: data.context.
  virtual int64_t longest_sequence(const RunConfig& c) const { return c.data.context; }
  virtual std::string longest_sequence_keys(const RunConfig&) const { return "data.context"; }
  virtual ShortestRow shortest_row(const RunConfig& c) const;  // default: data.context tokens
  virtual InputLimit trained_input(const RunConfig& c) const { return {c.data.context, "data.context"}; }
  // Whether its batches place each target query on the source axis (Batch::tgt_positions), what
  // model.cross_alignment = "explicit" needs; and where, for a target of t2 tokens (int64 (t2)).
  virtual bool places_targets(const RunConfig&) const { return false; }
  virtual std::function<Tensor(int64_t t2)> target_positions(const RunConfig&) const { return {}; }

  // ---- the data ----
  virtual std::shared_ptr<const Dataset> dataset(const RunConfig& c) const = 0;  // opens its files
  // The file or folder it reads as {key, value}, for messages; {} when it reads none.
  virtual std::pair<std::string, std::string> data_path(const RunConfig&) const { return {}; }
  // model.vocab_size (derive_from_data): from the config, or at most a file's header.
  virtual int64_t vocab_size(const RunConfig& c) const = 0;
  // The vocabulary without opening a file; none when only the data knows it (RunData opens it then).
  virtual std::optional<Vocab> vocab(const RunConfig&) const { return std::nullopt; }
  virtual VocabKind vocab_kind() const { return VocabKind::Names; }

  // ---- relgrad sample / eval ----
  virtual SampleOptionsTaken sample_options() const { return {}; }
  virtual int64_t default_sample_count() const { return 1; }  // samples without -n
  // Prints (and with --format midi writes) the samples of `run`'s model; InputError for an input the
  // user must change. `o` is the config's [sample] options with the command line's over them.
  virtual void sample(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
                      std::ostream& out) const = 0;
  // An --input of `relgrad eval --dump-logits` (and `sample`) as ids: token names by default.
  virtual std::vector<int64_t> input_ids(const std::string& text, const Vocab& vocab, const char* command) const;
};

// Every registered source: the built-ins in the order of train/config/source_registry.cpp, then
// register_data_source's.
std::vector<const DataSource*> data_sources();
std::vector<std::string> data_source_names();  // the config's choices for data.source
const DataSource* find_data_source(const std::string& name);  // null when none has that name
// The source of a config's data.source; an Error naming the key when none is registered under it.
const DataSource& data_source(const RunConfig& c);
// Adds a source (an error for an empty or taken name); unregister_data_source removes one it added
// (tests); built-ins stay. The config's data.source accepts a registered name from then on.
void register_data_source(std::shared_ptr<const DataSource> source);
void unregister_data_source(const std::string& name);

// The value of a source's stored key data.<name> (stored_data_field, train/config/config_fields.h): the
// text set, else its default; an Error naming the key when no registered source declares it.
std::string data_key_text(const RunConfig& c, const std::string& name);
int64_t data_key_int(const RunConfig& c, const std::string& name);
double data_key_double(const RunConfig& c, const std::string& name);
bool data_key_bool(const RunConfig& c, const std::string& name);

// ---- helpers for the entries ----
// Throws Error("[config] " + what) unless ok: the config checks' one form.
void config_check(bool ok, const std::string& what);
// "4 1 7" → token ids, each word a name of the vocabulary; InputError "[<command>] ..." otherwise.
std::vector<int64_t> token_ids(const std::string& text, const Vocab& vocab, const char* command);
std::vector<int64_t> byte_ids(const std::string& text);  // a byte vocabulary's ids: the bytes
Tensor ids_row(const std::vector<int64_t>& ids);        // int64 (1, n)
// Warns on stderr (rank 0) when an input of `tokens` is longer than the source's trained_input.
void warn_if_longer_than_trained(const char* command, size_t tokens, const RunConfig& c);
// -o PATH for sample n of `count` (PATH_n.mid when there are several), `fallback` without -o.
std::string numbered_output(const SampleRequest& a, int64_t n, const std::string& fallback);

}  // namespace relgrad
