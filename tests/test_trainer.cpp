// The training loop (train/trainer/trainer.h) on tiny models: determinism, bit-identical resume (also of the
// log), gradient accumulation as one large batch, evaluate() against a hand computation, the log
// formats, keeping an earlier run's files, early stopping, divergence, refused resumes and load_run.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/plot/plot.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// A small text file: enough bytes for a train and a validation split of 16-byte windows.
std::string write_text(const TempDir& dir) {
  std::string text;
  for (int k = 0; k < 40; ++k)
    text += "In the beginning " + std::to_string(k * 7 % 13) + " the quick brown fox jumps over the lazy dog.\n";
  std::string path = dir.file("corpus.txt");
  write_bytes(path, text);
  return path;
}

// A tiny byte-level decoder-only LM (RoPE) on a text file, with dropout.
RunConfig tiny_lm(const std::string& text_path, const std::string& out_dir) {
  RunConfig c = tiny_ed(out_dir);
  c.model_type = ModelKind::DecoderOnly;
  c.model.decoder_self = PositionalConfig{"rope"};
  c.data.source = "text";
  c.data.text_path = text_path;
  c.data.context = 16;
  c.data.val_fraction = 0.2;
  return c;
}

// The records of a log with the fields that do not depend on timing (tokens counts from step 0
// across resumes, so it is kept).
std::vector<std::string> stable_records(const std::string& path) {
  std::vector<std::string> out;
  for (const LogRecord& r : read_training_log(path)) {
    std::ostringstream s;
    s.precision(17);
    s << r.event;
    for (const auto& [k, v] : r.values)
      if (k != "elapsed_s" && k != "tokens_per_s") s << " " << k << "=" << v;
    out.push_back(s.str());
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace

// ---- determinism and resume --------------------------------------------------------------------------

TEST_CASE("trainer: the same config gives bit-identical losses and weights") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.grad_accum = 2;
  Trainer a(trainer_options(c));
  std::vector<double> la = steps_of(a, 6);
  NamedTensors wa = snapshot(a.model().module->state_dict());
  Trainer b(trainer_options(c));
  std::vector<double> lb = steps_of(b, 6);
  CHECK(la == lb);
  check_identical(b.model().module->state_dict(), wa);
  check_identical(b.optimizer().state_tensors(), a.optimizer().state_tensors());
  CHECK(a.step() == 6);
  CHECK(a.data_position() == 12);
  for (double l : la) CHECK(std::isfinite(l));

  // Dropout draws from the default generator: another stream gives other losses, so the equality
  // above is not vacuous.
  Trainer d(trainer_options(c));
  default_generator().set_state(12345, 0);
  CHECK(d.train_step() != la[0]);
}

TEST_CASE("trainer: resume is bit-identical (encoder-decoder, dropout, grad_accum = 2)") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.grad_accum = 2;
  check_resume(c, dir.file("half.safetensors"));
}

TEST_CASE("trainer: resume is bit-identical (decoder-only on a text file)") {
  TempDir dir;
  RunConfig c = tiny_lm(write_text(dir), dir.file("run"));
  check_resume(c, dir.file("half.safetensors"));
}

