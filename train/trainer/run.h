// The model of a run, as the trainer, the command and the instruments see it: RunModel (one interface
// over the model kinds: logits, generation, attention sites), build_model, and held-out evaluation on a
// Dataset. The kinds are DecoderOnlyModel and EncoderDecoderModel. A run's data and a checkpoint
// reopened as a run are built from its config in train/config/run_options.h.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/data/dataset.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/distributed.h"
#include "train/trainer/options.h"
#include "train/trainer/sampler.h"

namespace relgrad {

// Where an attention module sits, which decides whose tokens its queries and keys are.
enum class AttentionPlace { EncoderSelf, DecoderSelf, Cross };
// "decoder_self" is also a decoder-only model's layers.
inline constexpr NameTable<AttentionPlace, 3> kAttentionPlaceNames{{{AttentionPlace::EncoderSelf, "encoder_self"},
                                                                    {AttentionPlace::DecoderSelf, "decoder_self"},
                                                                    {AttentionPlace::Cross, "cross"}}};
const char* attention_place_name(AttentionPlace place);

// One attention module of a model, for instruments that hook into it (MultiHeadAttention::forward_hook,
// layers/attention.h; train/instruments/probe.cpp).
struct AttentionSite {
  std::string layer;  // its module path: "encoder.layers.0.self_attn", a decoder-only model's "layers.0.self_attn"
  AttentionPlace place = AttentionPlace::DecoderSelf;
  MultiHeadAttention* attention = nullptr;  // owned by the model
};

// The model of a run, whatever its kind: what the trainer, the commands and the instruments ask of it,
// so that none of them asks which kind it holds.
class RunModel {
 public:
  virtual ~RunModel() = default;
  std::shared_ptr<Module> module;  // the network: parameters, state dict, train/eval mode
  Device device = Device::cpu();   // where the weights are (to() moves them)

  virtual ModelKind kind() const = 0;
  virtual const TransformerConfig& config() const = 0;
  // (B, T, V) on `device`; the batch is copied there first when it is elsewhere (batches are built
  // on the host: a caller that also needs the targets there moves the batch itself, Batch::to).
  // An encoder–decoder gets the batch's tgt_positions too (defined for explicitly aligned data).
  virtual Tensor logits(const Batch& batch) = 0;
  // logits() with the decoder-only model's tokens at freshly drawn random positions
  // (TransformerConfig::random_positions_max: Ruoss et al.'s evaluation, train/instruments/length_bench.cpp).
  // An encoder–decoder throws.
  virtual Tensor logits_at_random_positions(const Batch& batch);
  // Throws "[op] ..." when `batch` is not of this model's layout (train/data/data.h).
  virtual void check_batch(const Batch& batch, const char* op) const = 0;

  // Sampling (train/trainer/sampler.h), on the model's device, with a KV cache unless use_cache is false:
  //   decoder-only:    input = a prompt int64 (B, T) → the prompt followed by the new tokens (B, T + n)
  //   encoder–decoder: input = a source int64 (B, t1) → BOS then the new tokens (B, 1 + n);
  //                    tgt_positions as sampler.h's generate (an explicitly aligned model)
  virtual Tensor generate(const Tensor& input, const SamplingOptions& options, const Tensor& tgt_positions = Tensor(),
                          bool use_cache = true) = 0;
  // The model's answer to a synthetic task's source (the layouts of train/data/data.h), the tokens it
  // generates after: an encoder–decoder's BOS, a decoder-only model's prompt "source BOS". An explicitly
  // aligned model gets its queries' places from `target_positions` (TrainerOptions::target_positions).
  virtual std::vector<int64_t> answer(const std::vector<int64_t>& source, const SamplingOptions& options,
                                      const std::function<Tensor(int64_t)>& target_positions = {}) = 0;

  // Every attention module, in model order: encoder self, then per decoder layer self and cross.
  virtual std::vector<AttentionSite> attention_sites() = 0;

  static const Tensor& targets(const Batch& batch) { return batch.decoder_only() ? batch.targets : batch.tgt_out; }
  void to(Device d);  // Module::to on the weights, in place

 protected:
  // `batch` on the model's device (a copy only when its tensors are elsewhere).
  Batch on_device(const Batch& batch) const;
};

// A decoder-only language model (DecoderLM, layers/models.h): batches of tokens, prompts continued,
// one self-attention per layer ("layers.i.self_attn").
class DecoderOnlyModel : public RunModel {
 public:
  explicit DecoderOnlyModel(std::shared_ptr<DecoderLM> network);
  std::shared_ptr<DecoderLM> network;  // = module

