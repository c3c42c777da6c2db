// A RunConfig (train/config/config.h) turned into what the training side runs: the one place that maps
// the command's config onto the trainer's options (train/trainer/options.h) and, through its data
// source's entry (train/config/source.h), onto a Dataset; and a checkpoint (whose metadata holds its
// config) reopened as a run.
#pragma once
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "train/config/config.h"
#include "train/config/source.h"
#include "train/data/dataset.h"
#include "train/music/chorales.h"
#include "train/music/music.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/options.h"
#include "train/trainer/run.h"
#include "train/trainer/sampler.h"

namespace relgrad {

// Validates `config` (nothing is read or written before that), checks train.device, derives the vocab
// sizes, opens the data and fills every option the Trainer reads; the checkpoints' config JSON is
// config_to_json of the derived config, and a resume is refused when a key of the model, data,
// optimizer, dtype or seed differs from the checkpoint's.
// `warnings` (stderr by default; rank 0 only under mpirun) gets a "warning: ..." line for each file the
// data skipped (data.music_dir: MIDI files that fail to parse or hold no notes; see report_skipped_files).
TrainerOptions trainer_options(RunConfig config, std::ostream* warnings = &std::cerr);

// "warning: <key>: skipped '<file>': <why>" for each of the first kListedSkips files the data skipped
// (key: the data's path key, data.music_dir), then one line counting the rest; nothing when none was.
inline constexpr size_t kListedSkips = 20;
void report_skipped_files(const Dataset& data, const std::string& key, std::ostream& out);

// The Dataset of data.source (its entry's dataset(); vocab sizes need not be derived).
std::shared_ptr<const Dataset> make_dataset(const RunConfig& config);
ChoraleDataConfig chorale_data_config(const RunConfig& config);  // the data keys of a chorale run
// Where the target queries of a model.cross_alignment = "explicit" run sit on the source axis, for a
// target of t2 tokens (int64 (t2)): what the sampler passes the model, as the data's batches carry
// tgt_positions. Empty for any other alignment. (Harmonisation: ⌊i / 3⌋, train/music/chorales.h.)
std::function<Tensor(int64_t t2)> target_positions(const RunConfig& config);
ModelOptions model_options(const RunConfig& config);      // model.type, the model, train.dtype
SamplingOptions sampling_options(const SampleConfig& config);  // the [sample] section (eos stays the default)

// The sliding window a decoder-only run samples under by default (SamplingOptions::window), for
// `relgrad sample` and the samples `relgrad train` prints at its end: the training context (the
// source's trained_input: data.context, or a synthetic task's data.max_len) unless the decoder's scheme
// is registered as extrapolating (SchemeEntry::extrapolates, layers/schemes.h) and the model has no
// absolute positions; then none (every token is fed).
struct DefaultWindow {
  int64_t tokens = 0;  // 0: none; always 0 for an encoder-decoder (its target is not windowed)
  std::string why;     // "data.context = 64; rope is not known to extrapolate" or "sandwich extrapolates, …"
};
DefaultWindow default_sample_window(const RunConfig& c);

class RunData;

// What RunData::text(), tokens(), chorales() and task() return: whether the run's data is of that source,
// known from the config alone (no file is opened), and on * or -> the data itself, opened then. Each is
// defined by its source's entry (train/config/sources/), which knows the Dataset it made.
template <class T>
class DataOf {
 public:
  DataOf(bool is, std::function<const T*()> open) : is_(is), open_(std::move(open)) {}
  explicit operator bool() const { return is_; }
  const T* get() const { return is_ ? open_() : nullptr; }  // opens the data
  const T& operator*() const { return *get(); }
  const T* operator->() const { return get(); }

 private:
  bool is_;
  std::function<const T*()> open_;
};

// The data of a run's config, with its source's entry (what sample and eval ask about the data).
// The files are opened at the first batch or dataset (or * / -> on text(), tokens(), ...), not before:
// what only needs the vocabulary (`relgrad sample --prompt`, `eval --dump-logits --input`) works where
// the corpus is not, e.g. from another directory than the run's relative data.text_path.
class RunData {
 public:
  // Skipped files are reported on `warnings` as trainer_options does, when the data is opened.
  explicit RunData(const RunConfig& config, std::ostream* warnings = &std::cerr)
      : config_(config), source_(&data_source(config)), warnings_(warnings) {}
  const RunConfig& config() const { return config_; }
  const DataSource& source() const { return *source_; }
  Batch batch(int64_t index, Split split) const { return dataset().batch(index, split); }
  // The source's vocabulary; from the config without opening any file, except for a token file of
  // unknown size (model.vocab_size 0: a config not derived) and a synthetic task (no file).
  const Vocab& vocab() const;
  const Dataset& dataset() const;  // opens the files; errors name the key and the current directory
  DataOf<SyntheticTask> task() const;  // data.source = "synthetic"; and so on
  DataOf<TextDataset> text() const;
  DataOf<TokenDataset> tokens() const;
  DataOf<ChoraleSet> chorales() const;  // data.source = "chorales", either task