TEST_CASE("trainer: a resumed train() continues the log: records up to the checkpoint once, torn line dropped") {
  for (const std::string format : {"jsonl", "csv"}) {
    CAPTURE(format);
    TempDir dir;
    RunConfig c = tiny_ed(dir.file("run"));
    c.optim.decay = LrSchedule::Decay::Constant;  // the schedule then does not depend on train.steps, which changes below
    c.train.log_format = log_format(format);
    c.train.eval_every = 5;
    c.train.save_every = 5;
    c.train.steps = 5;
    const std::string ck = dir.file("run/checkpoint.safetensors");
    const std::string log = dir.file("run/log." + format);
    Trainer(trainer_options(c)).train();
    const std::string at5 = read_bytes(ck);
    // The run went on to step 8 (records 6..8 written), then was killed mid-record...
    RunConfig to8 = c;
    to8.train.steps = 8;
    {
      Trainer t(trainer_options(to8));
      t.resume(ck);
      t.train();
    }
    write_bytes(ck, at5);  // ... before it saved again: the checkpoint is still at step 5.
    const std::string torn = format == "jsonl" ? "{\"event\":\"train\",\"step\":3,\"loss\":1.2" : "train,3,1.2,,";
    write_bytes(log, read_bytes(log) + torn);
    RunConfig to12 = c;
    to12.train.steps = 12;
    Trainer resumed(trainer_options(to12));
    resumed.resume(ck);
    TrainResult r = resumed.train();
    CHECK(r.steps == 12);
    const std::string text = read_bytes(log);
    CHECK(text.find(torn) == std::string::npos);

    // Each train step 1..12 once, eval at 5 and 10 once (and 12, the end), in order.
    std::vector<LogRecord> records = read_training_log(log);
    std::vector<int64_t> train_steps, eval_steps;
    for (const LogRecord& rec : records) (rec.event == "train" ? train_steps : eval_steps).push_back((int64_t)rec.values.at("step"));
    std::vector<int64_t> expected_train;
    for (int64_t s = 1; s <= 12; ++s) expected_train.push_back(s);
    CHECK(train_steps == expected_train);
    CHECK(eval_steps == std::vector<int64_t>{5, 10, 12});
    if (format == "csv") CHECK(lines_of(text).front().rfind("event,step,", 0) == 0);
    if (format == "csv") CHECK(text.find("event,step", 1) == std::string::npos);  // one header

    // The same run straight through: the same records (timing fields aside) and the same weights.
    RunConfig straight_config = to12;
    straight_config.train.out_dir = dir.file("straight");
    Trainer straight(trainer_options(straight_config));
    straight.train();
    CHECK(stable_records(log) == stable_records(dir.file("straight/log." + format)));
    check_identical(resumed.model().module->state_dict(), straight.model().module->state_dict());
  }
}

// ---- one step ------------------------------------------------------------------------------------------

TEST_CASE("trainer: with grad_accum = 2 a step's gradient is that of the summed token loss over both batches") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.dtype = kFloat64;
  c.train.grad_accum = 2;
  c.model.dropout = 0.0;
  c.optim.name = OptimizerKind::SGD;  // p ← p − 1·g: one step's update is minus the gradient
  c.optim.lr = 1.0;
  c.optim.momentum = 0.0;
  c.optim.weight_decay = 0.0;
  c.optim.clip = 0.0;
  c.optim.warmup_steps = 0;
  c.optim.decay = LrSchedule::Decay::Constant;
  Trainer t(trainer_options(c));
  RunModel& m = t.model();
  const auto params = m.module->named_parameters();
  REQUIRE(params.front().second.dtype() == kFloat64);

  // The reference: one backward of (Σ token losses of batches 0 and 1) / (their loss tokens), the
  // tokens counted here from the targets.
  Batch b0 = t.data().batch(t.data_position(), Split::Train), b1 = t.data().batch(t.data_position() + 1, Split::Train);
  auto count = [](const Batch& b) {
    int64_t n = 0;
    for (int64_t v : RunModel::targets(b).contiguous().to_vector<int64_t>()) n += v != kIgnoreIndex;
    return n;
  };
  const int64_t n0 = count(b0), n1 = count(b1);
  REQUIRE(n0 != n1);  // so a mean of the two batch means would be a different gradient
  auto summed = [&](const Batch& b) {
    Tensor logits = m.logits(b);
    const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
    return cross_entropy(logits.reshape({B * T, V}), RunModel::targets(b).reshape({B * T}),
                         CrossEntropyOptions().set_reduction(Reduction::Sum));
  };
  m.module->train();
  m.module->zero_grad();
  Tensor total = (summed(b0) + summed(b1)) / static_cast<double>(n0 + n1);
  const double expected_loss = total.item();
  total.backward();
  std::map<std::string, Tensor> grad;
  for (const auto& [name, p] : params) grad[name] = p.grad().clone();
  // The mean of the two batch means, for the control below.
  m.module->zero_grad();
  ((summed(b0) / double(n0) + summed(b1) / double(n1)) * 0.5).backward();
  std::map<std::string, Tensor> mean_of_means;
  for (const auto& [name, p] : params) mean_of_means[name] = p.grad().clone();
  m.module->zero_grad();

  NamedTensors before = snapshot(params);
  const double loss = t.train_step();
  CHECK(loss == doctest::Approx(expected_loss).epsilon(1e-13));
  double norm_sq = 0, control_diff = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const std::string& name = params[k].first;
    CAPTURE(name);
    Tensor update = before[k].second - params[k].second.detach();  // = lr · g = g
    CHECK_CLOSE(update, grad[name], 1e-12, 1e-9);
    Tensor g = grad[name].reshape({-1});
    norm_sq += sum(g * g).item();
    std::vector<double> a = grad[name].contiguous().to_vector<double>(), b = mean_of_means[name].contiguous().to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) control_diff = std::max(control_diff, std::fabs(a[i] - b[i]));
  }
  CHECK(t.last_grad_norm() == doctest::Approx(std::sqrt(norm_sq)).epsilon(1e-10));
  CHECK(control_diff > 1e-6);  // the two weightings really differ
}

