// EncoderDecoderModel: a run's encoder–decoder (train/trainer/encoder_decoder_model.h).
#include "train/trainer/encoder_decoder_model.h"

#include <string>

namespace relgrad {

EncoderDecoderModel::EncoderDecoderModel(std::shared_ptr<EncoderDecoder> ed) : network(std::move(ed)) {
  module = network;
}

Tensor EncoderDecoderModel::logits(const Batch& batch) {
  const Batch b = on_device(batch);
  // A batch may offer target positions (harmonisation data always does); the model's config decides
  // whether its cross-attention uses them (cross_alignment explicit) or places queries by its own alignment.
  const Tensor positions = network->config.explicit_cross() ? b.tgt_positions : Tensor();
  return network->forward(b.src, b.tgt_in, b.src_padding_mask, b.tgt_padding_mask, positions);
}

void EncoderDecoderModel::check_batch(const Batch& batch, const char* op) const {
  RG_CHECK(batch.src.defined() && batch.tgt_in.defined(), op,
           "an EncoderDecoder needs an encoder-decoder batch (src, tgt_in)");
}

Tensor EncoderDecoderModel::generate(const Tensor& src, const SamplingOptions& options, const Tensor& tgt_positions,
                                     bool use_cache) {
  return relgrad::generate(*network, src, Tensor(), options, use_cache, tgt_positions);
}

std::vector<int64_t> EncoderDecoderModel::answer(const std::vector<int64_t>& source, const SamplingOptions& options,
                                                 const std::function<Tensor(int64_t)>& target_positions) {
  Tensor src = from_vector<int64_t>(source, {1, static_cast<int64_t>(source.size())});
  // An explicitly aligned model gets its queries' places from the run (TrainerOptions::target_positions).
  Tensor positions;
  if (network->config.explicit_cross()) {
    RG_CHECK(static_cast<bool>(target_positions), "train",
             "the model places cross-attention queries explicitly, but the run gives no target_positions");
    positions = target_positions(1 + options.max_new_tokens);
  }
  std::vector<int64_t> seq = relgrad::generate(*network, src, Tensor(), options, true, positions).to_vector<int64_t>();
  return {seq.begin() + 1, seq.end()};  // after the BOS the decoder starts from
}

std::vector<AttentionSite> EncoderDecoderModel::attention_sites() {
  std::vector<AttentionSite> sites;
  const auto& enc = network->encoder->layers->items;
  for (size_t i = 0; i < enc.size(); ++i)
    sites.push_back({"encoder.layers." + std::to_string(i) + ".self_attn", AttentionPlace::EncoderSelf,
                     enc[i]->self_attn.get()});
  const auto& dec = network->decoder->layers->items;
  for (size_t i = 0; i < dec.size(); ++i) {
    const std::string prefix = "decoder.layers." + std::to_string(i);
    sites.push_back({prefix + ".self_attn", AttentionPlace::DecoderSelf, dec[i]->self_attn.get()});
    sites.push_back({prefix + ".cross_attn", AttentionPlace::Cross, dec[i]->cross_attn.get()});
  }
  return sites;
}

}  // namespace relgrad
