// What relgrad eval and sample may change in a checkpoint's config (train/command/checkpoint_overrides.h).
#include "train/command/checkpoint_overrides.h"

#include <algorithm>

#include "layers/schemes.h"
#include "train/command/cli_commands.h"

namespace relgrad::cli_detail {

// ---- eval's data overrides ----

const char* const kEvalDataKeys[] = {"data.min_len", "data.max_len",      "data.lag",
                                     "data.period",  "data.context",      "data.batch_size",
                                     "data.seed",    "data.val_fraction", nullptr};

std::string eval_data_keys_text() {
  std::string text = "the data keys relgrad eval may change: ";
  for (const char* const* k = kEvalDataKeys; *k; ++k)
    text += (k == kEvalDataKeys ? "" : ", ") + std::string(*k);
  return text;
}

// The checkpoint's config with the eval's data overrides; the result validated, its vocabulary unchanged.
void apply_eval_data_overrides(RunConfig& config, const std::vector<std::string>& overrides,
                               std::ostream& out) {
  if (overrides.empty()) return;
  RunConfig changed = config;
  for (const std::string& o : overrides) {
    const std::string key = o.substr(2, o.find('=') - 2);
    bool allowed = false;
    for (const char* const* k = kEvalDataKeys; *k; ++k) allowed = allowed || key == *k;
    if (!allowed)
      throw UsageError("[eval] " + o + ": " + key + " cannot change at evaluation (" + eval_data_keys_text() +
                       ")");
    try {
      set_config_value(changed, key, o.substr(o.find('=') + 1));
    } catch (const Error& e) {
      throw UsageError(std::string("[eval] ") + e.what());
    }
  }
  try {
    changed.validate();
  } catch (const Error& e) {
    throw UsageError("[eval] with the data overrides: " + std::string(e.what()));
  }
  const int64_t vocab = changed.model.vocab_size;
  changed.derive_from_data();
  if (changed.model.vocab_size != vocab)
    throw UsageError("[eval] the data overrides change the vocabulary (" + std::to_string(vocab) + " → " +
                     std::to_string(changed.model.vocab_size) + " ids): the model cannot read that data");
  changed.model.max_positions = config.model.max_positions;  // the model's, not re-derived
  for (const std::string& o : overrides) out << "eval data: " << o.substr(2) << "\n";
  config = changed;
}

// ---- the model overrides of eval and sample ----

const char* const kEvalModelKeys[] = {"rope_scaling", "rope_scaling_factor", "rope_original_length", nullptr};

std::string eval_model_keys_text() {
  std::string text = "the model keys relgrad eval and sample may change: ";
  for (const char* const* k = kEvalModelKeys; *k; ++k)
    text += (k == kEvalModelKeys ? "" : ", ") + std::string("model.<place>.") + *k;
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
      for (const char* const* k = kEvalModelKeys; *k; ++k) allowed = allowed || key == "model." + std::string(place) + "." + *k;
    if (!allowed) {  // the command refuses it with the keys it takes
      rest.push_back(o);
      continue;
    }
    if (eq == std::string::npos) throw UsageError(std::string("[") + command + "] " + o + ": write " + o + "=VALUE");
    model.push_back(o);
  }
  return rest;
}

// The checkpoint's run with the RoPE scaling overrides: each key's place must hold a scheme that takes
// it (rope, xpos, p_rope), and the changed config is checked as a run config would be.
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
  for (const auto& [key, value] : changes) {
    const std::string place = key.substr(6, key.rfind('.') - 6);  // "model.<place>.<knob>"
    const PositionalConfig& p = place == "encoder_self" ? run.config.model.encoder_self
                                : place == "decoder_self" ? run.config.model.decoder_self
                                                          : run.config.model.cross;
    const SchemeEntry* e = find_scheme(p.scheme);
    const std::string knob = key.substr(key.rfind('.') + 1);
    if (!e || std::find(e->options.begin(), e->options.end(), knob) == e->options.end()) {
      std::vector<std::string> readers;  // the registered schemes that read it
      for (const SchemeEntry& r : positional_schemes())
        if (std::find(r.options.begin(), r.options.end(), knob) != r.options.end()) readers.push_back(r.name);
      std::string who;
      for (size_t i = 0; i < readers.size(); ++i)
        who += (i == 0 ? "" : i + 1 == readers.size() ? " and " : ", ") + readers[i];
      throw UsageError(std::string("[") + command + "] " + key + ": the checkpoint's model." + place +
                       ".scheme = " + p.scheme + " takes no " + knob + " (" + who + (readers.size() == 1 ? " does)" : " do)"));
    }
    out << command << " model: " << key << "=" << value << "\n";
  }
  return run;
}

}  // namespace relgrad::cli_detail
