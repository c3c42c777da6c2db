// The model of a run (RunModel, its two kinds, build_model) and held-out evaluation, whole or strided.
#include "train/trainer/run.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/base/error.h"
#include "train/trainer/sampler.h"

namespace relgrad {

// ---- RunModel ------------------------------------------------------------------------
const char* attention_place_name(AttentionPlace place) { return kAttentionPlaceNames.name(place); }

Tensor RunModel::logits_at_random_positions(const Batch&) {
  RG_CHECK(false, "model", "random positions at evaluation are for a decoder-only model");
  return Tensor();
}

Batch RunModel::on_device(const Batch& batch) const {
  const Tensor& first = batch.decoder_only() ? batch.tokens : batch.src;
  return first.defined() && first.device() != device ? batch.to(device) : batch;
}

void RunModel::to(Device d) {
  module->to(d);
  device = d;
}

// ---- DecoderOnlyModel -------------------------------------------------------------------
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

// ---- EncoderDecoderModel ----------------------------------------------------------------
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

Device resolve_device(const std::string& name, const std::string& what) {
  Device d;
  try {
    d = Device::parse(name);
  } catch (const Error&) {
    throw Error("[config] " + what + " = " + name + ": expected cpu, cuda or cuda:N");
  }
  if (d.is_cpu()) return d;
  RG_CHECK(cuda_built(), "config", what, " = ", name,
           ", but relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON, docs/cuda.md); use cpu");
  const int count = cuda_device_count();
  RG_CHECK(count > 0, "config", what, " = ", name,
           ", but no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES); use cpu");
  RG_CHECK(d.index < count, "config", what, " = ", name, ", but only ", count, " CUDA device",
           count == 1 ? " is" : "s are", " visible (cuda:0 .. cuda:", count - 1, ")");
  return d;
}

std::shared_ptr<RunModel> build_model(const ModelOptions& options, Generator* init) {
  std::shared_ptr<RunModel> m;
  if (options.type == ModelKind::EncoderDecoder)
    m = std::make_shared<EncoderDecoderModel>(std::make_shared<EncoderDecoder>(options.config, init));
  else
    m = std::make_shared<DecoderOnlyModel>(std::make_shared<DecoderLM>(options.config, init));
  if (options.dtype == kFloat64) m->module->to(kFloat64);
  return m;
}

BatchScore score_batch(RunModel& model, const Batch& host,
                       const std::function<void(int64_t t, int64_t target, bool right)>& each_token) {
  const Batch b = host.to(model.device);
  const Tensor& targets = RunModel::targets(b);
  Tensor logits = model.logits(b);  // (B, T, V)
  const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
  BatchScore s;
  s.loss_sum = cross_entropy(logits.reshape({B * T, V}), targets.reshape({B * T}),
                             CrossEntropyOptions().set_reduction(Reduction::Sum)).item();
  std::vector<int64_t> predicted = argmax(logits, -1).contiguous().to_vector<int64_t>();
  std::vector<int64_t> wanted = RunModel::targets(host).contiguous().to_vector<int64_t>();
  for (int64_t row = 0; row < B; ++row) {
    bool all = true;
    for (int64_t t = 0; t < T; ++t) {
      int64_t k = row * T + t;
      if (wanted[k] == kIgnoreIndex) continue;
      ++s.tokens;
      bool ok = predicted[k] == wanted[k];
      s.correct += ok;
      if (each_token) each_token(t, wanted[k], ok);
      all = all && ok;
    }
    s.rows_right += all;
    ++s.rows;
  }
  return s;
}

EvalResult eval_result(const std::vector<BatchScore>& scores, bool rows_are_examples, Communicator* comm) {
  EvalResult r;
  r.rows_are_examples = rows_are_examples;
  double loss_sum = 0.0;
  int64_t correct = 0, rows_right = 0;
  for (const BatchScore& s : scores) {
    loss_sum += s.loss_sum;
    r.tokens += s.tokens, correct += s.correct, rows_right += s.rows_right, r.sequences += s.rows;
  }
  if (comm && comm->size() > 1) {  // counts are exact in double below 2^53
    double sums[5] = {loss_sum, double(r.tokens), double(correct), double(rows_right), double(r.sequences)};
    comm->all_reduce_sum(sums, 5);
    loss_sum = sums[0];
    r.tokens = int64_t(sums[1]), correct = int64_t(sums[2]), rows_right = int64_t(sums[3]), r.sequences = int64_t(sums[4]);
  }
  r.loss = r.tokens ? loss_sum / static_cast<double>(r.tokens) : 0.0;
  r.accuracy = r.tokens ? static_cast<double>(correct) / static_cast<double>(r.tokens) : 0.0;
  r.sequence_accuracy = r.sequences ? static_cast<double>(rows_right) / static_cast<double>(r.sequences) : 0.0;
  return r;
}

EvalResult evaluate(RunModel& model, const Dataset& data, int64_t batches, Communicator* comm,
                    const std::function<void(int64_t done)>& progress,
                    const std::function<void(int64_t t, int64_t target, bool right)>& each_token) {
  NoGradGuard no_grad;
  EvalScope eval_mode(*model.module);
  std::vector<BatchScore> scores;
  for (int64_t n = 0; n < batches; ++n) {
    if (comm && n % comm->size() != comm->rank()) continue;  // another rank's batch
    scores.push_back(score_batch(model, data.batch(n, Split::HeldOut), each_token));
    if (progress) progress(n + 1);
  }
  return eval_result(scores, data.rows_are_examples(), comm);
}

// ---- strided evaluation ---------------------------------------------------------------------
std::vector<StridedWindow> strided_windows(int64_t T, int64_t window) {
  RG_CHECK(window >= 1, "evaluate_strided", "window must be >= 1, got ", window);
  const int64_t stride = (window + 1) / 2;
  std::vector<StridedWindow> out;
  int64_t scored = 0;  // tokens scored so far
  for (int64_t begin = 0; scored < T; begin += stride) {
    const int64_t end = std::min(begin + window, T);
    out.push_back({begin, end, scored});
    scored = end;
  }
  return out;
}

EvalResult evaluate_strided(RunModel& model, const Dataset& data, int64_t batches, int64_t window,
                            const std::function<void(int64_t done)>& progress) {
  RG_CHECK(model.kind() == ModelKind::DecoderOnly, "evaluate_strided",
           "a sliding window reads a decoder-only model's tokens; this is an encoder-decoder model");
  NoGradGuard no_grad;
  EvalScope eval_mode(*model.module);
  EvalResult r;
  r.rows_are_examples = false;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t n = 0; n < batches; ++n) {
    const Batch b = data.batch(n, Split::HeldOut).to(model.device);
    const int64_t T = b.tokens.size(1);
    for (const StridedWindow& w : strided_windows(T, window)) {
      Batch part;  // tokens [begin, end), which the model reads from position 0
      part.tokens = b.tokens.narrow(1, w.begin, w.end - w.begin).contiguous();
      if (b.padding_mask.defined())
        part.padding_mask = b.padding_mask.narrow(1, w.begin, w.end - w.begin).contiguous();
      const int64_t fresh = w.end - w.scored_from;  // the window's last `fresh` positions are scored
      Tensor logits = model.logits(part);           // (B, end − begin, V)
      const int64_t B = logits.size(0), V = logits.size(2);
      Tensor scored = logits.narrow(1, logits.size(1) - fresh, fresh).contiguous();  // (B, fresh, V)
      Tensor targets = b.targets.narrow(1, w.scored_from, fresh).contiguous();       // (B, fresh)
      loss_sum += cross_entropy(scored.reshape({B * fresh, V}), targets.reshape({B * fresh}),
                                CrossEntropyOptions().set_reduction(Reduction::Sum)).item();
      const std::vector<int64_t> predicted = argmax(scored, -1).to(Device::cpu()).contiguous().to_vector<int64_t>();
      const std::vector<int64_t> wanted = targets.to(Device::cpu()).to_vector<int64_t>();
      for (size_t k = 0; k < wanted.size(); ++k) {
        if (wanted[k] == kIgnoreIndex) continue;
        ++r.tokens;
        correct += predicted[k] == wanted[k];
      }
    }
    r.sequences += b.tokens.size(0);
    if (progress) progress(n + 1);
  }
  r.loss = r.tokens ? loss_sum / static_cast<double>(r.tokens) : 0.0;
  r.accuracy = r.tokens ? static_cast<double>(correct) / static_cast<double>(r.tokens) : 0.0;
  return r;
}

