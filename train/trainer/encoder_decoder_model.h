// An encoder–decoder (EncoderDecoder, layers/models.h) as a run's model (train/trainer/run.h): batches
// of source and target, sources decoded, encoder self-attention and per decoder layer self- and
// cross-attention.
#pragma once
#include <memory>

#include "train/trainer/run.h"

namespace relgrad {

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
  // "encoder.layers.i.self_attn", then "decoder.layers.i.self_attn" and "decoder.layers.i.cross_attn".
  std::vector<AttentionSite> attention_sites() override;
};

}  // namespace relgrad
