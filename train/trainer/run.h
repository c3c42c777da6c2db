// The model of a run, as the trainer, the command and the instruments see them: RunModel (either kind
// of model behind one interface for batches), build_model, and held-out evaluation on a Dataset.
// A run's data and a checkpoint reopened as a run are built from its config in
// train/config/run_options.h.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "train/data/dataset.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/distributed.h"
#include "train/trainer/options.h"

namespace relgrad {

// The model of a run: one of the two kinds, behind one interface for batches.
struct RunModel {
  std::shared_ptr<Module> module;
  std::shared_ptr<EncoderDecoder> encoder_decoder;  // exactly one of these two is set
  std::shared_ptr<DecoderLM> decoder_lm;
  Device device = Device::cpu();         // where the weights are (to() moves them)
  // (B, T, V) on `device`; the batch is copied there first when it is elsewhere (batches are built
  // on the host: a caller that also needs the targets there moves the batch itself, Batch::to).
  // An encoder–decoder gets the batch's tgt_positions too (defined for explicitly aligned data).
  Tensor logits(const Batch& batch);
  static const Tensor& targets(const Batch& batch) { return batch.decoder_only() ? batch.targets : batch.tgt_out; }
  void to(Device d);                     // Module::to on the weights, in place
};

// The device a setting names ("cpu", "cuda", "cuda:N"), checked before any work: throws
// relgrad::Error "[config] <what> = cuda, but relgrad was built without CUDA support ..." or
// "... but no CUDA device is visible ..." (relgrad train exits 2, as for other config errors).
// `what` names the setting in the message: "train.device" or "--device".
Device resolve_device(const std::string& name, const std::string& what);
// Builds the model `options` describe (vocab sizes filled in), initialised from `init`, on the
// CPU: the initial weights are drawn on the host whatever train.device says, so a run gives the same
// starting point on every device (RunModel::to moves it after).
RunModel build_model(const ModelOptions& options, Generator* init);

struct EvalResult {
  double loss = 0.0;               // token-mean cross-entropy over the held-out batches
  double accuracy = 0.0;           // argmax == target, over loss tokens (teacher forcing)
  double sequence_accuracy = 0.0;  // rows whose every loss token is right
  int64_t tokens = 0, sequences = 0;
  // Whether a row is one example (a synthetic task's source → target), so that sequence accuracy means
  // something; false for language-model windows (text, tokens, music), cut anywhere in the stream:
  // print and log no sequence accuracy for those.
  bool rows_are_examples = true;
};

// Evaluates `model` on held-out batches 0 .. batches−1 of `data` (eval mode, no grad; restores the mode),
// on the model's device (each batch is copied there; the counts come back to the host).
// With a communicator of several ranks, rank r evaluates batches r, r + N, ... and the sums are
// all-reduced, so every rank returns the result for all batches.
// `progress` (optional) is called after each batch this rank evaluates, with the batches done so far.
EvalResult evaluate(RunModel& model, const Dataset& data, int64_t batches, Communicator* comm = nullptr,
                    const std::function<void(int64_t done)>& progress = {});

// `model` lent to Dataset::print_samples (train/data/dataset.h): greedy answers to a source, and
// continuations of a prompt (decoder-only) with `options`. An explicitly aligned encoder–decoder gets
// its queries' places from `target_positions` (TrainerOptions::target_positions).
std::unique_ptr<SampleModel> sample_model(RunModel& model, const SamplingOptions& options,
                                          const std::function<Tensor(int64_t)>& target_positions);

}  // namespace relgrad