// ---- evaluate ------------------------------------------------------------------------------------------

TEST_CASE("trainer: evaluate() is the token-mean cross-entropy and argmax accuracy of the held-out batches") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.eval_batches = 3;
  Trainer t(trainer_options(c));
  steps_of(t, 3);

  SUBCASE("against a hand computation on the trained model") {
    double loss = 0;
    int64_t tokens = 0, correct = 0, rows = 0, rows_right = 0, even = 0, even_right = 0;
    {
      NoGradGuard no_grad;
      t.model().module->eval();
      for (int64_t n = 0; n < 3; ++n) {
        Batch b = t.data().batch(n, Split::HeldOut);
        Tensor logits = t.model().logits(b);
        const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
        std::vector<double> z = logits.to(kFloat64).contiguous().to_vector<double>();
        std::vector<int64_t> y = RunModel::targets(b).contiguous().to_vector<int64_t>();
        for (int64_t r = 0; r < B; ++r) {
          bool all = true;
          for (int64_t s = 0; s < T; ++s) {
            const int64_t k = r * T + s;
            if (y[k] == kIgnoreIndex) continue;
            const double* row = &z[k * V];
            double top = row[0];
            int64_t best = 0;
            for (int64_t v = 1; v < V; ++v)
              if (row[v] > top) top = row[v], best = v;
            double se = 0;
            for (int64_t v = 0; v < V; ++v) se += std::exp(row[v] - top);
            loss += top + std::log(se) - row[y[k]];
            ++tokens;
            correct += best == y[k];
            all = all && best == y[k];
            if (s % 2 == 0) ++even, even_right += best == y[k];
          }
          ++rows;
          rows_right += all;
        }
      }
      t.model().module->train();
    }
    EvalResult e = t.evaluate();
    CHECK(e.tokens == tokens);
    CHECK(e.sequences == rows);
    CHECK(e.loss == doctest::Approx(loss / tokens).epsilon(1e-5));
    CHECK(e.accuracy == doctest::Approx(double(correct) / tokens).epsilon(1e-12));
    CHECK(e.sequence_accuracy == doctest::Approx(double(rows_right) / rows).epsilon(1e-12));
    CHECK(t.model().module->is_training());  // the mode is restored
    // each_token sees every loss token once, at its place in the row, with its target and verdict.
    int64_t seen = 0, seen_right = 0, seen_even = 0, seen_even_right = 0;
    const EvalResult again = evaluate(t.model(), t.data(), 3, nullptr, {}, [&](int64_t s, int64_t target, bool right) {
      CHECK(target != kIgnoreIndex);
      ++seen, seen_right += right;
      if (s % 2 == 0) ++seen_even, seen_even_right += right;
    });
    CHECK(again.accuracy == e.accuracy);
    CHECK(seen == tokens);
    CHECK(seen_right == correct);
    CHECK(seen_even == even);
    CHECK(seen_even_right == even_right);
  }

  SUBCASE("a model whose logits are one fixed vector everywhere") {
    // Every weight zero except the decoder's final-norm bias e_0 and column 0 of an untied head:
    // every position's logits are then that column, z. Loss = mean(logsumexp(z) − z[y]),
    // accuracy = the share of targets equal to argmax z.
    RunConfig u = c;
    u.model.tie_weights = false;
    Trainer ut(trainer_options(u));
    const int64_t V = ut.options().model.config.vocab_size;
    std::vector<double> z(V);
    for (int64_t v = 0; v < V; ++v) z[v] = 0.25 * double((v * 5) % 7);  // symbol "1" (id 4) is the largest: 1.5
    const int64_t best = 4;
    REQUIRE(V == 9);
    {
      NoGradGuard no_grad;
      bool have_bias = false, have_head = false;
      for (auto& [name, p] : ut.model().module->named_parameters()) {
        p.zero_();
        if (name == "decoder.final_norm.bias") {
          std::vector<double> e(16, 0.0);
          e[0] = 1.0;
          p.copy_(from_vector<double>(e, {16}).to(p.dtype()));
          have_bias = true;
        }
        if (name == "lm_head.weight") {
          std::vector<double> w(V * 16, 0.0);
          for (int64_t v = 0; v < V; ++v) w[v * 16] = z[v];
          p.copy_(from_vector<double>(w, {V, 16}).to(p.dtype()));
          have_head = true;
        }
      }
      REQUIRE(have_bias);
      REQUIRE(have_head);
    }
    double lse = 0;
    for (double v : z) lse += std::exp(v);
    lse = std::log(lse);
    double loss = 0;
    int64_t tokens = 0, hits = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t y : RunModel::targets(ut.data().batch(n, Split::HeldOut)).contiguous().to_vector<int64_t>()) {
        if (y == kIgnoreIndex) continue;
        loss += lse - z[y];
        ++tokens;
        hits += y == best;
      }
    REQUIRE(hits > 0);
    EvalResult e = ut.evaluate();
    CHECK(e.tokens == tokens);
    CHECK(e.loss == doctest::Approx(loss / tokens).epsilon(1e-6));
    CHECK(e.accuracy == doctest::Approx(double(hits) / tokens).epsilon(1e-12));
    CHECK(e.sequence_accuracy == 0.0);  // every row ends with <eos>, never the argmax
  }
}

