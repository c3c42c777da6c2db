// data.source = "text": any file as bytes (TextDataset, train/data/data.h) for a byte-level language
// model; the vocabulary is the 256 byte values, so no file is needed to know it.
#include <ostream>

#include "train/config/run_options.h"
#include "train/config/config_fields.h"
#include "train/config/source.h"

namespace relgrad {
namespace {

class TextSource : public DataSource {
 public:
  std::string name() const override { return "text"; }
  std::vector<config_detail::Field> fields() const override {
    using namespace config_detail;
    return {member("data.text_path", "text: the corpus file", &RunConfig::data, &DataConfig::text_path)};
  }
  std::shared_ptr<const Dataset> dataset(const RunConfig& c) const override {
    const DataConfig& d = c.data;
    return std::make_shared<TextData>(d.text_path, d.val_fraction, d.seed, d.batch_size, d.context);
  }
  std::pair<std::string, std::string> data_path(const RunConfig& c) const override {
    return {"data.text_path", c.data.text_path};
  }
  int64_t vocab_size(const RunConfig&) const override { return 256; }
  std::optional<Vocab> vocab(const RunConfig&) const override { return TextDataset::vocab(); }
  VocabKind vocab_kind() const override { return VocabKind::Bytes; }

  // Continuations of --prompt (a newline by default), as text with control bytes escaped.
  void sample(const SampleRequest& a, LoadedRun& run, const RunData&, SamplingOptions o,
              std::ostream& out) const override {
    o.eos = -1;
    std::string prompt = a.prompt.empty() ? "\n" : a.prompt;
    if (!a.input.empty()) throw InputError("[sample] this is a text model: give --prompt TEXT, not --input");
    warn_if_longer_than_trained("sample", prompt.size(), run.config);
    for (int64_t n = 0; n < a.num; ++n) {
      SamplingOptions on = o;
      on.seed = o.seed + static_cast<uint64_t>(n);
      std::vector<int64_t> seq = run.model->generate(ids_row(byte_ids(prompt)), on).to_vector<int64_t>();
      std::string s;
      for (int64_t id : seq) s += static_cast<char>(id);
      out << "--- sample " << n << " (seed " << on.seed << ")\n" << printable_text(s) << "\n";
    }
  }
  std::vector<int64_t> input_ids(const std::string& text, const Vocab&, const char*) const override {
    return byte_ids(text);
  }
};

}  // namespace

std::shared_ptr<const DataSource> text_source() { return std::make_shared<TextSource>(); }

DataOf<TextDataset> RunData::text() const { return data_of(*this, "text", &TextData::text); }

}  // namespace relgrad
