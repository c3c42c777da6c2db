// train/config/source.h: the data source registry. A source defined here, outside the library, is
// registered by one call and then trained, sampled and evaluated through `relgrad` like a built-in
// (the worked example of docs/design.md, "Data sources"); its own key check names the key; the
// built-ins are listed in their order.
#include <filesystem>
#include <ostream>

#include "cli_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/config_fields.h"
#include "train/config/run_options.h"
#include "train/config/source.h"

using namespace relgrad;
using namespace relgrad::testing;
using relgrad::testing::check_throws_with;

namespace {

// ---- the example source: one file's worth ----

// Counting: each row counts up from a random start by data.count_step (its own key), modulo
// data.num_symbols (ids 0 .. N − 1), in windows of data.context tokens; the next id is always the last
// one plus the step, so a model learns it fast.
class CountingData : public Dataset {
 public:
  CountingData(int64_t symbols, int64_t step, int64_t batch_size, int64_t context, uint64_t seed)
      : symbols_(symbols), step_(step), batch_size_(batch_size), context_(context), seed_(seed) {
    vocab_.size = symbols;
    vocab_.pad = -1;  // every id is data
    for (int64_t id = 0; id < symbols; ++id) vocab_.names.push_back(std::to_string(id));
  }
  Batch batch(int64_t index, Split split) const override {
    std::vector<std::vector<int64_t>> tokens, targets;
    for (int64_t row = 0; row < batch_size_; ++row) {
      const int64_t start = row_stream(seed_, split, index, static_cast<uint32_t>(row)).below(symbols_);
      std::vector<int64_t> x, y;
      for (int64_t t = 0; t < context_; ++t) {
        x.push_back((start + t * step_) % symbols_);
        y.push_back((start + (t + 1) * step_) % symbols_);
      }
      tokens.push_back(x), targets.push_back(y);
    }
    return decoder_only_batch(tokens, targets);
  }
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return batch_size_; }
  void print_samples(SampleModel& model, int64_t, const std::string&, std::ostream& out) const override {
    out << "counting on from 0 1 2: " << vocab_.decode(model.continue_prompt({0, 1, 2}, false)) << "\n";
  }

 private:
  int64_t symbols_, step_, batch_size_, context_;
  uint64_t seed_;
  Vocab vocab_;
};

class CountingSource : public DataSource {
 public:
  std::string name() const override { return "counting"; }
  // Its own key, declared here: RunConfig has no member for it (DataConfig::stored keeps it by name).
  std::vector<config_detail::Field> fields() const override {
    return {config_detail::stored_data_field("count_step", config_detail::Kind::Int,
                                             "counting: how far each token is from the last", "1")};
  }
  void check_keys(const RunConfig& c) const override {
    config_check(c.data.num_symbols >= 2 && c.data.num_symbols <= 64,
                 "data.num_symbols must be in [2, 64] for counting, got " + std::to_string(c.data.num_symbols));
    const int64_t step = data_key_int(c, "count_step");
    config_check(step >= 1 && step < c.data.num_symbols,
                 "data.count_step must be in [1, data.num_symbols - 1], got " + std::to_string(step));
  }
  std::shared_ptr<const Dataset> dataset(const RunConfig& c) const override {
    return std::make_shared<CountingData>(c.data.num_symbols, data_key_int(c, "count_step"), c.data.batch_size,
                                          c.data.context, c.data.seed);
  }
  int64_t vocab_size(const RunConfig& c) const override { return c.data.num_symbols; }
  void sample(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) const override {
    const std::vector<int64_t> prompt = token_ids(a.input.empty() ? "0 1 2" : a.input, data.vocab(), "sample");
    o.eos = -1;
    const std::vector<int64_t> seq = run.model->generate(ids_row(prompt), o).to_vector<int64_t>();
    out << "counted " << data.vocab().decode(seq) << "\n";
  }
};

// Registered for one test case: the other cases see the built-ins only.
struct Registered {
  Registered() { register_data_source(std::make_shared<CountingSource>()); }
  ~Registered() { unregister_data_source("counting"); }
};

const std::vector<std::string> kCountingRun = {
    "--data.source=counting", "--model.type=decoder-only", "--data.num_symbols=8", "--data.context=8",
    "--data.batch_size=8",    "--model.d_model=16",        "--model.n_heads=2",   "--model.d_ff=32",
    "--model.n_decoder_layers=1", "--model.decoder_self.scheme=alibi", "--optim.lr=0.01", "--optim.warmup_steps=5",
    "--train.steps=60", "--train.eval_every=0", "--train.log_every=20", "--train.threads=1"};

