// DecoderOnlyModel: a run's decoder-only model (train/trainer/decoder_only_model.h).
#include "train/trainer/decoder_only_model.h"

#include <string>

namespace relgrad {

DecoderOnlyModel::DecoderOnlyModel(std::shared_ptr<DecoderLM> lm) : network(std::move(lm)) { module = network; }

Tensor DecoderOnlyModel::logits(const Batch& batch) {
  const Batch b = on_device(batch);
  return network->forward(b.tokens, b.padding_mask);
}

Tensor DecoderOnlyModel::logits_at_random_positions(const Batch& batch) {
  const Batch b = on_device(batch);
  return network->forward_at(b.tokens, network->draw_positions(b.tokens.size(1)), b.padding_mask);
}

void DecoderOnlyModel::check_batch(const Batch& batch, const char* op) const {
  RG_CHECK(batch.decoder_only(), op, "a DecoderLM needs a decoder-only batch (tokens)");
}

Tensor DecoderOnlyModel::generate(const Tensor& prompt, const SamplingOptions& options, const Tensor& tgt_positions,
                                  bool use_cache) {
  RG_CHECK(!tgt_positions.defined(), "generate",
           "tgt_positions place cross-attention queries, but a decoder-only model has no cross-attention");
  return relgrad::generate(*network, prompt, options, use_cache);
}

std::vector<int64_t> DecoderOnlyModel::answer(const std::vector<int64_t>& source, const SamplingOptions& options,
                                              const std::function<Tensor(int64_t)>& /*target_positions*/) {
  std::vector<int64_t> prompt = source;
  prompt.push_back(kBos);
  Tensor p = from_vector<int64_t>(prompt, {1, static_cast<int64_t>(prompt.size())});
  std::vector<int64_t> seq = relgrad::generate(*network, p, options).to_vector<int64_t>();
  return {seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()), seq.end()};
}

std::vector<AttentionSite> DecoderOnlyModel::attention_sites() {
  std::vector<AttentionSite> sites;
  const auto& layers = network->layers->items;
  for (size_t i = 0; i < layers.size(); ++i)
    sites.push_back({"layers." + std::to_string(i) + ".self_attn", AttentionPlace::DecoderSelf,
                     layers[i]->self_attn.get()});
  return sites;
}

}  // namespace relgrad
