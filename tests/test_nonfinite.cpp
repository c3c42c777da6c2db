// NaN / Inf handling (docs/reliability.md): faults injected into a real tiny training
// run (tests/trainer_testing.h) — a NaN weight (→ NaN loss), an Inf or NaN in one parameter's
// gradient with a finite loss, a NaN in the AdamW state (the optimizer's input) — under
// train.nonfinite = "stop" (error naming step, lr and tensor; checkpoint byte-identical; exit code 3)
// and "skip" (weights and optimizer state bit for bit, training goes on, a cap stops it); and
// anomaly mode (autograd/grad_mode.h) naming the op for log(−1), sqrt′(0) and 1/0.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/command/cli.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The message of the NonFiniteError `fn` throws ("" and a failed check if it throws nothing or
// another type).
template <class Fn>
std::string nonfinite_message(Fn&& fn) {
  try {
    fn();
  } catch (const NonFiniteError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("expected NonFiniteError, got: ", e.what());
    return "";
  }
  FAIL_CHECK("expected NonFiniteError, nothing was thrown");
  return "";
}

#define CHECK_HAS(text, part) CHECK_MESSAGE(contains(text, part), "'", text, "' lacks '", part, "'")

NamedTensors copies(const NamedTensors& named) {
  NamedTensors out;
  for (const auto& [k, v] : named) out.emplace_back(k, v.clone());
  return out;
}

// Same names, same bytes.
void check_bitwise(const NamedTensors& a, const NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(bitwise_equal(a[i].second, b[i].second));
  }
}

// A deterministic tiny run (no dropout, so a skipped step changes nothing random either) that
// has already saved a checkpoint at step 3.
struct Run {
  TempDir dir;
  RunConfig config;
  std::string checkpoint;
  std::string saved;  // the checkpoint's bytes
  explicit Run(const std::string& policy = "stop") {
    config = tiny_ed(dir.file("run"));
    config.model.dropout = 0.0;
    config.train.steps = 3;
    config.train.nonfinite = *kNonfinitePolicyNames.find(policy);
    Trainer(trainer_options(config)).train();
    checkpoint = dir.file("run/checkpoint.safetensors");
    saved = read_bytes(checkpoint);
    config.train.steps = 8;
  }
  // A trainer resumed from the checkpoint at step 3.
  std::unique_ptr<Trainer> resumed(std::ostream* out = nullptr) const {
    auto t = std::make_unique<Trainer>(trainer_options(config), out);
    t->resume(checkpoint);
    return t;
  }
};

// The i-th named parameter (a 2-D weight, so the message shows a real shape).
std::pair<std::string, Tensor> weight(Trainer& t, const std::string& part) {
  for (const auto& [name, p] : t.model().module->named_parameters())
    if (contains(name, part) && p.dim() == 2) return {name, p};
  FAIL("no 2-D parameter named like ", part);
  return {};
}

// Sets element 0 of `p`'s .grad to `value` (the gradient stays finite elsewhere).
void poison_grad(const Tensor& p, double value) {
  NoGradGuard no_grad;
  Tensor g = p.grad();
  REQUIRE(g.defined());
  g.view({-1}).narrow(0, 0, 1).fill_(value);
}

}  // namespace

// ---- stop (the default) ----------------------------------------------------------------------------

// count_nonfinite reads a contiguous CPU tensor where it lies (all_finite runs it on every weight
// each step) and copies any other layout first: the same counts for a whole tensor, a narrowed view
// that starts inside its storage, a transposed view, float64, and none for integers.
TEST_CASE("nonfinite: count_nonfinite counts in place and in copies alike, at any offset") {
  Tensor x = zeros({6, 5}, kFloat32);
  x.narrow(0, 3, 1).fill_(NAN);            // row 3: 5 NaN
  x.narrow(1, 4, 1).narrow(0, 0, 2).fill_(INFINITY);  // rows 0-1, column 4: 2 Inf
  const NonFiniteCount whole = count_nonfinite(x);
  CHECK(whole.nan == 5);
  CHECK(whole.inf == 2);
  const NonFiniteCount rows = count_nonfinite(x.narrow(0, 2, 3));  // rows 2-4: contiguous, offset 10
  CHECK(rows.nan == 5);
  CHECK(rows.inf == 0);
  const NonFiniteCount first = count_nonfinite(x.narrow(0, 0, 2));
  CHECK(first.nan == 0);
  CHECK(first.inf == 2);
  const NonFiniteCount t = count_nonfinite(x.transpose(0, 1));
  CHECK(t.nan == 5);
  CHECK(t.inf == 2);
  const NonFiniteCount d = count_nonfinite(x.to(kFloat64).narrow(0, 1, 3));  // rows 1-3
  CHECK(d.nan == 5);
  CHECK(d.inf == 1);
  CHECK(count_nonfinite(ones({4}, kInt64)).total() == 0);
  CHECK(count_nonfinite(x.narrow(0, 4, 2)).total() == 0);
}