std::vector<std::string> train_args(const std::string& out_dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", "--train.out_dir=" + out_dir};
  args.insert(args.end(), kCountingRun.begin(), kCountingRun.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("data sources: the built-ins, in the config's order") {
  CHECK(data_source_names() == std::vector<std::string>{"synthetic", "text", "tokens", "music", "chorales"});
  CHECK(find_data_source("Text") == nullptr);
  CHECK(find_data_source("text")->vocab_kind() == VocabKind::Bytes);
  CHECK(find_data_source("tokens")->vocab_kind() == VocabKind::Ids);
  CHECK(find_data_source("synthetic")->default_sample_count() == 4);
  // A request made in code asks for one sample (a source loops a.num times); only `relgrad sample` without
  // -n asks the source for its default count.
  CHECK(SampleRequest{}.num == 1);
  check_throws_with([] { register_data_source(nullptr); }, "[register_data_source] a data source needs a name");
  check_throws_with([] { unregister_data_source("text"); }, "[unregister_data_source] no data source named 'text'");
}

TEST_CASE("data sources: a source defined outside the library trains, samples and evaluates through relgrad") {
  Registered registered;
  REQUIRE(find_data_source("counting") != nullptr);
  check_throws_with([] { register_data_source(std::make_shared<CountingSource>()); },
                    "[register_data_source] a data source named 'counting' is registered already");
  TempDir dir;
  const std::string run_dir = dir.file("counting");

  // Its check of its own key, through `relgrad train`: a config error (exit 2) naming the key.
  const CliResult bad = run_relgrad(train_args(run_dir, {"--data.num_symbols=1", "--dry-run"}));
  CHECK_CLI(bad, 2);
  CHECK_MESSAGE(contains(bad.err, "[config] data.num_symbols must be in [2, 64] for counting, got 1"), bad.err);
  // The default model check: a language-model source refuses an encoder–decoder, naming data.source.
  const CliResult ed = run_relgrad(train_args(run_dir, {"--model.type=encoder-decoder", "--dry-run"}));
  CHECK_CLI(ed, 2);
  CHECK_MESSAGE(contains(ed.err, "data.source = \"counting\" trains a language model"), ed.err);

  // Training: the loss falls far below chance (ln 8 ≈ 2.08), the samples after training are its own.
  const CliResult trained = run_relgrad(train_args(run_dir));
  CHECK_CLI(trained, 0);
  CHECK_MESSAGE(contains(trained.out, "counting on from 0 1 2: "), trained.out);
  const std::string checkpoint = run_dir + "/checkpoint.safetensors";
  REQUIRE(std::filesystem::exists(checkpoint));
  CHECK(load_checkpoint(checkpoint).meta.extra.at("vocab") ==
        R"({"kind":"names","names":["0","1","2","3","4","5","6","7"],"pad":-1,"size":8})");
  LoadedRun run = load_run(checkpoint);
  RunData data(run.config);
  CHECK(&data.source() == find_data_source("counting"));
  CHECK(!data.task());
  const EvalResult e = evaluate(*run.model, data.dataset(), 2);
  CHECK(e.loss < 1.0);
  CHECK(e.accuracy > 0.6);

  // relgrad sample asks the source; relgrad eval reads --input through it.
  const CliResult sampled = run_relgrad({"sample", checkpoint, "--input", "3 4 5", "--temperature", "0"});
  CHECK_CLI(sampled, 0);
  CHECK_MESSAGE(contains(sampled.out, "counted 3 4 5 "), sampled.out);
  const CliResult not_a_token = run_relgrad({"sample", checkpoint, "--input", "9"});
  CHECK_CLI(not_a_token, 2);
  CHECK_MESSAGE(contains(not_a_token.err, "[sample] '9' is not a token of this model's vocabulary"), not_a_token.err);
  const CliResult midi = run_relgrad({"sample", checkpoint, "--format", "midi"});
  CHECK_CLI(midi, 2);
  CHECK_MESSAGE(contains(midi.err, "--format midi needs a music model"), midi.err);
  const CliResult evaluated = run_relgrad({"eval", checkpoint, "--batches", "2"});
  CHECK_CLI(evaluated, 0);
  CHECK_MESSAGE(contains(evaluated.out, "held-out loss"), evaluated.out);
}

TEST_CASE("data sources: a source's own key is a config key, set, checked, listed, printed and kept in its checkpoints") {
  CHECK_FALSE(is_config_key("data.count_step"));
  {
    Registered registered;
    CHECK(is_config_key("data.count_step"));
    CHECK(contains(config_help(), "data.count_step (integer) = 1  — counting: how far each token is from the last"));
    TempDir dir;
    const std::string run_dir = dir.file("step");
    // The type is checked when it is set, the source's check after: both usage errors (exit 2) naming it.
    CliResult bad = run_relgrad(train_args(run_dir, {"--data.count_step=two", "--dry-run"}));
    CHECK_CLI(bad, 2);
    CHECK_MESSAGE(contains(bad.err, "data.count_step: expected an integer, got 'two'"), bad.err);
    bad = run_relgrad(train_args(run_dir, {"--data.count_step=8", "--dry-run"}));
    CHECK_CLI(bad, 2);
    CHECK_MESSAGE(contains(bad.err, "data.count_step must be in [1, data.num_symbols - 1], got 8"), bad.err);
    // Set, it reaches the data (rows count by 3) and the printed config; the checkpoint keeps it.
    RunConfig c = RunConfig::defaults();
    apply_overrides(c, {"--data.source=counting", "--model.type=decoder-only", "--data.count_step=3",
                        "--data.num_symbols=8", "--data.context=4"});
    CHECK(data_key_int(c, "count_step") == 3);
    CHECK(contains(config_to_toml(c), "count_step = 3"));
    const Batch b = data_source(c).dataset(c)->batch(0, Split::Train);
    const std::vector<int64_t> row = b.tokens.narrow(0, 0, 1).contiguous().to_vector<int64_t>();
    CHECK((row[1] - row[0] + 8) % 8 == 3);
    const CliResult trained = run_relgrad(train_args(run_dir, {"--data.count_step=3", "--train.steps=6"}));
    CHECK_CLI(trained, 0);
    CHECK(data_key_int(load_run(run_dir + "/checkpoint.safetensors").config, "count_step") == 3);
  }
  // Unregistered, the key is gone again.
  CHECK_FALSE(is_config_key("data.count_step"));
}

TEST_CASE("data sources: a name no entry holds is refused by the config, listing the registered ones") {
  const CliResult r = run_relgrad({"train", "--data.source=counting", "--dry-run"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "expected one of synthetic, text, tokens, music, chorales"), r.err);
}
