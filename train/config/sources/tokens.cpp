// data.source = "tokens": the ids of a token data file (train/data/token_file.h, made by `relgrad
// tokenize`) for a language model; the vocabulary is the header's size, ids named by their numbers.
#include <ostream>

#include "train/config/run_options.h"
#include "train/config/config_fields.h"
#include "train/config/source.h"
#include "train/data/token_file.h"

namespace relgrad {
namespace {

class TokensSource : public DataSource {
 public:
  std::string name() const override { return "tokens"; }
  std::vector<config_detail::Field> fields() const override {
    using namespace config_detail;
    return {member("data.token_path", "tokens: the token data file (relgrad tokenize)", &RunConfig::data, &DataConfig::token_path)};
  }
  void check_keys(const RunConfig& c) const override {
    config_check(!c.data.token_path.empty(), "data.source = \"tokens\" needs data.token_path");
  }
  std::shared_ptr<const Dataset> dataset(const RunConfig& c) const override {
    const DataConfig& d = c.data;
    return std::make_shared<TokenData>(d.token_path, d.val_fraction, d.seed, d.batch_size, d.context);
  }
  std::pair<std::string, std::string> data_path(const RunConfig& c) const override {
    return {"data.token_path", c.data.token_path};
  }
  // The header only: the ids are read with the data.
  int64_t vocab_size(const RunConfig& c) const override { return token_file_vocab_size(c.data.token_path); }
  // Known without the file once the size is (a derived config, or a checkpoint's).
  std::optional<Vocab> vocab(const RunConfig& c) const override {
    if (c.model.vocab_size > 0) return TokenDataset::ids_vocab(c.model.vocab_size);
    return std::nullopt;
  }
  VocabKind vocab_kind() const override { return VocabKind::Ids; }

  // Ids in, ids out; the prompt defaults to the first ids of the validation split.
  void sample(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) const override {
    o.eos = -1;
    if (!a.prompt.empty()) throw InputError("[sample] this is a token-file model: give --input \"ids\", not --prompt");
    const Vocab& vocab = data.vocab();
    std::vector<int64_t> prompt;
    if (!a.input.empty()) prompt = token_ids(a.input, vocab, "sample");
    else prompt = data.tokens()->sample_prompt();  // the file is read only here: --input needs the vocabulary alone
    warn_if_longer_than_trained("sample", prompt.size(), run.config);
    for (int64_t n = 0; n < a.num; ++n) {
      SamplingOptions on = o;
      on.seed = o.seed + static_cast<uint64_t>(n);
      out << "--- sample " << n << " (seed " << on.seed << ")\n"
          << vocab.decode(run.model->generate(ids_row(prompt), on).to_vector<int64_t>()) << "\n";
    }
  }
};

}  // namespace

std::shared_ptr<const DataSource> tokens_source() { return std::make_shared<TokensSource>(); }

DataOf<TokenDataset> RunData::tokens() const { return data_of(*this, "tokens", &TokenData::tokens); }

}  // namespace relgrad
