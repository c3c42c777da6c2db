// A RunConfig as trainer options, a Dataset and a reopened run (train/config/run_options.h).
#include "train/config/run_options.h"

#include <sstream>

#include "core/base/error.h"

namespace relgrad {
namespace {

TaskConfig task_config(const RunConfig& c) {
  TaskConfig t;
  t.kind = task_kind_from_string(c.data.task);
  t.layout = c.encoder_decoder() ? Layout::EncoderDecoder : Layout::DecoderOnly;
  t.num_symbols = c.data.num_symbols;
  t.min_len = c.data.min_len;
  t.max_len = c.data.max_len;
  t.batch_size = c.data.batch_size;
  t.lag = c.data.lag;
  t.period = c.data.period;
  t.seed = c.data.seed;
  return t;
}

// The keys that must agree between a checkpoint and the config resuming it.
bool shapes_run(const std::string& key) {
  return key.rfind("model.", 0) == 0 || key.rfind("data.", 0) == 0 || key == "optim.name" || key == "train.dtype" ||
         key == "train.seed";
}

void check_resume(const RunConfig& config, const std::string& saved_json, const std::string& path) {
  RunConfig saved = config;
  try {
    load_config_json_text(saved, saved_json, "config");
  } catch (const Error& e) {
    throw Error("[train] " + path + ": the checkpoint's config cannot be read: " + e.what());
  }
  // Compare through the TOML form, key by key, so the error names what differs.
  std::string mine = config_to_toml(config), theirs = config_to_toml(saved);
  std::istringstream a(mine), b(theirs);
  std::string la, lb, section;
  while (std::getline(a, la) && std::getline(b, lb)) {
    if (!la.empty() && la[0] == '[') section = la.substr(1, la.size() - 2);
    std::string key = section + "." + la.substr(0, la.find(" = "));
    RG_CHECK(la == lb || !shapes_run(key), "train", "cannot resume from ", path, ": ", key, " is ",
             lb.substr(lb.find(" = ") + 3), " there and ", la.substr(la.find(" = ") + 3),
             " here (keys of the model, data, optimizer, dtype and seed must match)");
  }
}

}  // namespace

std::shared_ptr<const Dataset> make_dataset(const RunConfig& c) {
  const DataConfig& d = c.data;
  if (d.source == "text") return std::make_shared<TextData>(d.text_path, d.val_fraction, d.seed, d.batch_size, d.context);
  if (d.source == "tokens") return std::make_shared<TokenData>(d.token_path, d.val_fraction, d.seed, d.batch_size, d.context);
  if (d.source == "music") {
    MusicDatasetConfig m;
    m.folder = d.music_dir;
    m.synth = music_synth_config(c);
    m.val_fraction = d.val_fraction;
    m.seed = d.seed;
    return std::make_shared<MusicData>(m, d.batch_size, d.context);
  }
  return std::make_shared<SyntheticData>(task_config(c));
}

ModelOptions model_options(const RunConfig& c) {
  ModelOptions m;
  m.type = c.model_type;
  m.config = c.model;
  m.dtype = c.train.dtype;
  return m;
}

SamplingOptions sampling_options(const SampleConfig& c) {
  SamplingOptions o;
  o.max_new_tokens = c.max_new_tokens;
  o.temperature = c.temperature;
  o.top_k = c.top_k;
  o.top_p = c.top_p;
  o.seed = c.seed;
  return o;
}

TrainerOptions trainer_options(RunConfig c) {
  c.validate();
  resolve_device(c.train.device, "train.device");  // no CUDA: the error comes before any data is read
  c.derive_from_data();
  TrainerOptions o;
  o.model = model_options(c);
  o.optim = c.optim;
  o.train = c.train;
  o.sample = sampling_options(c.sample);
  o.data = make_dataset(c);
  o.config_json = config_to_json(c);
  o.check_resume = [c](const std::string& saved_json, const std::string& path) { check_resume(c, saved_json, path); };
  return o;
}

// ---- RunData -----------------------------------------------------------------------------------
const SyntheticTask* RunData::task() const {
  auto* d = dynamic_cast<const SyntheticData*>(data_.get());
  return d ? &d->task() : nullptr;
}
const TextDataset* RunData::text() const {
  auto* d = dynamic_cast<const TextData*>(data_.get());
  return d ? &d->text() : nullptr;
}
const TokenDataset* RunData::tokens() const {
  auto* d = dynamic_cast<const TokenData*>(data_.get());
  return d ? &d->tokens() : nullptr;
}
const MusicDataset* RunData::music() const {
  auto* d = dynamic_cast<const MusicData*>(data_.get());
  return d ? &d->music() : nullptr;
}

// ---- load_run ----------------------------------------------------------------------------------
LoadedRun load_run(const std::string& path, Device device) {
  LoadedRun run;
  run.checkpoint = load_checkpoint(path);
  run.config = RunConfig::defaults();
  try {
    load_config_json_text(run.config, run.checkpoint.meta.config_json, "config");
    run.config.validate();
  } catch (const Error& e) {
    throw Error("[checkpoint] " + path + ": its config cannot be used: " + e.what());
  }
  run.config.derive_from_data();
  Generator init(run.config.train.seed);
  run.model = build_model(model_options(run.config), &init);
  run.model.to(device);  // then restore: load_state_dict copies each host value onto the model's device
  restore(run.checkpoint, *run.model.module, nullptr, nullptr);
  return run;
}

}  // namespace relgrad