 private:
  RunConfig config_;
  const DataSource* source_;
  std::ostream* warnings_;
  mutable std::shared_ptr<const Dataset> data_;
  mutable std::shared_ptr<const Vocab> vocab_;
};

// RunData::text() and its kin for a source whose dataset is a `Data`: data.source = `source`, and its `part`.
template <class T, class Data>
DataOf<T> data_of(const RunData& r, const char* source, const T& (Data::*part)() const) {
  return {r.source().name() == source, [&r, part] { return &(static_cast<const Data&>(r.dataset()).*part)(); }};
}

// A checkpoint opened for sampling / evaluation: its config (from the metadata) and the model,
// restored onto `device` (a checkpoint holds host tensors, whatever device wrote it; the config's
// train.device is not consulted: a run trained on a GPU samples on the CPU by default). Errors name the file.
// The vocabulary sizes come from the checkpoint's extra.vocab when it has one, so a token-file model
// loads without its token file; a checkpoint without it (written before it was stored) derives them
// from the data as before (a token file's header). A stored vocabulary that disagrees with the config
// or the embedding is refused.
struct LoadedRun {
  RunConfig config;
  Checkpoint checkpoint;
  std::shared_ptr<RunModel> model;  // never null once loaded
  Vocab vocab;  // the stored vocabulary (extra.vocab); size 0 for a checkpoint without one
};
// `changes`: config keys and values set over the checkpoint's config before the model is built (relgrad
// eval and sample's RoPE scalings, which change no parameter); the caller picks which keys may change.
// A change the config refuses is an InputError (the user's to fix).
LoadedRun load_run(const std::string& checkpoint_path, Device device = Device::cpu(),
                   const std::vector<std::pair<std::string, std::string>>& changes = {});

// The vocabulary as relgrad train stores it in every checkpoint's extra.vocab (docs/checkpoint-format.md,
// 1.3), by the vocab_kind() of data.source's entry: "text" {"kind":"bytes","size":256}; "tokens"
// {"kind":"ids","size":V}; the others {"kind":"names","size":N,"pad":P,"names":[...]} (pad: the id
// decode() skips, -1 for none).
std::string vocab_to_json(const std::string& source, const Vocab& vocab);
// Back to a Vocab equal to the data's, checked against data.source `source`: throws relgrad::Error
// "extra.vocab ..." naming what is wrong (load_run prefixes "[checkpoint] <path>: ").
Vocab vocab_from_json(const std::string& json, const std::string& source);

// The checkpoint's config (validated and derived) against its model tensors, before anything is built
// from it: the block counts (by tensor name), the embedding's and first feed-forward's shapes, and a
// lower bound of the parameters the config implies against the elements the tensors hold. A config
// edited to model.d_model = 8192 or n_encoder_layers = 1000000 (its header checksum recomputed) is
// refused here instead of allocating gigabytes. "[checkpoint] <path>: its config does not describe
// its tensors: ...". load_run calls it; so should anything else that builds a model from a checkpoint.
void check_config_fits_checkpoint(const RunConfig& config, const Checkpoint& checkpoint,
                                  const std::string& path);

// A resume's config (derived) against the checkpoint's saved config: the keys of the model, the data,
// the optimizer's state, the dtype and the seed must match. Throws relgrad::Error "[train] cannot
// resume from <path>: model.d_model is 16 there and 32 here (keys ... must match)", naming the first
// that differs (TrainerOptions::check_resume, and relgrad train before it builds the model).
void check_resume(const RunConfig& config, const std::string& saved_json, const std::string& path);

// What a resume does to the lr schedule when the step at which its decay ends (optim.decay_steps, or
// train.steps when 0) is not the checkpoint's (`saved`): stretched to the new end, or kept and held at
// optim.min_lr after it. The note relgrad train prints at `step` (docs/cli.md "Training longer and the
// lr schedule"); "" when nothing changes.
std::string resume_schedule_note(const RunConfig& saved, const RunConfig& now, int64_t step);

}  // namespace relgrad