TEST_CASE("nonfinite: a NaN weight stops at that step, naming the step, the lr and the weight — checkpoint intact") {
  Run run;
  auto t = run.resumed();
  auto name_w_pair = weight(*t, "q_proj");
  auto& name = name_w_pair.first;
  auto& w = name_w_pair.second;
  {
    NoGradGuard no_grad;
    w.view({-1}).narrow(0, 1, 2).fill_(NAN);  // 2 NaN
  }
  const NamedTensors before = copies(t->model().module->named_parameters());
  const NamedTensors state_before = copies(t->optimizer().state_tensors());
  const double lr = LrSchedule(run.config.optim.lr, run.config.optim.warmup_steps, run.config.train.steps,
                               run.config.optim.min_lr, LrSchedule::Decay::Cosine).lr_at(3);
  std::ostringstream lr_text;
  lr_text << lr;
  std::string m = nonfinite_message([&] { t->train(); });
  CHECK_HAS(m, "[train] step 3: the loss is nan at lr " + lr_text.str());
  CHECK_HAS(m, "first non-finite tensor: parameter " + name + " of shape " + shape_str(w.shape()) + ": 2 of " +
                   std::to_string(w.numel()) + " values are non-finite (2 NaN, 0 Inf)");
  CHECK_HAS(m, ". The run diverged: try a lower optim.lr, or optim.clip > 0. The last checkpoint, " + run.checkpoint +
                   ", is left as it was");
  CHECK(m.find('\n') == std::string::npos);  // one line
  CHECK(t->step() == 3);
  check_bitwise(t->model().module->named_parameters(), before);  // no update
  check_bitwise(t->optimizer().state_tensors(), state_before);
  CHECK(read_bytes(run.checkpoint) == run.saved);
}

TEST_CASE("nonfinite: an Inf or NaN in one parameter's gradient (finite loss) stops naming that gradient") {
  for (const double value : {double(INFINITY), -double(INFINITY), double(NAN)}) {
    CAPTURE(value);
    Run run;
    auto t = run.resumed();
    auto name_w_pair = weight(*t, "fc2");  // a feed-forward weight; any parameter would do
    auto& name = name_w_pair.first;
    auto& w = name_w_pair.second;
    t->set_after_backward([&, w = w](Trainer& tr) {
      if (tr.step() == 5) poison_grad(w, value);
    });
    const NamedTensors at3 = copies(t->model().module->named_parameters());
    t->train_step();
    t->train_step();  // steps 3 and 4 are fine
    CHECK_FALSE(bitwise_equal(t->model().module->named_parameters().front().second, at3.front().second));
    const NamedTensors before = copies(t->model().module->named_parameters());
    const NamedTensors state_before = copies(t->optimizer().state_tensors());
    const int64_t position = t->data_position();
    std::string m = nonfinite_message([&] { t->train_step(); });
    CHECK_HAS(m, std::string("[train] step 5: the gradient norm is ") + (std::isnan(value) ? "nan" : "inf") + " at lr ");
    CHECK_HAS(m, "first non-finite tensor: " + name + " grad of shape " + shape_str(w.shape()) + ": 1 of " +
                     std::to_string(w.numel()) + " values are non-finite (" + (std::isnan(value) ? "1 NaN, 0 Inf" : "0 NaN, 1 Inf") + ")");
    CHECK(t->step() == 5);
    CHECK(t->data_position() == position);
    check_bitwise(t->model().module->named_parameters(), before);
    check_bitwise(t->optimizer().state_tensors(), state_before);
    CHECK(read_bytes(run.checkpoint) == run.saved);
  }
}

