// A RunConfig as trainer options, a Dataset and a reopened run (train/config/run_options.h).
#include "train/config/run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "train/trainer/distributed.h"

namespace relgrad {
namespace {

// The keys that must agree between a checkpoint and the config resuming it.
bool shapes_run(const std::string& key) {
  return key.rfind("model.", 0) == 0 || key.rfind("data.", 0) == 0 || key == "optim.name" ||
         key == "train.dtype" || key == "train.seed" ||
         key == "optim.positional_lr_scale";  // the scale: the optimizer's group layout
}

}  // namespace

void check_resume(const RunConfig& config, const std::string& saved_json, const std::string& path) {
  RunConfig saved = config;
  // A checkpoint written before optim.positional_lr_scale existed trained with one lr for every group.
  saved.optim.positional_lr_scale = 1.0;
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

// The default stretches the decay to the new train.steps; optim.decay_steps = the old end keeps it.
std::string resume_schedule_note(const RunConfig& saved, const RunConfig& now, int64_t step) {
  auto end = [](const RunConfig& c) { return c.optim.decay_steps > 0 ? c.optim.decay_steps : c.train.steps; };
  auto schedule = [&](const RunConfig& c) {
    const OptimConfig& o = c.optim;
    return LrSchedule(o.lr, std::min(o.warmup_steps, end(c)), end(c), o.min_lr, o.decay);
  };
  const OptimConfig& o = now.optim;
  if (o.decay == LrSchedule::Decay::Constant) return "";
  const std::string decay = kDecayNames.name(o.decay);
  const int64_t was = end(saved), is = end(now);
  std::ostringstream note;
  note << std::setprecision(3);
  if (was != is) {
    note << "note: the lr schedule (optim.decay = " << decay << ") ends at step " << was
         << " in the checkpoint and now at step " << is
         << (o.decay_steps > 0 ? " (optim.decay_steps)" : " (train.steps)") << ": at step " << step
         << " the lr is " << schedule(now).lr_at(step) << " instead of " << schedule(saved).lr_at(step)
         << "; --optim.decay_steps=" << was << " keeps the schedule it was trained with (lr = optim.min_lr = "
         << o.min_lr << " from step " << was << " on)\n";
  } else if (now.train.steps > is && step < now.train.steps) {
    note << "note: the lr schedule (optim.decay = " << decay << ") ends at step " << is
         << " (optim.decay_steps), so the lr stays at optim.min_lr = " << o.min_lr << " from step "
         << std::max(step, is) << " to " << now.train.steps
         << (o.min_lr == 0 ? " (at lr 0 no step changes the weights)" : "")
         << "; --optim.decay_steps=0 stretches the schedule to train.steps instead\n";
  }
  return note.str();
}

namespace {

// Decimal with thousands separators, for element counts in messages.
std::string count_text(double n) {
  if (n >= 1e18) {
    std::ostringstream s;
    s.precision(3);
    s << n;
    return s.str();
  }
  std::string digits = std::to_string(static_cast<uint64_t>(n)), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A lower bound of the parameters (elements) the model of a derived config holds, in double (a hostile
// config overflows int64): every attention has four C×C projections, every feed-forward C×d_ff twice,
// one embedding V×C, and each positional scheme what its registry entry counts (SchemeEntry::parameters,
// layers/schemes.h: a table's rows × head size, T5's buckets × heads once per stack). Biases, norms, a second embedding and other schemes' parameters only add to it.
double implied_elements_at_least(const RunConfig& c) {
  const TransformerConfig& m = c.model;
  const double C = static_cast<double>(m.d_model), F = static_cast<double>(m.d_ff);
  const double H = static_cast<double>(std::max<int64_t>(1, m.n_heads));
  const double V = static_cast<double>(m.vocab_size);
  const bool ed = c.model_type == ModelKind::EncoderDecoder;
  const double enc = ed ? static_cast<double>(m.n_encoder_layers) : 0.0;
  const double dec = static_cast<double>(m.n_decoder_layers);
  const double attention = 4 * C * C, ff = 2 * C * F;
  double total = V * C + enc * (attention + ff) + dec * (attention + ff) + (ed ? dec * attention : 0.0);
  auto positional = [&](const PositionalConfig& p, double layers) {  // the scheme's entry counts
    const SchemeEntry* entry = find_scheme(p.scheme);
    if (!entry || !entry->parameters) return 0.0;
    const double each = std::max(0.0, entry->parameters(p, H, C / H));
    return entry->shared_by_stack ? each : each * layers;
  };
  if (ed) total += positional(m.encoder_self, enc) + positional(m.cross, dec);
  return total + positional(m.decoder_self, dec);
}

// How many blocks the tensor names hold under `prefix` ("encoder.layers.", "layers."): the distinct
// indices of "<prefix><i>.<...>".
int64_t layers_in(const std::map<std::string, Tensor>& tensors, const std::string& prefix) {
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    size_t dot = name.find('.', prefix.size());
    if (dot != std::string::npos) seen.insert(name.substr(prefix.size(), dot - prefix.size()));
  }
  return static_cast<int64_t>(seen.size());
}

std::string shape_text(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

}  // namespace

void check_config_fits_checkpoint(const RunConfig& c, const Checkpoint& checkpoint, const std::string& path) {
  const TransformerConfig& m = c.model;
  const std::map<std::string, Tensor>& tensors = checkpoint.model;
  auto refuse = [&](const std::string& what) {
    throw Error("[checkpoint] " + path + ": its config does not describe its tensors: " + what +
                " (refused before building the model)");
  };
  // The block counts, by name: what a hostile n_*_layers would otherwise allocate first.
  const bool ed = c.model_type == ModelKind::EncoderDecoder;
  const std::string dec_prefix = ed ? "decoder.layers." : "layers.";
  const int64_t dec_layers = layers_in(tensors, dec_prefix);
  if (dec_layers != m.n_decoder_layers)
    refuse("model.n_decoder_layers = " + std::to_string(m.n_decoder_layers) + ", but the tensors hold " +
           std::to_string(dec_layers) + " blocks " + dec_prefix + "<i>");
  if (ed && layers_in(tensors, "encoder.layers.") != m.n_encoder_layers)
    refuse("model.n_encoder_layers = " + std::to_string(m.n_encoder_layers) + ", but the tensors hold " +
           std::to_string(layers_in(tensors, "encoder.layers.")) + " blocks encoder.layers.<i>");
  // The widths, from the (decoder's) embedding and first feed-forward, when the tensors have them.
  auto expect_shape = [&](const std::string& name, const Shape& shape, const std::string& from) {
    auto it = tensors.find(name);
    if (it != tensors.end() && it->second.shape() != shape)
      refuse(from + " make " + name + " " + shape_text(shape) + ", but it is " +
             shape_text(it->second.shape()));
  };
  const std::string top = ed ? "decoder." : "";
  expect_shape(top + "embed.weight", {m.vocab_size, m.d_model},
               "the vocabulary of " + std::to_string(m.vocab_size) +
                   " (from the data keys) and model.d_model = " + std::to_string(m.d_model));
  expect_shape(dec_prefix + "0.ff.fc1.weight", {m.d_ff, m.d_model},
               "model.d_ff = " + std::to_string(m.d_ff) + " and model.d_model = " +
                   std::to_string(m.d_model));
  // The rest (positional tables, and any tensor missing above) through a bound on the total size.
  double held = 0;
  for (const auto& [name, tensor] : tensors) held += static_cast<double>(tensor.numel());
  const double implied = implied_elements_at_least(c);
  if (implied > held)
    refuse("its model keys (model.d_model, model.d_ff, the layer counts, the positional tables' "
           "max_length / clip / num_buckets) make at least " + count_text(implied) +
           " parameters, but the tensors hold " + count_text(held));
}

std::shared_ptr<const Dataset> make_dataset(const RunConfig& c) { return data_source(c).dataset(c); }

std::function<Tensor(int64_t)> target_positions(const RunConfig& c) {
  if (!c.model.explicit_cross()) return {};
  return data_source(c).target_positions(c);
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

DefaultWindow default_sample_window(const RunConfig& c) {
  if (c.model_type != ModelKind::DecoderOnly) return {0, "an encoder-decoder's target is not windowed"};
  const std::string& scheme = c.model.decoder_self.scheme;
  const SchemeEntry* entry = find_scheme(scheme);
  const bool absolute = c.model.absolute_position != AbsolutePositionKind::None;
  if (entry && entry->extrapolates && !absolute) return {0, scheme + " extrapolates, layers/schemes.cpp"};
  const InputLimit trained = data_source(c).trained_input(c);
  return {trained.tokens, trained.keys + " = " + std::to_string(trained.tokens) + "; " +
                              (absolute ? std::string("absolute positions") : scheme + " is not known to extrapolate")};
}

void report_skipped_files(const Dataset& data, const std::string& key, std::ostream& out) {
  const std::vector<SkippedFile>& skipped = data.skipped_files();
  if (skipped.empty()) return;
  for (size_t i = 0; i < skipped.size() && i < kListedSkips; ++i)
    out << "warning: " << key << ": skipped '" << skipped[i].path << "': " << skipped[i].error << "\n";
  if (skipped.size() > kListedSkips)
    out << "warning: " << key << ": skipped " << skipped.size() - kListedSkips << " more file(s) ("
        << skipped.size() << " in all)\n";
  out << std::flush;
}

TrainerOptions trainer_options(RunConfig c, std::ostream* warnings) {
  c.validate();
  resolve_device(c.train.device, "train.device");  // no CUDA: the error comes before any data is read
  c.derive_from_data();
  TrainerOptions o;
  o.model = model_options(c);
  o.optim = c.optim;
  o.train = c.train;
  o.sample = sampling_options(c.sample);
  o.sample.window = default_sample_window(c).tokens;  // the samples printed after training, as relgrad sample's
  o.data = make_dataset(c);
  o.target_positions = target_positions(c);
  if (warnings && world().is_root())  // mpirun: listed once
    report_skipped_files(*o.data, data_source(c).data_path(c).first, *warnings);
  o.config_json = config_to_json(c);
  o.vocab_json = vocab_to_json(c.data.source, o.data->vocab());
  o.check_resume = [c](const std::string& saved_json, const std::string& path) { check_resume(c, saved_json, path); };
  return o;
}

// ---- RunData -----------------------------------------------------------------------------------
namespace {

std::string current_directory() {
  char buf[PATH_MAX];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string("the current directory");
}

}  // namespace

const Dataset& RunData::dataset() const {
  if (data_) return *data_;
  try {
    data_ = source_->dataset(config_);
  } catch (const Error& e) {
    // A run's data paths are as it was given them: relative ones are read from the current directory,
    // which is often not where the run was trained. Say so, beside the reader's own message, and name
    // the option that gives the file instead.
    const auto [key, path] = source_->data_path(config_);
    if (typeid(e) != typeid(Error) || path.empty() || ::access(path.c_str(), F_OK) == 0 || errno != ENOENT)
      throw;
    const std::string give = "--" + key + "=FILE, which relgrad eval and probe take";
    if (path[0] == '/') throw Error(std::string(e.what()) + " (" + key + " = '" + path + "'; give the file: " + give + ")");
    throw Error(std::string(e.what()) + " (" + key + " = '" + path + "' is relative to the current directory, " +
                current_directory() + ": run this where the run was trained, or give the file: " + give + ")");
  }
  if (warnings_) report_skipped_files(*data_, source_->data_path(config_).first, *warnings_);
  return *data_;
}

const Vocab& RunData::vocab() const {
  if (vocab_) return *vocab_;
  // From the config when the source knows it so; else (a synthetic task, a token file's header) the data's.
  std::optional<Vocab> known = source_->vocab(config_);
  vocab_ = std::make_shared<Vocab>(known ? std::move(*known) : dataset().vocab());
  return *vocab_;
}

// ---- the stored vocabulary -----------------------------------------------------------------------
namespace {

// The kind of vocabulary data.source has (its entry's vocab_kind): "bytes", "ids" or "names".
std::string vocab_kind(const std::string& source) {
  const DataSource* s = find_data_source(source);
  if (!s) throw Error("extra.vocab is for data.source = \"" + source + "\", which is not a registered data source");
  return kVocabKindNames.name(s->vocab_kind());
}

// Larger vocabularies are refused on load (the names alone would take gigabytes).
constexpr int64_t kMaxStoredVocab = TokenDataset::kMaxTokenVocab;

}  // namespace

std::string vocab_to_json(const std::string& source, const Vocab& vocab) {
  const std::string kind = vocab_kind(source);
  nlohmann::json j = nlohmann::json::object();
  j["kind"] = kind;
  j["size"] = vocab.size;
  if (kind == "names") {
    j["pad"] = vocab.pad;
    j["names"] = vocab.names;
  }
  return j.dump();  // keys in byte order; non-ASCII names as UTF-8 (the header must be valid UTF-8)
}

Vocab vocab_from_json(const std::string& text, const std::string& source) {
  auto refuse = [](const std::string& what) { throw Error("extra.vocab " + what); };
  nlohmann::json j;
  std::set<std::string> keys;  // duplicate keys are refused, as in configs: which value was meant?
  try {
    using Event = nlohmann::json::parse_event_t;
    j = nlohmann::json::parse(text, [&](int depth, Event event, nlohmann::json& parsed) {
      if (event == Event::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second)
        throw Error("extra.vocab has the key '" + parsed.get<std::string>() + "' twice");
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    refuse(std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object()) refuse("must be a JSON object");
  const std::string kind = vocab_kind(source);
  const std::set<std::string> allowed = kind == "names"
                                            ? std::set<std::string>{"kind", "size", "pad", "names"}
                                            : std::set<std::string>{"kind", "size"};
  for (const auto& item : j.items())
    if (!allowed.count(item.key())) refuse("has the unknown key '" + item.key() + "'");
  if (!j.contains("kind") || !j["kind"].is_string()) refuse("needs \"kind\" as a string");
  if (j["kind"] != kind)
    refuse("is a vocabulary of " + j["kind"].get<std::string>() + ", but data.source = \"" + source +
           "\" has " + kind);
  if (!j.contains("size") || !j["size"].is_number_integer()) refuse("needs \"size\" as an integer");
  const int64_t size = j["size"].get<int64_t>();
  if (size < 1 || size > kMaxStoredVocab)
    refuse("size " + std::to_string(size) + " is out of range (1 .. " + std::to_string(kMaxStoredVocab) +
           ")");
  if (kind == "bytes") {
    if (size != 256) refuse("of bytes must have size 256, got " + std::to_string(size));
    return TextDataset::vocab();
  }
  if (kind == "ids") return TokenDataset::ids_vocab(size);
  if (!j.contains("pad") || !j["pad"].is_number_integer()) refuse("needs \"pad\" as an integer");
  const int64_t pad = j["pad"].get<int64_t>();
  if (pad < -1 || pad >= size) refuse("pad " + std::to_string(pad) + " is not -1 or an id below the size");
  if (!j.contains("names") || !j["names"].is_array() || static_cast<int64_t>(j["names"].size()) != size)
    refuse("needs \"names\" as an array of its " + std::to_string(size) + " names");
  Vocab v;
  v.size = size;
  v.pad = pad;
  for (const auto& name : j["names"]) {
    if (!name.is_string()) refuse("names must be strings");
    v.names.push_back(name.get<std::string>());
  }
  return v;
}

// ---- load_run ----------------------------------------------------------------------------------
LoadedRun load_run(const std::string& path, Device device,
                   const std::vector<std::pair<std::string, std::string>>& changes) {
  LoadedRun run;
  run.checkpoint = load_checkpoint(path);
  run.config = RunConfig::defaults();
  try {
    load_config_json_text(run.config, run.checkpoint.meta.config_json, "config");
    run.config.validate();
  } catch (const Error& e) {
    throw Error("[checkpoint] " + path + ": its config cannot be used: " + e.what());
  }
  if (!changes.empty()) {
    try {
      for (const auto& [key, value] : changes) set_config_value(run.config, key, value);
      run.config.validate();
    } catch (const Error& e) {
      throw InputError("[checkpoint] " + path + ": its config with the changes given cannot be used: " + e.what());
    }
  }
  const auto stored = run.checkpoint.meta.extra.find("vocab");
  if (stored == run.checkpoint.meta.extra.end()) {
    run.config.derive_from_data();  // an older checkpoint: the sizes from the data, as the run did
  } else {
    const std::string& source = run.config.data.source;
    try {
      run.vocab = vocab_from_json(stored->second, source);
    } catch (const Error& e) {
      throw Error("[checkpoint] " + path + ": " + e.what());
    }
    // An ids vocabulary is nothing but its size, which the checkpoint says: a token file's header is not needed.
    if (data_source(run.config).vocab_kind() == VocabKind::Ids) {
      run.config.model.vocab_size = run.vocab.size;
      run.config.model.src_vocab_size = 0;
    } else {
      run.config.derive_from_data();  // no file read for these sources
    }
  }
  check_config_fits_checkpoint(run.config, run.checkpoint, path);  // before the model allocates anything
  if (run.vocab.size > 0 && run.vocab.size != run.config.model.vocab_size)  // the config fits the tensors
    throw Error("[checkpoint] " + path + ": extra.vocab holds " + std::to_string(run.vocab.size) +
                " ids, but its config and embedding make a vocabulary of " +
                std::to_string(run.config.model.vocab_size));
  Generator init(run.config.train.seed);
  run.model = build_model(model_options(run.config), &init);
  run.model->to(device);  // then restore: load_state_dict copies each host value onto the model's device
  restore(run.checkpoint, *run.model->module, nullptr, nullptr);
  return run;
}

}  // namespace relgrad