// ---- logs and output files ----------------------------------------------------------------------------

TEST_CASE("trainer: log records (jsonl and csv) carry the documented fields") {
  for (const std::string format : {"jsonl", "csv"}) {
    CAPTURE(format);
    TempDir dir;
    RunConfig c = tiny_ed(dir.file("out/nested"));  // the directory is created
    c.train.steps = 6;
    c.train.log_every = 2;
    c.train.eval_every = 3;
    c.train.log_format = log_format(format);
    Trainer t(trainer_options(c));
    TrainResult r = t.train();
    CHECK(r.steps == 6);
    CHECK(t.log_path() == dir.file("out/nested/log." + format));
    CHECK(fs::exists(t.checkpoint_path()));
    std::vector<LogRecord> records = read_training_log(t.log_path());
    const std::set<std::string> train_fields = {"step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s"};
    const std::set<std::string> eval_fields = {"step", "loss", "accuracy", "sequence_accuracy", "elapsed_s"};
    std::vector<std::pair<std::string, int64_t>> seen;
    for (const LogRecord& rec : records) {
      std::set<std::string> keys;
      for (const auto& [k, v] : rec.values) keys.insert(k);
      CHECK(keys == (rec.event == "train" ? train_fields : eval_fields));
      seen.push_back({rec.event, (int64_t)rec.values.at("step")});
    }
    std::vector<std::pair<std::string, int64_t>> expected = {{"train", 2}, {"eval", 3}, {"train", 4}, {"train", 6}, {"eval", 6}};
    CHECK(seen == expected);
    // The values are the run's: the last eval is what evaluate() gives now; lr follows the schedule.
    EvalResult e = t.evaluate();
    CHECK(records.back().values.at("loss") == doctest::Approx(e.loss).epsilon(1e-7));
    CHECK(records.back().values.at("accuracy") == doctest::Approx(e.accuracy).epsilon(1e-7));
    CHECK(r.eval.loss == e.loss);
    LrSchedule sched(c.optim.lr, c.optim.warmup_steps, c.train.steps, c.optim.min_lr);
    CHECK(records[0].values.at("lr") == doctest::Approx(sched.lr_at(1)).epsilon(1e-7));  // step 2's update used lr_at(1)
    CHECK(records[0].values.at("tokens") > 0);
    CHECK(records[2].values.at("tokens") > records[0].values.at("tokens"));
    if (format == "csv") {
      std::vector<std::string> lines = lines_of(read_bytes(t.log_path()));
      CHECK(lines[0] == "event,step,loss,accuracy,sequence_accuracy,lr,grad_norm,tokens,tokens_per_s,elapsed_s");
      for (const std::string& l : lines) CHECK(std::count(l.begin(), l.end(), ',') == 9);
    } else {
      for (const std::string& l : lines_of(read_bytes(t.log_path()))) {
        CHECK(l.front() == '{');
        CHECK(l.back() == '}');
      }
    }
  }
}

