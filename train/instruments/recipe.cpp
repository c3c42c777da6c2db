// The instruments' one recipe (train/instruments/recipe.h).
#include "train/instruments/recipe.h"

#include <omp.h>

#include <algorithm>

#include "core/base/error.h"

namespace relgrad {

RunConfig recipe_config(bool encoder_decoder, const RecipeSize& size, uint64_t seed, int64_t vocab) {
  RunConfig c = RunConfig::defaults();
  c.model_type = encoder_decoder ? ModelKind::EncoderDecoder : ModelKind::DecoderOnly;
  TransformerConfig& m = c.model;
  m.vocab_size = vocab;
  m.d_model = size.d_model;
  m.n_heads = size.n_heads;
  m.d_ff = size.d_ff;
  m.n_encoder_layers = size.encoder_layers;
  m.n_decoder_layers = size.decoder_layers;
  m.dropout = 0.0;
  m.encoder_self = PositionalConfig{"none"};
  m.decoder_self = PositionalConfig{"none"};
  m.cross = PositionalConfig{"none"};
  c.optim.name = OptimizerKind::AdamW;
  c.optim.lr = size.lr;
  c.optim.min_lr = size.lr / 20;
  c.optim.warmup_steps = size.warmup;
  c.optim.decay = LrSchedule::Decay::Cosine;
  c.optim.weight_decay = 0.01;
  c.optim.clip = 1.0;
  c.optim.positional_lr_scale = 1.0;  // one lr for every parameter, not the default run's 10
  c.optim.beta1 = 0.9;                // PyTorch's betas, not the default run's 0.8/0.95
  c.optim.beta2 = 0.999;
  c.train.steps = size.steps;
  c.train.batch_shards = 1;  // the whole batch on one replica, not the default run's two shards
  c.train.seed = seed;
  return c;
}

void set_bench_loop(RunConfig& c, const std::string& out_dir) {
  c.train.log_every = std::max<int64_t>(1, c.train.steps / 4);
  c.train.eval_every = 0;
  c.train.eval_batches = 1;
  c.train.save_every = 0;
  c.train.samples = 0;
  c.train.threads = 1;
  c.train.out_dir = out_dir;
}

TreatmentKind treatment_kind(const std::string& treatment) {
  if (treatment == "none") return TreatmentKind::None;
  if (treatment == "learned" || treatment == "sinusoidal") return TreatmentKind::Absolute;
  return TreatmentKind::Relative;
}

void set_decoder_treatment(RunConfig& c, const std::string& treatment, const SchemeFit& fit, int64_t max_positions) {
  switch (treatment_kind(treatment)) {
    case TreatmentKind::None:
      break;
    case TreatmentKind::Absolute:
      c.model.absolute_position = absolute_position_from_name(treatment, "recipe");
      if (max_positions > 0) c.model.max_positions = max_positions;
      break;
    case TreatmentKind::Relative: {
      PositionalConfig p;
      p.scheme = treatment;
      c.model.decoder_self = fitted(p, fit);
      break;
    }
  }
}

std::vector<std::string> every_treatment(bool randomised) {
  std::vector<std::string> out = kAbsolutePositionNames.names();  // none, sinusoidal, learned
  std::vector<std::string> random = {out.begin() + 1, out.end()};
  for (const SchemeEntry& e : positional_schemes()) {
    if (!e.make || placement(e, /*causal=*/true, /*cross=*/false) != Placement::Allowed) continue;
    out.push_back(e.name);
    if (e.random_positions) random.push_back(e.name);
  }
  if (randomised)
    for (const std::string& t : random) out.push_back(t + kRandomSuffix);
  return out;
}

bool randomised_treatment(const std::string& treatment) {
  return treatment.size() > kRandomSuffix.size() &&
         treatment.compare(treatment.size() - kRandomSuffix.size(), kRandomSuffix.size(), kRandomSuffix) == 0;
}

std::string base_treatment(const std::string& treatment) {
  return randomised_treatment(treatment) ? treatment.substr(0, treatment.size() - kRandomSuffix.size()) : treatment;
}

ThreadCountGuard::ThreadCountGuard() : threads_(omp_get_max_threads()) {}
ThreadCountGuard::~ThreadCountGuard() { omp_set_num_threads(threads_); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace relgrad
