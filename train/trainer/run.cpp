// The model of a run (RunModel's shared parts, build_model) and held-out evaluation.
#include "train/trainer/run.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/base/error.h"
#include "train/trainer/decoder_only_model.h"
#include "train/trainer/encoder_decoder_model.h"
#include "train/trainer/sampler.h"

namespace relgrad {

// ---- RunModel ------------------------------------------------------------------------
const char* attention_place_name(AttentionPlace place) {
  switch (place) {
    case AttentionPlace::EncoderSelf: return "encoder_self";
    case AttentionPlace::DecoderSelf: return "decoder_self";
    case AttentionPlace::Cross: return "cross";
  }
  return "?";
}

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

EvalResult evaluate(RunModel& model, const Dataset& data, int64_t batches, Communicator* comm,
                    const std::function<void(int64_t done)>& progress) {
  NoGradGuard no_grad;
  EvalScope eval_mode(*model.module);
  EvalResult r;
  r.rows_are_examples = data.rows_are_examples();
  double loss_sum = 0.0;
  int64_t correct = 0, rows_right = 0;
  for (int64_t n = 0; n < batches; ++n) {
    if (comm && n % comm->size() != comm->rank()) continue;  // another rank's batch
    const Batch host = data.batch(n, Split::HeldOut);
    const Batch b = host.to(model.device);
    const Tensor& targets = RunModel::targets(b);
    Tensor logits = model.logits(b);  // (B, T, V)
    const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
    loss_sum += cross_entropy(logits.reshape({B * T, V}), targets.reshape({B * T}),
                              CrossEntropyOptions().set_reduction(Reduction::Sum)).item();
    std::vector<int64_t> predicted = argmax(logits, -1).contiguous().to_vector<int64_t>();
    std::vector<int64_t> wanted = RunModel::targets(host).contiguous().to_vector<int64_t>();
    for (int64_t row = 0; row < B; ++row) {
      bool all = true;
      for (int64_t t = 0; t < T; ++t) {
        int64_t k = row * T + t;
        if (wanted[k] == kIgnoreIndex) continue;
        ++r.tokens;
        bool ok = predicted[k] == wanted[k];
        correct += ok;
        all = all && ok;
      }
      rows_right += all;
      ++r.sequences;
    }
    if (progress) progress(n + 1);
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