TEST_CASE("trainer: a fresh run keeps an earlier run's checkpoint and log as *.prev") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.steps = 3;
  Trainer(trainer_options(c)).train();
  const std::string ck = dir.file("run/checkpoint.safetensors"), log = dir.file("run/log.jsonl");
  const std::string old_ck = read_bytes(ck), old_log = read_bytes(log);
  REQUIRE(!old_ck.empty());
  REQUIRE(!old_log.empty());
  c.train.steps = 2;
  std::ostringstream out;
  Trainer(trainer_options(c), &out).train();
  CHECK(read_bytes(dir.file("run/checkpoint.prev.safetensors")) == old_ck);
  CHECK(read_bytes(dir.file("run/log.prev.jsonl")) == old_log);
  CHECK(read_bytes(ck) != old_ck);
  CHECK(load_checkpoint(ck).meta.step == 2);
  CHECK(read_training_log(log).back().values.at("step") == 2);
  CHECK(out.str().find("checkpoint.prev.safetensors") != std::string::npos);
}

TEST_CASE("trainer: train.target_accuracy stops at the first evaluation that reaches it") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.steps = 10;
  c.train.eval_every = 2;
  c.train.target_accuracy = 1e-9;  // any correct token: the first evaluation (step 2) reaches it
  Trainer t(trainer_options(c));
  TrainResult r = t.train();
  REQUIRE(r.eval.accuracy > 0);
  CHECK(r.reached_target);
  CHECK(r.steps == 2);
  CHECK(t.step() == 2);
  CHECK(load_checkpoint(t.checkpoint_path()).meta.step == 2);  // saved at the stop (save_every = 0)
  int64_t last = 0;
  for (const LogRecord& rec : read_training_log(t.log_path())) last = std::max<int64_t>(last, rec.values.at("step"));
  CHECK(last == 2);

  // A target that is not reached: the run goes on to train.steps.
  RunConfig d = c;
  d.train.target_accuracy = 1.0;
  d.train.out_dir = dir.file("other");
  TrainResult full = Trainer(trainer_options(d)).train();
  CHECK_FALSE(full.reached_target);
  CHECK(full.steps == 10);
}

// ---- failures -------------------------------------------------------------------------------------------

TEST_CASE("trainer: a diverging run throws naming the step and leaves the last checkpoint as it was") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.model.dropout = 0.0;
  c.optim.name = OptimizerKind::SGD;
  c.optim.decay = LrSchedule::Decay::Constant;
  c.train.steps = 4;
  Trainer(trainer_options(c)).train();
  const std::string ck = dir.file("run/checkpoint.safetensors");
  const std::string saved = read_bytes(ck);

  SUBCASE("a NaN in a weight") {
    RunConfig more = c;
    more.train.steps = 8;
    Trainer t(trainer_options(more));
    t.resume(ck);
    {
      NoGradGuard no_grad;
      t.model().module->named_parameters().front().second.fill_(NAN);
    }
    check_throws_with([&] { t.train(); }, "[train] step 4: the loss is ");
    check_throws_with([&] { t.train(); }, "nan");
  }
  SUBCASE("an absurd learning rate without clipping") {
    RunConfig wild = c;
    wild.train.steps = 40;
    wild.optim.lr = 1e6;
    wild.optim.clip = 0.0;
    Trainer t(trainer_options(wild));
    t.resume(ck);
    std::string message;
    try {
      t.train();
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK_MESSAGE(message.find("[train] step ") != std::string::npos, message);
    CHECK_MESSAGE(message.find("diverged") != std::string::npos, message);
    // The step it names is one this run was doing.
    if (size_t at = message.find("step "); at != std::string::npos) {
      long step = std::atol(message.c_str() + at + 5);
      CHECK(step >= 4);
      CHECK(step < 40);
    }
  }
  CHECK(read_bytes(ck) == saved);
}

