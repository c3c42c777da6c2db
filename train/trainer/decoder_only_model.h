// A decoder-only language model (DecoderLM, layers/models.h) as a run's model (train/trainer/run.h):
// batches of tokens, prompts continued, one self-attention per layer.
#pragma once
#include <memory>

#include "train/trainer/run.h"

namespace relgrad {

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
  std::vector<AttentionSite> attention_sites() override;  // "layers.i.self_attn"
};

}  // namespace relgrad
