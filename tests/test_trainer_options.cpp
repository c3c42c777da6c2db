// The Trainer driven from C++ without a RunConfig (train/trainer/options.h): its own options, a Dataset
// of the caller's (train/data/dataset.h), the config JSON written verbatim and the resume check as a
// callback; and the one mapping from a RunConfig (train/config/run_options.h).
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// A caller's Dataset: another's batches, counted, and samples that say what they were asked for.
class CountingData : public Dataset {
 public:
  explicit CountingData(std::shared_ptr<const Dataset> inner) : inner_(std::move(inner)) {}
  Batch batch(int64_t index, Split split) const override {
    ++(split == Split::Train ? train_batches : held_out_batches);
    return inner_->batch(index, split);
  }
  const Vocab& vocab() const override { return inner_->vocab(); }
  int64_t batch_size() const override { return inner_->batch_size(); }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override {
    std::vector<int64_t> answer = model.answer({kFirstSymbol, kFirstSymbol + 1}, 3);
    out << "samples " << count << " in " << out_dir << ": " << answer.size() << " tokens\n";
  }
  mutable int64_t train_batches = 0, held_out_batches = 0;

 private:
  std::shared_ptr<const Dataset> inner_;
};

std::vector<double> losses(Trainer& t, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(t.train_step());
  return out;
}

}  // namespace

TEST_CASE("trainer options: a RunConfig maps onto them once: derived vocab, its JSON, its Dataset") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  TrainerOptions o = trainer_options(c);
  RunConfig derived = c;
  derived.derive_from_data();
  CHECK(o.model.config.vocab_size == derived.model.vocab_size);
  CHECK(o.model.type == ModelKind::EncoderDecoder);
  CHECK(o.config_json == config_to_json(derived));
  CHECK(o.data->batch_size() == c.data.batch_size);
  CHECK(dynamic_cast<const SyntheticData*>(o.data.get()) != nullptr);
  CHECK(!o.data->checksum());
  c.optim.warmup_steps = -1;
  check_throws_with([&] { trainer_options(c); }, "[config] optim.warmup_steps");
}

TEST_CASE("trainer options: a caller's Dataset trains exactly like the config's, and prints its own samples") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  Trainer reference(trainer_options(c));
  std::vector<double> expected = losses(reference, 4);

  TrainerOptions o = trainer_options(c);
  auto data = std::make_shared<CountingData>(o.data);
  o.data = data;
  o.train.samples = 2;
  o.train.steps = 4;
  Trainer t(o);
  CHECK(losses(t, 4) == expected);
  CHECK(data->train_batches == 4);
  CHECK(data->held_out_batches == 0);

  std::ostringstream out;
  Trainer printed(o, &out);
  printed.train();
  CHECK(data->held_out_batches == 2);  // the final evaluation: train.eval_batches
  CHECK(out.str().find("samples 2 in " + dir.file("run") + ": ") != std::string::npos);
}

TEST_CASE("trainer options: the config JSON goes into checkpoints verbatim, and resume asks check_resume") {
  TempDir dir;
  TrainerOptions o = trainer_options(tiny_ed(dir.file("run")));
  o.config_json = "{\"written\": \"by hand\"}";
  std::vector<std::string> asked;
  o.check_resume = [&](const std::string& saved, const std::string& path) { asked.push_back(saved + " @ " + path); };
  Trainer first(o);
  first.train_step();
  first.save(dir.file("checkpoint.safetensors"));
  CHECK(load_checkpoint(dir.file("checkpoint.safetensors")).meta.config_json == o.config_json);

  Trainer second(o);
  second.resume(dir.file("checkpoint.safetensors"));
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == o.config_json + " @ " + dir.file("checkpoint.safetensors"));
  CHECK(second.step() == 1);

  o.check_resume = [](const std::string&, const std::string&) { throw Error("[train] refused by the caller"); };
  Trainer third(o);
  check_throws_with([&] { third.resume(dir.file("checkpoint.safetensors")); }, "refused by the caller");
}

TEST_CASE("trainer options: no data is an error that names the field") {
  TrainerOptions o;
  check_throws_with([&] { Trainer t(o); }, "TrainerOptions::data is not set");
}
