// The model and data of a run, as the trainer, the command and the instruments see them: RunModel
// (either kind of model behind one interface for batches), RunData (the data of a run's config),
// held-out evaluation, and a checkpoint reopened as a run (load_run).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "train/command/config.h"
#include "train/data/data.h"
#include "train/music/music.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/distributed.h"

namespace relgrad {

// The model of a run: one of the two kinds, behind one interface for batches.
struct RunModel {
  std::shared_ptr<Module> module;
  std::shared_ptr<EncoderDecoder> encoder_decoder;  // exactly one of these two is set
  std::shared_ptr<DecoderLM> decoder_lm;
  Device device = Device::cpu();         // where the weights are (to() moves them)
  // (B, T, V) on `device`; the batch is copied there first when it is elsewhere (batches are built
  // on the host: a caller that also needs the targets there moves the batch itself, Batch::to).
  Tensor logits(const Batch& batch);
  static const Tensor& targets(const Batch& batch) { return batch.decoder_only() ? batch.targets : batch.tgt_out; }
  void to(Device d);                     // Module::to on the weights, in place
};

// The device a setting names ("cpu", "cuda", "cuda:N"), checked before any work: throws
// relgrad::Error "[config] <what> = cuda, but relgrad was built without CUDA support ..." or
// "... but no CUDA device is visible ..." (relgrad train exits 2, as for other config errors).
// `what` names the setting in the message: "train.device" or "--device".
Device resolve_device(const std::string& name, const std::string& what);
// Builds the model `config` describes (vocab sizes must be derived), initialised from `init`, on the
// CPU: the initial weights are drawn on the host whatever train.device says, so a run gives the same
// starting point on every device (RunModel::to moves it after).
RunModel build_model(const RunConfig& config, Generator* init);

// The data of a run: a synthetic task or a text file.
class RunData {
 public:
  explicit RunData(const RunConfig& config);
  Batch batch(int64_t index, Split split) const;
  const Vocab& vocab() const { return vocab_; }
  const SyntheticTask* task() const { return task_.get(); }
  const TextDataset* text() const { return text_.get(); }
  const TokenDataset* tokens() const { return tokens_.get(); }
  const MusicDataset* music() const { return music_.get(); }

 private:
  const RunConfig* config_;
  std::unique_ptr<SyntheticTask> task_;
  std::unique_ptr<TextDataset> text_;
  std::unique_ptr<TokenDataset> tokens_;
  std::unique_ptr<MusicDataset> music_;
  Vocab vocab_;
};

struct EvalResult {
  double loss = 0.0;               // token-mean cross-entropy over the held-out batches
  double accuracy = 0.0;           // argmax == target, over loss tokens (teacher forcing)
  double sequence_accuracy = 0.0;  // rows whose every loss token is right
  int64_t tokens = 0, sequences = 0;
};

// Evaluates `model` on held-out batches 0 .. batches−1 of `data` (eval mode, no grad; restores the mode),
// on the model's device (each batch is copied there; the counts come back to the host).
// With a communicator of several ranks, rank r evaluates batches r, r + N, ... and the sums are
// all-reduced, so every rank returns the result for all batches.
EvalResult evaluate(RunModel& model, const RunData& data, int64_t batches, Communicator* comm = nullptr);

// A checkpoint opened for sampling / evaluation: its config (from the metadata) and the model,
// restored onto `device` (a checkpoint holds host tensors, whatever device wrote it; the config's
// train.device is not consulted: a run trained on a GPU samples on the CPU by default). Errors name the file.
struct LoadedRun {
  RunConfig config;
  Checkpoint checkpoint;
  RunModel model;
};
LoadedRun load_run(const std::string& checkpoint_path, Device device = Device::cpu());

}  // namespace relgrad