TEST_CASE("nonfinite: a NaN in the AdamW state (the optimizer's input) stops at the update that spreads it") {
  for (const std::string policy : {"stop", "skip"}) {  // an update cannot be undone: skip mode stops too
    CAPTURE(policy);
    Run run(policy);
    auto t = run.resumed();
    // group0.param0 of decay_groups: find its name through the tensor itself.
    const Tensor target = t->optimizer().param_groups()[0].params[0];
    std::string name;
    for (const auto& [n, p] : t->model().module->named_parameters())
      if (p.same(target)) name = n;
    REQUIRE(!name.empty());
    for (auto& [key, s] : t->optimizer().state_tensors())
      if (key == "group0.param0.exp_avg") {
        NoGradGuard no_grad;
        s.view({-1}).narrow(0, 0, 1).fill_(NAN);
      }
    std::string m = nonfinite_message([&] { t->train_step(); });
    CHECK_HAS(m, "[train] step 3: the optimizer update made a parameter non-finite at lr ");
    CHECK_HAS(m, "(the loss and gradients were finite");
    CHECK_HAS(m, "first non-finite tensor: parameter " + name + " of shape " + shape_str(target.shape()) + ": 1 of ");
    CHECK(read_bytes(run.checkpoint) == run.saved);
  }
}

TEST_CASE("nonfinite: a loss that overflows with finite weights says so") {
  Run run;
  auto t = run.resumed();
  // Huge but finite weights (~1e34): attention scores overflow float32, the loss goes non-finite,
  // no parameter is.
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : t->model().module->named_parameters())
      if (p.dim() == 2) p.mul_(1e36);
  }
  std::string m = nonfinite_message([&] { t->train_step(); });
  CHECK_HAS(m, "[train] step 3: the loss is ");
  CHECK_HAS(m, "first non-finite tensor: the loss (every parameter is finite");
  CHECK_HAS(m, "train.detect_anomaly = true names it");
}

// ---- skip ----------------------------------------------------------------------------------------------

TEST_CASE("nonfinite: skip mode leaves weights and AdamW state bitwise unchanged, advances lr and data, goes on") {
  Run run("skip");
  std::ostringstream out;
  auto t = run.resumed(&out);
  auto name_w_pair = weight(*t, "q_proj");
  auto& name = name_w_pair.first;
  auto& w = name_w_pair.second;
  NamedTensors params_at_skip, state_at_skip;
  int64_t checks = 0;
  t->set_after_backward([&, w = w](Trainer& tr) {
    if (tr.step() == 4) {
      params_at_skip = copies(tr.model().module->named_parameters());  // = the weights before step 4
      state_at_skip = copies(tr.optimizer().state_tensors());
      poison_grad(w, INFINITY);
    }
    if (tr.step() == 5) {  // the step after the skipped one starts from exactly the same state
      check_bitwise(tr.model().module->named_parameters(), params_at_skip);
      check_bitwise(tr.optimizer().state_tensors(), state_at_skip);
      ++checks;
    }
  });
  const int64_t optimizer_steps_before = t->optimizer().step_count();
  TrainResult r = t->train();
  CHECK(checks == 1);
  CHECK(r.steps == 8);  // the skipped step counts: the schedule and the data moved on
  CHECK(r.skipped_steps == 1);
  CHECK(t->skipped_steps() == 1);
  CHECK(t->data_position() == 8);
  CHECK(t->optimizer().step_count() == optimizer_steps_before + 4);  // 5 steps run, 1 skipped
  CHECK(std::isfinite(r.last_loss));
  // The step-count slot AdamW's bias correction uses: 3 before + 4 updates, not 8.
  for (const auto& [key, s] : t->optimizer().state_tensors())
    if (key == "group0.param0.step") CHECK(s.item() == 7);
  // Skipped steps are announced and logged with the tensor.
  CHECK_HAS(out.str(), "warning: [train] step 4: the gradient norm is inf at lr ");
  CHECK_HAS(out.str(), "first non-finite tensor: " + name + " grad of shape " + shape_str(w.shape()) +
                           ": 1 of " + std::to_string(w.numel()) + " values are non-finite (0 NaN, 1 Inf); the step is "
                           "skipped, weights and optimizer state are unchanged (1 in a row, train.max_skipped_steps = 10)");
  const std::string log = read_bytes(run.dir.file("run/log.jsonl"));
  CHECK_HAS(log, "{\"event\":\"skip\",\"step\":5,\"loss\":");
  CHECK_HAS(log, "\"grad_norm\":\"inf\",\"tensor\":\"" + name + " grad\"}");
  CHECK_FALSE(contains(log, "{\"event\":\"train\",\"step\":5,"));  // the skip record replaces it
  CHECK(contains(log, "{\"event\":\"train\",\"step\":6,"));
}