// ---- samples ----------------------------------------------------------------------------------
namespace {
class RunSampleModel : public SampleModel {
 public:
  RunSampleModel(RunModel& model, const SamplingOptions& options, const std::function<Tensor(int64_t)>& target_positions)
      : model_(model), options_(options), target_positions_(target_positions) {}
  std::vector<int64_t> answer(const std::vector<int64_t>& source, int64_t max_new_tokens) override {
    SamplingOptions greedy;
    greedy.temperature = 0.0;
    greedy.max_new_tokens = max_new_tokens;
    return model_.answer(source, greedy, target_positions_);
  }
  std::vector<int64_t> continue_prompt(const std::vector<int64_t>& prompt, bool stop_at_eos) override {
    RG_CHECK(model_.kind() == ModelKind::DecoderOnly, "train", "samples from a prompt need a decoder-only model");
    SamplingOptions o = options_;
    if (!stop_at_eos) o.eos = -1;
    Tensor p = from_vector<int64_t>(prompt, {1, (int64_t)prompt.size()});
    return model_.generate(p, o).to_vector<int64_t>();
  }

 private:
  RunModel& model_;
  SamplingOptions options_;
  std::function<Tensor(int64_t)> target_positions_;
};
}  // namespace

std::unique_ptr<SampleModel> sample_model(RunModel& model, const SamplingOptions& options,
                                          const std::function<Tensor(int64_t)>& target_positions) {
  return std::make_unique<RunSampleModel>(model, options, target_positions);
}

}  // namespace relgrad
