// data.source = "synthetic": the sequence tasks of train/data/data.h (copy, reverse, ..., the
// verification experiments' periodic_lm, sync, stretch), generated from the data keys, no file read.
#include <algorithm>
#include <ostream>

#include "train/config/run_options.h"
#include "train/config/config_fields.h"
#include "train/config/source.h"

namespace relgrad {
namespace {

TaskConfig task_config(const RunConfig& c) {
  TaskConfig t;
  t.kind = c.data.task;
  t.layout = c.model_type == ModelKind::EncoderDecoder ? Layout::EncoderDecoder : Layout::DecoderOnly;
  t.num_symbols = c.data.num_symbols;
  t.min_len = c.data.min_len;
  t.max_len = c.data.max_len;
  t.batch_size = c.data.batch_size;
  t.lag = c.data.lag;
  t.period = c.data.period;
  t.seed = c.data.seed;
  return t;
}

class SyntheticSource : public DataSource {
 public:
  std::string name() const override { return "synthetic"; }
  std::vector<config_detail::Field> fields() const override {
    using namespace config_detail;
    using R = RunConfig;
    using D = DataConfig;
    return {choice2("data.task", "synthetic task", kTaskKindNames, &R::data, &D::task),
            member("data.num_symbols", "synthetic alphabet size", &R::data, &D::num_symbols),
            member("data.min_len", "shortest synthetic source", &R::data, &D::min_len),
            member("data.max_len", "longest synthetic source", &R::data, &D::max_len),
            member("data.lag", "shift task: lag k; sync task: lag c", &R::data, &D::lag),
            member("data.period", "periodic, periodic_lm tasks: period P", &R::data, &D::period)};
  }

  void check_model(const RunConfig&) const override {}  // either model type: a task has both layouts

  void check_keys(const RunConfig& c) const override {
    // A synthetic source is a toy sequence; sample and eval build one of up to max_len tokens and attend
    // over it (O(max_len^2)), so an edited checkpoint's max_len = 1e8 must not get that far.
    config_check(c.data.max_len <= kMaxSyntheticLength, "data.max_len must be at most " +
                                                            std::to_string(kMaxSyntheticLength) + ", got " +
                                                            std::to_string(c.data.max_len));
    try {
      SyntheticTask check_task(task_config(c));
    } catch (const Error& e) {
      throw Error(std::string("[config] data: ") + e.what());
    }
  }

  // TaskConfig's max_sequence_length, without building the task.
  int64_t longest_sequence(const RunConfig& c) const override {
    return SyntheticTask::synthetic_max_sequence_length(task_config(c));
  }
  std::string longest_sequence_keys(const RunConfig&) const override { return "data.max_len"; }

  // Sources of data.min_len tokens; the encoder–decoder's target of 1, the language model's x BOS y EOS
  // (periodic_lm's sequences all have data.max_len tokens).
  ShortestRow shortest_row(const RunConfig& c) const override {
    const double t = c.data.task == TaskKind::PeriodicLm ? double(c.data.max_len) : 2.0 * double(c.data.min_len) + 1;
    return {double(c.data.min_len), 1.0, t};
  }

  // A source of data.max_len symbols (sync: + lag + 1, stretch: + 1, their EOS included).
  InputLimit trained_input(const RunConfig& c) const override {
    if (c.data.task == TaskKind::Sync) return {c.data.max_len + c.data.lag + 1, "data.max_len + data.lag + 1"};
    if (c.data.task == TaskKind::Stretch) return {c.data.max_len + 1, "data.max_len + 1"};
    return {c.data.max_len, "data.max_len"};
  }

  std::shared_ptr<const Dataset> dataset(const RunConfig& c) const override {
    return std::make_shared<SyntheticData>(task_config(c));
  }
  int64_t vocab_size(const RunConfig& c) const override {
    return kFirstSymbol + c.data.num_symbols + (c.data.task == TaskKind::Shift ? 1 : 0);
  }

  int64_t default_sample_count() const override { return 4; }

  // Held-out sources (or --input) and the model's greedy answers beside the expected ones.
  void sample(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) const override {
    if (!a.prompt.empty())
      throw InputError("[sample] this is a synthetic-task model: give --input \"tokens\", not --prompt");
    const Vocab& vocab = data.vocab();
    std::vector<SyntheticTask::Sample> cases;  // source, and the expected answer or nothing
    // periodic_lm is a language model over BOS s[0] s[1] …: the prompt is BOS and the input (held out:
    // one period of a pattern), and the continuation should repeat it.
    const bool periodic_lm = run.config.data.task == TaskKind::PeriodicLm;
    if (!a.input.empty()) {
      cases.push_back({token_ids(a.input, vocab, "sample"), {}});
      warn_if_longer_than_trained("sample", cases.back().source.size(), run.config);
    } else {
      for (int64_t n = 0; n < a.num; ++n) cases.push_back(data.task()->held_out_case(n));
    }
    RunModel& m = *run.model;
    for (const auto& [source, expected] : cases) {
      std::vector<int64_t> output;
      if (periodic_lm) {  // a decoder-only task (train/data/data.h)
        std::vector<int64_t> prompt{kBos};
        prompt.insert(prompt.end(), source.begin(), source.end());
        std::vector<int64_t> seq = m.generate(ids_row(prompt), o).to_vector<int64_t>();
        output.assign(seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()), seq.end());
        if (!expected.empty() && output.size() > expected.size()) output.resize(expected.size());
      } else {
        output = m.answer(source, o);
      }
      out << "input  " << vocab.decode(source) << "\n";
      if (!expected.empty()) out << "target " << vocab.decode(expected) << "\n";
      out << "model  " << vocab.decode(output) << "\n";
    }
  }
};

}  // namespace

std::shared_ptr<const DataSource> synthetic_source() { return std::make_shared<SyntheticSource>(); }

DataOf<SyntheticTask> RunData::task() const { return data_of(*this, "synthetic", &SyntheticData::task); }

}  // namespace relgrad
