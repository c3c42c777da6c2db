// A RunConfig (train/config/config.h) turned into what the training side runs: the one place that maps
// the command's config onto the trainer's options (train/trainer/options.h) and data.source onto a
// Dataset, and a checkpoint (whose metadata holds its config) reopened as a run.
#pragma once
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "train/config/config.h"
#include "train/data/dataset.h"
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

// "warning: data.music_dir: skipped '<file>': <why>" for each of the first kListedSkips files the
// data skipped, then one line counting the rest; nothing when none was skipped.
inline constexpr size_t kListedSkips = 20;
void report_skipped_files(const Dataset& data, std::ostream& out);

// The Dataset data.source names: "synthetic", "text", "tokens" or "music" (vocab sizes need not be derived).
std::shared_ptr<const Dataset> make_dataset(const RunConfig& config);
ModelOptions model_options(const RunConfig& config);      // model.type, the model, train.dtype
SamplingOptions sampling_options(const SampleConfig& config);  // the [sample] section (eos stays the default)

// The data of a run's config, with its source for the commands that treat sources apart (sample, eval).
class RunData {
 public:
  // Skipped files are reported on `warnings` as trainer_options does.
  explicit RunData(const RunConfig& config, std::ostream* warnings = &std::cerr)
      : data_(make_dataset(config)) {
    if (warnings) report_skipped_files(*data_, *warnings);
  }
  Batch batch(int64_t index, Split split) const { return data_->batch(index, split); }
  const Vocab& vocab() const { return data_->vocab(); }
  const Dataset& dataset() const { return *data_; }
  const SyntheticTask* task() const;  // null unless data.source = "synthetic"; and so on
  const TextDataset* text() const;
  const TokenDataset* tokens() const;
  const MusicDataset* music() const;

 private:
  std::shared_ptr<const Dataset> data_;
};

// A checkpoint opened for sampling / evaluation: its config (from the metadata) and the model,
// restored onto `device` (a checkpoint holds host tensors, whatever device wrote it; the config's
// train.device is not consulted: a run trained on a GPU samples on the CPU by default). Errors name the file.
struct LoadedRun {
  RunConfig config;
  Checkpoint checkpoint;
  RunModel model;
};
LoadedRun load_run(const std::string& checkpoint_path, Device device = Device::cpu());

// The checkpoint's config (validated and derived) against its model tensors, before anything is built
// from it: the block counts (by tensor name), the embedding's and first feed-forward's shapes, and a
// lower bound of the parameters the config implies against the elements the tensors hold. A config
// edited to model.d_model = 8192 or n_encoder_layers = 1000000 (its header checksum recomputed) is
// refused here instead of allocating gigabytes. "[checkpoint] <path>: its config does not describe
// its tensors: ...". load_run calls it; so should anything else that builds a model from a checkpoint.
void check_config_fits_checkpoint(const RunConfig& config, const Checkpoint& checkpoint,
                                  const std::string& path);

}  // namespace relgrad
