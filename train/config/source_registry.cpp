// The data source registry and what its entries share (train/config/source.h).
#include "train/config/source.h"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "train/config/config_fields.h"
#include "train/trainer/distributed.h"

namespace relgrad {

// The built-ins, each in its file of train/config/sources/ (each called once, by the list below).
std::shared_ptr<const DataSource> synthetic_source();
std::shared_ptr<const DataSource> text_source();
std::shared_ptr<const DataSource> tokens_source();
std::shared_ptr<const DataSource> music_source();
std::shared_ptr<const DataSource> chorales_source();

namespace {

// One line per source, in the order the config's help lists them.
std::vector<std::shared_ptr<const DataSource>>& registry() {
  static std::vector<std::shared_ptr<const DataSource>> r = {
      synthetic_source(), text_source(), tokens_source(), music_source(), chorales_source(),
  };
  return r;
}

// How many entries the list above holds (taken before register_data_source adds any).
size_t builtin_count() {
  static const size_t n = registry().size();
  return n;
}

}  // namespace

std::vector<config_detail::Field> DataSource::fields() const { return {}; }

std::string data_key_text(const RunConfig& c, const std::string& name) {
  return config_detail::find_field("data." + name, "data source: ").get(c);
}

int64_t data_key_int(const RunConfig& c, const std::string& name) {
  return std::stoll(data_key_text(c, name));  // set_from_text checked the text when it was set
}

double data_key_double(const RunConfig& c, const std::string& name) { return std::stod(data_key_text(c, name)); }

bool data_key_bool(const RunConfig& c, const std::string& name) { return data_key_text(c, name) == "true"; }

std::vector<const DataSource*> data_sources() {
  std::vector<const DataSource*> out;
  for (const auto& s : registry()) out.push_back(s.get());
  return out;
}

std::vector<std::string> data_source_names() {
  std::vector<std::string> out;
  for (const auto& s : registry()) out.push_back(s->name());
  return out;
}

const DataSource* find_data_source(const std::string& name) {
  for (const auto& s : registry())
    if (s->name() == name) return s.get();
  return nullptr;
}

const DataSource& data_source(const RunConfig& c) {
  const DataSource* s = find_data_source(c.data.source);
  if (!s) throw Error("[config] data.source = \"" + c.data.source + "\" is not a registered data source");
  return *s;
}

void register_data_source(std::shared_ptr<const DataSource> source) {
  RG_CHECK(source && !source->name().empty(), "register_data_source", "a data source needs a name");
  RG_CHECK(!find_data_source(source->name()), "register_data_source", "a data source named '", source->name(),
           "' is registered already");
  builtin_count();
  registry().push_back(std::move(source));
}

void unregister_data_source(const std::string& name) {
  auto& r = registry();
  for (size_t i = builtin_count(); i < r.size(); ++i)
    if (r[i]->name() == name) {
      r.erase(r.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  RG_CHECK(false, "unregister_data_source", "no data source named '", name,
           "' was registered by register_data_source");
}

// ---- the defaults of DataSource ------------------------------------------------------------------

void DataSource::check_model(const RunConfig& c) const {
  config_check(c.model_type == ModelKind::DecoderOnly,
               settings_text(c) + " trains a language model: set model.type = \"decoder-only\"");
}

std::string DataSource::settings_text(const RunConfig&) const { return "data.source = \"" + name() + "\""; }

ShortestRow DataSource::shortest_row(const RunConfig& c) const {
  const double t = static_cast<double>(c.data.context);
  return {t, t, t};
}

std::vector<int64_t> DataSource::input_ids(const std::string& text, const Vocab& vocab, const char* command) const {
  return token_ids(text, vocab, command);
}

// ---- helpers for the entries ----------------------------------------------------------------------

void config_check(bool ok, const std::string& what) {
  if (!ok) throw Error("[config] " + what);
}

std::vector<int64_t> token_ids(const std::string& text, const Vocab& vocab, const char* command) {
  std::vector<int64_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    int64_t id = -1;
    for (int64_t k = 0; k < vocab.size; ++k)
      if (vocab.names[k] == word) id = k;
    if (id < 0) {
      std::string known;
      for (int64_t k = 0; k < std::min<int64_t>(vocab.size, 20); ++k) known += (k ? " " : "") + vocab.names[k];
      throw InputError(std::string("[") + command + "] '" + word + "' is not a token of this model's vocabulary (" +
                       known + (vocab.size > 20 ? " ..." : "") + ")");
    }
    ids.push_back(id);
  }
  if (ids.empty()) throw InputError(std::string("[") + command + "] no tokens given");
  return ids;
}

std::vector<int64_t> byte_ids(const std::string& text) {
  std::vector<int64_t> ids;
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

Tensor ids_row(const std::vector<int64_t>& ids) {
  return from_vector<int64_t>(ids, {1, static_cast<int64_t>(ids.size())});
}

// An input longer than the model saw in training is run (relative schemes may extrapolate), but said.
void warn_if_longer_than_trained(const char* command, size_t tokens, const RunConfig& c) {
  const InputLimit limit = data_source(c).trained_input(c);
  if (static_cast<int64_t>(tokens) <= limit.tokens || !world().is_root()) return;
  std::cerr << "relgrad " << command << ": warning: [" << command << "] the input has " << tokens
            << " tokens, more than the " << limit.tokens << " the model was trained on (" << limit.keys
            << " = " << limit.tokens << "): it never saw the positions beyond, so its output there is untested\n";
}

std::string numbered_output(const SampleRequest& a, int64_t n, const std::string& fallback) {
  const std::string base = a.output.empty() ? fallback : a.output;
  if (a.num <= 1) return base;
  const size_t dot = base.find_last_of('.');
  return (dot == std::string::npos ? base : base.substr(0, dot)) + "_" + std::to_string(n) +
         (dot == std::string::npos ? ".mid" : base.substr(dot));
}

}  // namespace relgrad