TEST_CASE("trainer: resume refuses a checkpoint of another model, data or optimizer, and a corrupt one") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.steps = 2;
  Trainer(trainer_options(c)).train();
  const std::string ck = dir.file("run/checkpoint.safetensors");

  auto refused = [&](const std::vector<std::string>& overrides, const std::string& expected) {
    CAPTURE(overrides.front());
    RunConfig other = c;
    apply_overrides(other, overrides);
    Trainer t(trainer_options(other));
    NamedTensors before = snapshot(t.model().module->state_dict());
    check_throws_with([&] { t.resume(ck); }, expected);
    CHECK(t.step() == 0);
    check_identical(t.model().module->state_dict(), before);  // nothing applied
  };
  refused({"--model.d_model=32"}, "model.d_model is 16 there and 32 here");
  refused({"--model.cross.scheme=shaw"}, "model.cross.scheme");
  refused({"--data.seed=3"}, "data.seed is 0 there and 3 here");
  refused({"--data.task=copy"}, "data.task");
  refused({"--optim.name=adam"}, "optim.name");
  refused({"--train.dtype=float64"}, "train.dtype");
  refused({"--train.steps=1", "--optim.warmup_steps=1"}, "beyond train.steps = 1");
  Trainer same(trainer_options(c));
  CHECK_NOTHROW(same.resume(ck));  // the unchanged config resumes
  CHECK(same.step() == 2);
}

TEST_CASE("trainer: resume accepts changed loop keys, refuses corrupt and missing checkpoints") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.steps = 2;
  Trainer(trainer_options(c)).train();
  const std::string ck = dir.file("run/checkpoint.safetensors");
  {
    RunConfig loop = c;
    loop.train.steps = 5;
    loop.train.log_every = 3;
    loop.optim.lr = 5e-4;
    loop.train.out_dir = dir.file("elsewhere");
    Trainer t(trainer_options(loop));
    CHECK_NOTHROW(t.resume(ck));
    CHECK(t.step() == 2);
  }
  const std::string good = read_bytes(ck);
  std::string flipped = good;
  flipped[safetensors_data_start(good) + 7] ^= 0x10;
  const std::string bad = dir.file("flipped.safetensors"), cut = dir.file("cut.safetensors");
  write_bytes(bad, flipped);
  write_bytes(cut, good.substr(0, good.size() - 5));
  Trainer t(trainer_options(c));
  check_throws_with([&] { t.resume(bad); }, bad);
  check_throws_with([&] { t.resume(bad); }, "checksum");
  check_throws_with([&] { t.resume(cut); }, cut);
  check_throws_with([&] { t.resume(dir.file("none.safetensors")); }, dir.file("none.safetensors"));
  CHECK(t.step() == 0);

  // A text run resumed on a file whose bytes changed.
  RunConfig lm = tiny_lm(write_text(dir), dir.file("lm"));
  lm.train.steps = 2;
  Trainer(trainer_options(lm)).train();
  write_bytes(lm.data.text_path, read_bytes(lm.data.text_path) + "one more line\n");
  check_throws_with([&] { Trainer(trainer_options(lm)).resume(dir.file("lm/checkpoint.safetensors")); }, "it was trained on a different");
}

// ---- load_run ----------------------------------------------------------------------------------------

TEST_CASE("trainer: load_run rebuilds the trained model with identical logits") {
  TempDir dir;
  for (bool lm : {false, true}) {
    CAPTURE(lm);
    RunConfig c = lm ? tiny_lm(write_text(dir), dir.file("lm")) : tiny_ed(dir.file("ed"));
    c.train.steps = 3;
    Trainer t(trainer_options(c));
    t.train();
    LoadedRun run = load_run(t.checkpoint_path());
    CHECK(run.checkpoint.meta.step == 3);
    CHECK(config_to_json(run.config) == t.options().config_json);
    CHECK(run.config.model.vocab_size == t.options().model.config.vocab_size);
    CHECK((run.model->kind() == ModelKind::DecoderOnly) == lm);
    NoGradGuard no_grad;
    t.model().module->eval();
    run.model->module->eval();
    for (int64_t n = 0; n < 2; ++n) {
      Batch b = t.data().batch(n, Split::HeldOut);
      CHECK(bitwise_equal(run.model->logits(b), t.model().logits(b)));
    }
    check_identical(run.model->module->state_dict(), t.model().module->state_dict());
  }
  check_throws_with([&] { load_run(dir.file("missing.safetensors")); }, dir.file("missing.safetensors"));
}