  ModelKind kind() const override { return ModelKind::DecoderOnly; }
  const TransformerConfig& config() const override { return network->config; }
  Tensor logits(const Batch& batch) override;
  Tensor logits_at_random_positions(const Batch& batch) override;
  void check_batch(const Batch& batch, const char* op) const override;
  // tgt_positions must be undefined: a decoder-only model has no cross-attention to place.
  Tensor generate(const Tensor& prompt, const SamplingOptions& options, const Tensor& tgt_positions,
                  bool use_cache) override;
  // The continuation of "source BOS"; target_positions is not used.
  std::vector<int64_t> answer(const std::vector<int64_t>& source, const SamplingOptions& options,
                              const std::function<Tensor(int64_t)>& target_positions) override;
  std::vector<AttentionSite> attention_sites() override;
};

// An encoder–decoder (EncoderDecoder, layers/models.h): batches of source and target, sources decoded,
// encoder self-attention ("encoder.layers.i.self_attn") and per decoder layer self- and cross-attention
// ("decoder.layers.i.self_attn", "decoder.layers.i.cross_attn").
class EncoderDecoderModel : public RunModel {
 public:
  explicit EncoderDecoderModel(std::shared_ptr<EncoderDecoder> network);
  std::shared_ptr<EncoderDecoder> network;  // = module

  ModelKind kind() const override { return ModelKind::EncoderDecoder; }
  const TransformerConfig& config() const override { return network->config; }
  Tensor logits(const Batch& batch) override;
  void check_batch(const Batch& batch, const char* op) const override;
  Tensor generate(const Tensor& src, const SamplingOptions& options, const Tensor& tgt_positions,
                  bool use_cache) override;
  std::vector<int64_t> answer(const std::vector<int64_t>& source, const SamplingOptions& options,
                              const std::function<Tensor(int64_t)>& target_positions) override;
  std::vector<AttentionSite> attention_sites() override;
};

// The device a setting names ("cpu", "cuda", "cuda:N"), checked before any work: throws
// relgrad::Error "[config] <what> = cuda, but relgrad was built without CUDA support ..." or
// "... but no CUDA device is visible ..." (relgrad train exits 2, as for other config errors).
// `what` names the setting in the message: "train.device" or "--device".
Device resolve_device(const std::string& name, const std::string& what);
// Builds the model `options` describe (vocab sizes filled in), initialised from `init`, on the
// CPU: the initial weights are drawn on the host whatever train.device says, so a run gives the same
// starting point on every device (RunModel::to moves it after).
std::shared_ptr<RunModel> build_model(const ModelOptions& options, Generator* init);

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
// `progress` (optional) is called after each batch this rank evaluates, with the batches done so far;
// `each_token` (optional) with every loss token this rank scores: its place t in the row, its target and
// whether the argmax is right (the experiments' accuracy on the positions a task singles out).
EvalResult evaluate(RunModel& model, const Dataset& data, int64_t batches, Communicator* comm = nullptr,
                    const std::function<void(int64_t done)>& progress = {},
                    const std::function<void(int64_t t, int64_t target, bool right)>& each_token = {});

// evaluate()'s parts: one held-out batch scored on `model` (which the caller has put in eval mode,
// under no grad), and the parts of this rank's batches added in batch order (then all-reduced over
// the ranks of `comm`). Batch shards (train/trainer/batch_shards.h) score batches side by side on
// replicas and add them the same way, so both give the same bits.
struct BatchScore {
  double loss_sum = 0.0;  // the batch's summed token cross-entropy
  int64_t tokens = 0, correct = 0, rows_right = 0, rows = 0;
};
BatchScore score_batch(RunModel& model, const Batch& host,
                       const std::function<void(int64_t t, int64_t target, bool right)>& each_token = {});
EvalResult eval_result(const std::vector<BatchScore>& scores, bool rows_are_examples, Communicator* comm);

// Held-out evaluation of a decoder-only model through a sliding window (`relgrad eval --window C`):
// Hugging Face's strided perplexity (the Transformers guide "Perplexity of fixed-length models").
// Each held-out row of T tokens is read in windows of at most C tokens that start every S = ⌈C/2⌉
// tokens, [b, min(b + C, T)) for b = 0, S, 2S, …, up to the first window that reaches T; a window
// scores only the tokens that no earlier window scored, so every token is scored once, from at least
// min(p, C − S) and at most C tokens of context (p: its place in the row), and no position past C − 1
// is ever used. The model runs exactly as evaluate() runs it (eval mode, no grad, on its device).
struct StridedWindow {
  int64_t begin, end, scored_from;
};
// The windows of a row of T tokens under window C.
std::vector<StridedWindow> strided_windows(int64_t T, int64_t window);
// evaluate() with every row read through strided_windows: the loss and token accuracy over the same
// tokens, each from at most `window` tokens of context (window ≥ 1). Decoder-only models only (an
// Error otherwise). No sequence accuracy: rows_are_examples is false.
EvalResult evaluate_strided(RunModel& model, const Dataset& data, int64_t batches, int64_t window,
                            const std::function<void(int64_t done)>& progress = nullptr);

// `model` lent to Dataset::print_samples (train/data/dataset.h): greedy answers to a source, and
// continuations of a prompt (decoder-only) with `options`. An explicitly aligned encoder–decoder gets
// its queries' places from `target_positions` (TrainerOptions::target_positions).
std::unique_ptr<SampleModel> sample_model(RunModel& model, const SamplingOptions& options,
                                          const std::function<Tensor(int64_t)>& target_positions);

}  // namespace relgrad