TEST_CASE("nonfinite: skip mode stops after train.max_skipped_steps skips in a row") {
  Run run("skip");
  run.config.train.max_skipped_steps = 2;
  std::ostringstream out;
  auto t = run.resumed(&out);
  auto name_w_pair = weight(*t, "q_proj");
  auto& name = name_w_pair.first;
  auto& w = name_w_pair.second;
  {
    NoGradGuard no_grad;
    w.view({-1}).narrow(0, 0, 1).fill_(NAN);  // every step from now on has a NaN loss
  }
  const NamedTensors before = copies(t->model().module->named_parameters());
  std::string m = nonfinite_message([&] { t->train(); });
  CHECK_HAS(m, "[train] step 5: the loss is nan at lr ");
  CHECK_HAS(m, "that is 3 non-finite steps in a row, more than train.max_skipped_steps = 2");
  CHECK_HAS(m, "first non-finite tensor: parameter " + name);
  CHECK(t->skipped_steps() == 2);
  CHECK(t->step() == 5);
  check_bitwise(t->model().module->named_parameters(), before);
  CHECK_HAS(out.str(), "(1 in a row, train.max_skipped_steps = 2)");
  CHECK_HAS(out.str(), "(2 in a row, train.max_skipped_steps = 2)");
  CHECK(read_bytes(run.checkpoint) == run.saved);
}

TEST_CASE("nonfinite: skip mode counts skips in a row: a good step resets the count") {
  Run run("skip");
  run.config.train.max_skipped_steps = 1;
  auto t = run.resumed();
  auto [name, w] = weight(*t, "q_proj");
  t->set_after_backward([w = w](Trainer& tr) {
    if (tr.step() == 3 || tr.step() == 5 || tr.step() == 7) poison_grad(w, NAN);  // never two in a row
  });
  TrainResult r = t->train();
  CHECK(r.steps == 8);
  CHECK(r.skipped_steps == 3);
}

// ---- the command: exit code 3 ----------------------------------------------------------------------------

TEST_CASE("nonfinite: relgrad train exits 3 with one line naming step, lr and tensor — the checkpoint stays") {
  TempDir dir;
  const std::string run = dir.file("run");
  std::vector<std::string> args = {"train", "--train.out_dir=" + run, "--model.d_model=16", "--model.n_heads=2",
                                   "--model.d_ff=32", "--model.n_encoder_layers=1", "--model.n_decoder_layers=1",
                                   "--model.cross.max_length=8", "--data.num_symbols=6", "--data.min_len=3",
                                   "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=0",
                                   "--train.eval_batches=1", "--train.samples=0", "--train.target_accuracy=0",
                                   "--optim.name=sgd", "--optim.decay=constant", "--train.save_every=2"};
  auto cli = [](std::vector<std::string> a, std::string* err) {
    std::vector<const char*> argv{"relgrad"};
    for (const std::string& s : a) argv.push_back(s.c_str());
    std::ostringstream o, e;
    int code = run_cli(static_cast<int>(argv.size()), argv.data(), o, e);
    *err = e.str();
    return code;
  };
  std::string err;
  std::vector<std::string> good = args;
  good.push_back("--train.steps=2");
  REQUIRE(cli(good, &err) == 0);
  const std::string ck = run + "/checkpoint.safetensors";
  const std::string saved = read_bytes(ck);
  // An absurd learning rate without clipping diverges within a few steps.
  std::vector<std::string> wild = {"train", "--resume", ck, "--train.steps=40", "--optim.lr=1e6", "--optim.clip=0",
                                   "--train.save_every=0"};
  const int code = cli(wild, &err);
  CHECK_MESSAGE(code == 3, err);
  CHECK_HAS(err, "relgrad train: error: [train] step ");
  CHECK_HAS(err, " at lr 1e+06");
  CHECK_HAS(err, "first non-finite tensor: ");
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(read_bytes(ck) == saved);
}

