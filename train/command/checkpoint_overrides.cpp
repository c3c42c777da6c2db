// What relgrad eval and sample may change in a checkpoint's config (train/command/checkpoint_overrides.h).
#include "train/command/checkpoint_overrides.h"

#include <algorithm>

#include "train/command/cli_commands.h"

namespace relgrad::cli_detail {

// ---- eval's data overrides ----

// The data files too: a model trained on one text is evaluated on another where it was not trained
// (the vocabulary check below keeps a token file's vocabulary the model's).
const std::vector<std::string> kEvalDataKeys = {"data.min_len",   "data.max_len",    "data.lag",       "data.period",
                                                "data.context",   "data.batch_size", "data.seed",      "data.val_fraction",
                                                "data.text_path", "data.token_path", "data.music_dir", "data.chorales_path"};

std::string eval_data_keys_text() {
  std::string text = "the data keys relgrad eval and probe may change: ";
  for (size_t i = 0; i < kEvalDataKeys.size(); ++i) text += (i ? ", " : "") + kEvalDataKeys[i];
  return text;
}

// The checkpoint's config with the eval's data overrides; the result validated, its vocabulary unchanged.
void apply_eval_data_overrides(RunConfig& config, const std::vector<std::string>& overrides, std::ostream& out,
                               const std::string& command) {
  if (overrides.empty()) return;
  RunConfig changed = config;
  for (const std::string& o : overrides) {
    const std::string key = o.substr(2, o.find('=') - 2);
    if (std::find(kEvalDataKeys.begin(), kEvalDataKeys.end(), key) == kEvalDataKeys.end())
      throw UsageError("[" + command + "] " + o + ": " + key + " cannot change at evaluation (" + eval_data_keys_text() +
                       ")");
    try {
      set_config_value(changed, key, o.substr(o.find('=') + 1));
    } catch (const Error& e) {
      throw UsageError(std::string("[" + command + "] ") + e.what());
    }
  }
  try {
    changed.validate();
  } catch (const Error& e) {
    throw UsageError("[" + command + "] with the data overrides: " + std::string(e.what()));
  }
  const int64_t vocab = changed.model.vocab_size;
  changed.derive_from_data();
  if (changed.model.vocab_size != vocab)
    throw UsageError("[" + command + "] the data overrides change the vocabulary (" + std::to_string(vocab) + " → " +
                     std::to_string(changed.model.vocab_size) + " ids): the model cannot read that data");
  changed.model.max_positions = config.model.max_positions;  // the model's, not re-derived
  for (const std::string& o : overrides) out << command << " data: " << o.substr(2) << "\n";
  config = changed;
}

// ---- the model overrides of eval and sample ----

const std::vector<std::string> kEvalModelKeys = {"rope_scaling", "rope_scaling_factor", "rope_original_length"};

std::string eval_model_keys_text() {
  std::string text = "the model keys relgrad eval and sample may change: ";
  for (size_t i = 0; i < kEvalModelKeys.size(); ++i) text += (i ? ", " : "") + ("model.<place>." + kEvalModelKeys[i]);
  return text;
}

std::vector<std::string> take_model_overrides(const std::vector<std::string>& extras, const char* command,
                                              std::vector<std::string>& model) {
  std::vector<std::string> rest;
  for (const std::string& o : extras) {
    if (o.rfind("--model.", 0) != 0) {
      rest.push_back(o);
      continue;
    }
    const size_t eq = o.find('=');
    const std::string key = o.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    bool allowed = false;
    for (const char* place : {"encoder_self", "decoder_self", "cross"})
      for (const std::string& k : kEvalModelKeys) allowed = allowed || key == "model." + std::string(place) + "." + k;
    if (!allowed) {  // the command refuses it with the keys it takes
      rest.push_back(o);
      continue;
    }
    if (eq == std::string::npos) throw UsageError(std::string("[") + command + "] " + o + ": write " + o + "=VALUE");
    model.push_back(o);
  }
  return rest;
}

// The checkpoint's run with the RoPE scaling overrides. load_run checks the changed config as a run
// config (RunConfig::validate, train/config/config_validate.cpp): a scaling at a place whose scheme
// does not take it (only rope, xpos and p_rope do) is refused there, as in relgrad train.
LoadedRun load_run_with(const std::string& checkpoint, Device device, const std::vector<std::string>& overrides,
                        const char* command, std::ostream& out) {
  std::vector<std::pair<std::string, std::string>> changes;
  for (const std::string& o : overrides) changes.push_back({o.substr(2, o.find('=') - 2), o.substr(o.find('=') + 1)});
  LoadedRun run;
  try {
    run = load_run(checkpoint, device, changes);
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
  for (const auto& [key, value] : changes) out << command << " model: " << key << "=" << value << "\n";
  return run;
}

}  // namespace relgrad::cli_detail