// ---- anomaly mode ------------------------------------------------------------------------------------------

TEST_CASE("anomaly: off by default — the guard turns it on for a scope and restores it") {
  CHECK_FALSE(AnomalyMode::is_enabled());
  Tensor x = from_vector<double>({1.0, -1.0}, {2}).requires_grad_();
  Tensor y = log(x);  // NaN, silently, as in PyTorch
  CHECK(std::isnan(y.to_vector<double>()[1]));
  {
    DetectAnomalyGuard on;
    CHECK(AnomalyMode::is_enabled());
    {
      DetectAnomalyGuard off(false);
      CHECK_FALSE(AnomalyMode::is_enabled());
    }
    CHECK(AnomalyMode::is_enabled());
  }
  CHECK_FALSE(AnomalyMode::is_enabled());
}

TEST_CASE("anomaly: forward names the op, the output shape and count, and the input shapes") {
  DetectAnomalyGuard anomaly;
  SUBCASE("log of a negative number") {
    Tensor x = from_vector<double>({1.0, -1.0, 2.0, -3.0, 4.0, 5.0}, {2, 3}).requires_grad_();
    std::string m = nonfinite_message([&] { log(x); });
    CHECK(m == "[anomaly] op 'log' produced a non-finite output of shape (2,3): 2 of 6 values are non-finite "
               "(2 NaN, 0 Inf); its inputs have shapes (2,3)");
  }
  SUBCASE("division by zero, broadcast") {
    Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
    Tensor b = from_vector<float>({1, 0, 2}, {3});
    std::string m = nonfinite_message([&] { div(a, b); });
    CHECK(m == "[anomaly] op 'div' produced a non-finite output of shape (2,3): 2 of 6 values are non-finite "
               "(0 NaN, 2 Inf); its inputs have shapes (2,3), (3)");
  }
  SUBCASE("finite results pass, and ops outside the tape are not checked") {
    Tensor x = from_vector<double>({1.0, 2.0}, {2}).requires_grad_();
    CHECK_NOTHROW(log(x).sum().backward());
    Tensor plain = from_vector<double>({-1.0}, {1});  // needs no grad: nothing is recorded
    CHECK_NOTHROW(log(plain));
  }
}

TEST_CASE("anomaly: backward names the op whose gradient went non-finite") {
  DetectAnomalyGuard anomaly;
  SUBCASE("sqrt at 0: an Inf gradient") {
    Tensor x = from_vector<double>({0.0, 1.0, 4.0}, {3}).requires_grad_();
    Tensor y = sqrt(x).sum();  // the forward is finite (0, 1, 2)
    std::string m = nonfinite_message([&] { y.backward(); });
    CHECK(m == "[anomaly] the backward of op 'sqrt' produced a non-finite gradient for its input 0 of shape (3): "
               "1 of 3 values are non-finite (0 NaN, 1 Inf); the op's output gradient has shape (3) and 0 "
               "non-finite values; its inputs have shapes (3) ('-': needs no gradient)");
    CHECK_FALSE(x.grad().defined());  // stopped before anything reached the leaf
  }
  SUBCASE("off: the same backward delivers the Inf silently") {
    DetectAnomalyGuard off(false);
    Tensor x = from_vector<double>({0.0, 1.0}, {2}).requires_grad_();
    sqrt(x).sum().backward();
    CHECK(std::isinf(x.grad().to_vector<double>()[0]));
  }
}

TEST_CASE("anomaly: train.detect_anomaly names the op and the step in a training run") {
  Run run;
  run.config.train.detect_anomaly = true;
  auto t = run.resumed();
  auto [name, w] = weight(*t, "q_proj");
  {
    NoGradGuard no_grad;
    w.view({-1}).narrow(0, 0, 1).fill_(INFINITY);
  }
  std::string m = nonfinite_message([&] { t->train_step(); });
  CHECK_HAS(m, "[train] step 3 at lr ");
  CHECK_HAS(m, ": [anomaly] op '");
  CHECK_HAS(m, "' produced a non-finite output of shape ");
  CHECK_FALSE(AnomalyMode::is_enabled());  // the trainer's guard restored it
  CHECK(read_bytes(run.checkpoint) == run.saved);
}
