// Mixed precision in training (train.precision, train/optim/grad_scaler.h): GradScaler's skip, backoff
// and growth; the trainer's float16 skip (weights and optimizer state bit for bit, the scale halved, a
// "skip" record); bf16 and fp16 loss curves against float32 on the default run's model; resume bit for
// bit in bf16 and in fp16 (the scaler's state in the checkpoint); the config key. The numbers (casts,
// autocast products): tests/test_precision.cpp.
#include <cmath>
#include <fstream>
#include <sstream>

#include "autograd/autocast.h"
#include "cli_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/config/config.h"
#include "train/optim/grad_scaler.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

void poison_grad(const Tensor& p, double value) {
  NoGradGuard no_grad;
  p.grad().view({-1}).narrow(0, 0, 1).fill_(value);
}

std::string repo_root() { return std::filesystem::path(RELGRAD_GOLDEN_DIR).parent_path().parent_path().string(); }

}  // namespace

TEST_CASE("grad scaler: unscale divides exactly, an inf/NaN gradient backs off, finite steps grow") {
  GradScalerOptions o;
  o.init_scale = 8.0;
  o.growth_interval = 3;
  GradScaler s(o);
  CHECK(GradScaler().get_scale() == 65536.0);
  Tensor p;
  auto backward = [&](double x) {
    p = zeros({3}).requires_grad_(true);
    sum(mul(s.scale(mul(p, 1.0)), x)).backward();  // d(scale · Σ p · x)/dp = scale · x
  };
  backward(0.75);
  CHECK(p.grad().to_vector<float>()[0] == 6.0f);
  s.unscale_({p});
  CHECK(p.grad().to_vector<float>() == std::vector<float>{0.75f, 0.75f, 0.75f});
  CHECK_FALSE(s.found_inf());
  s.update();
  CHECK(s.get_scale() == 8.0);
  CHECK(s.growth_tracker() == 1);
  for (double bad : {double(INFINITY), double(NAN)}) {
    backward(1.0);
    poison_grad(p, bad);
    s.unscale_({p});
    CHECK(s.found_inf());
    s.update();
    CHECK(s.growth_tracker() == 0);
  }
  CHECK(s.get_scale() == 2.0);  // 8 → 4 → 2
  for (int k = 0; k < 3; ++k) {
    backward(1.0);
    s.unscale_({p});
    s.update();
  }
  CHECK(s.get_scale() == 4.0);  // three finite steps in a row: doubled, the count restarts
  CHECK(s.growth_tracker() == 0);
  s.load_state(1024.0, 2);
  CHECK(s.get_scale() == 1024.0);
  check_throws_with([&] { s.load_state(0.0, 0); }, "[GradScaler] the saved scale must be positive");
  check_throws_with([&] { s.load_state(1.0, 3); }, "growth tracker 3 is outside [0, 3)");
  o.backoff_factor = 1.0;
  check_throws_with([&] { GradScaler bad(o); }, "backoff_factor must be in (0, 1)");
}

TEST_CASE("precision: an fp16 step whose gradients overflow is skipped, the scale halved, the weights kept") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.precision = kFloat16;
  Trainer t(trainer_options(c));
  REQUIRE(t.grad_scaler() != nullptr);
  CHECK(t.grad_scaler()->get_scale() == 65536.0);
  const Tensor w = t.model().module->named_parameters().front().second;
  t.set_after_backward([w](Trainer& tr) {
    if (tr.step() == 2) poison_grad(w, INFINITY);  // what a too-large scale does to a float16 product
  });
  steps_of(t, 2);
  CHECK(t.grad_scaler()->growth_tracker() == 2);
  const NamedTensors before = snapshot(t.model().module->named_parameters());
  const NamedTensors state = snapshot(t.optimizer().state_tensors());
  const double loss = t.train_step();
  CHECK(std::isfinite(loss));
  CHECK(t.step() == 3);  // the step number and the data advance, as PyTorch's scheduler does
  CHECK(t.data_position() == 3);
  check_identical(t.model().module->named_parameters(), before);
  check_identical(t.optimizer().state_tensors(), state);
  CHECK(t.grad_scaler()->get_scale() == 32768.0);
  CHECK(t.grad_scaler()->growth_tracker() == 0);
  t.train_step();
  CHECK(t.grad_scaler()->growth_tracker() == 1);
  CHECK_FALSE(bitwise_equal(t.model().module->named_parameters().front().second, before.front().second));
  // train() logs the skip as a "skip" record naming the scale.
  RunConfig c2 = c;
  c2.train.steps = 4;
  Trainer t2(trainer_options(c2));
  t2.set_after_backward([w2 = t2.model().module->named_parameters().front().second](Trainer& tr) {
    if (tr.step() == 1) poison_grad(w2, NAN);
  });
  TrainResult r = t2.train();
  CHECK(r.skipped_steps == 1);
  std::ifstream log(t2.log_path());
  std::stringstream text;
  text << log.rdbuf();
  CHECK(text.str().find("\"event\":\"skip\"") != std::string::npos);
  CHECK(text.str().find("fp16 gradients at loss scale 65536") != std::string::npos);
}

TEST_CASE("precision: bf16 and fp16 loss curves follow float32 on the default run's model") {
  // configs/default.toml (the encoder–decoder on the reverse task) for 40 steps, warm-up 10. The
  // products' rounding moves each step's loss a little (measured on a Zen 4, GEMM OpenBLAS: the
  // largest gap over these 40 steps 6.1e-4 for bf16, 1.6e-4 for fp16); the bounds, 5e-3 and 2e-3, leave
  // room for another GEMM library's order of sums and are far below what the loss falls.
  RunConfig base = RunConfig::defaults();
  load_config_file(base, repo_root() + "/configs/default.toml");
  TempDir dir;
  base.train.steps = 40;
  base.optim.warmup_steps = 10;
  base.train.out_dir = dir.file("run");
  base.train.samples = 0;
  Trainer fp32(trainer_options(base));
  const std::vector<double> ref = steps_of(fp32, 40);
  CHECK(ref.front() - ref.back() > 0.1);  // it learns, so the curves have a shape to follow
  for (DType low : {kBFloat16, kFloat16}) {
    const std::string precision = dtype_name(low);
    CAPTURE(precision);
    RunConfig c = base;
    c.train.precision = low;
    Trainer t(trainer_options(c));
    const std::vector<double> got = steps_of(t, 40);
    const double gap = largest_gap(got, ref);
    MESSAGE(precision, ": largest loss gap to float32 over 40 steps ", gap);
    CHECK(gap > 0);  // the policy took effect
    CHECK(gap < (low == kBFloat16 ? 5e-3 : 2e-3));
    for (const auto& [name, p] : t.model().module->named_parameters()) CHECK(p.dtype() == kFloat32);
    for (const auto& [name, s] : t.optimizer().state_tensors()) CHECK((s.dtype() == kFloat32 || s.dtype() == kInt64));
  }
}

TEST_CASE("precision: bf16 loss curve follows float32 on W1's architecture, shrunk") {
  // bench/configs/w1_train.toml (decoder-only, pre-norm, GELU, the seed's per-head relative tables,
  // untied head, AdamW without clipping) at a size a test can afford: width 32, 2 layers, context 32,
  // batch 4, on a generated text. Measured on a Zen 4: the largest gap over 30 steps 3.6e-4; bound 5e-3.
  TempDir dir;
  std::string text;
  for (int k = 0; k < 200; ++k) text += "And God said, Let there be light: and there was light " + std::to_string(k * 7 % 31) + ".\n";
  write_bytes(dir.file("corpus.txt"), text);
  RunConfig base = RunConfig::defaults();
  load_config_file(base, repo_root() + "/bench/configs/w1_train.toml");
  apply_overrides(base, {"model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_decoder_layers=2",
                         "model.decoder_self.max_length=32", "data.context=32", "data.batch_size=4",
                         "data.text_path=" + dir.file("corpus.txt"), "train.steps=30", "train.samples=0",
                         "train.out_dir=" + dir.file("run")});
  Trainer fp32(trainer_options(base));
  const std::vector<double> ref = steps_of(fp32, 30);
  CHECK(ref.front() - ref.back() > 0.2);  // it learns (measured: 0.35 over these 30 steps)
  RunConfig c = base;
  c.train.precision = kBFloat16;
  Trainer bf16(trainer_options(c));
  const std::vector<double> got = steps_of(bf16, 30);
  const double gap = largest_gap(got, ref);
  MESSAGE("W1 shrunk, bfloat16: largest loss gap to float32 over 30 steps ", gap);
  CHECK(gap > 0);
  CHECK(gap < 5e-3);
}

namespace {
// 12 steps straight against 6, save, a new Trainer resumed, 6 more: the same losses, weights,
// optimizer state (and loss scale), bit for bit.
void check_resume(const RunConfig& c, const std::string& checkpoint, int64_t poison_step) {
  auto poison = [poison_step](Trainer& t) {
    const Tensor w = t.model().module->named_parameters().back().second;
    t.set_after_backward([w, poison_step](Trainer& tr) {
      if (tr.step() == poison_step) poison_grad(w, INFINITY);
    });
  };
  Trainer straight(trainer_options(c));
  poison(straight);
  const std::vector<double> losses = steps_of(straight, 12);
  {
    Trainer first(trainer_options(c));
    poison(first);
    steps_of(first, 6);
    first.save(checkpoint);
  }
  default_generator().set_state(999, 999);
  Trainer second(trainer_options(c));
  second.resume(checkpoint);
  poison(second);
  const std::vector<double> tail = steps_of(second, 6);
  for (int k = 0; k < 6; ++k) CHECK_MESSAGE(tail[k] == losses[6 + k], "step " << 6 + k);
  check_identical(second.model().module->state_dict(), straight.model().module->state_dict());
  check_identical(second.optimizer().state_tensors(), straight.optimizer().state_tensors());
  if (straight.grad_scaler()) {
    CHECK(second.grad_scaler()->get_scale() == straight.grad_scaler()->get_scale());
    CHECK(second.grad_scaler()->growth_tracker() == straight.grad_scaler()->growth_tracker());
  }
}
}  // namespace

TEST_CASE("precision: resume is bit-identical in bf16, and in fp16 with the loss scale restored") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.precision = kBFloat16;
  check_resume(c, dir.file("bf16.safetensors"), -1);
  // The checkpoint stays float32: the precision is how products run, not what is stored.
  const Checkpoint ck = load_checkpoint(dir.file("bf16.safetensors"));
  for (const auto& [name, t] : ck.model) CHECK(t.dtype() == kFloat32);
  CHECK(ck.meta.extra.count("grad_scale") == 0);

  c.train.precision = kFloat16;
  check_resume(c, dir.file("fp16.safetensors"), 3);  // a skip before the save: the scale is 32768 there
  const Checkpoint ck16 = load_checkpoint(dir.file("fp16.safetensors"));
  CHECK(ck16.meta.extra.at("grad_scale") == "32768");
  CHECK(ck16.meta.extra.at("grad_scale_growth_tracker") == "2");
}

TEST_CASE("precision: train.precision is a config key with its choices, and needs train.dtype = float32") {
  RunConfig c = RunConfig::defaults();
  CHECK(c.train.precision == kFloat32);
  set_config_value(c, "train.precision", "bf16");
  CHECK(c.train.precision == kBFloat16);
  set_config_value(c, "train.precision", "fp16");
  CHECK(c.train.precision == kFloat16);
  check_throws_with([&] { set_config_value(c, "train.precision", "fp8"); }, "train.precision");
  c.validate();
  set_config_value(c, "train.dtype", "float64");
  check_throws_with([&] { c.validate(); }, "train.precision = fp16 rounds float32 products: it needs train.dtype = \"float32\", got \"float64\"");
}

TEST_CASE("precision: relgrad train --train.precision=bf16 says so in its banner and trains") {
  TempDir dir;
  CliResult r = run_relgrad({"train", "--train.precision=bf16", "--train.steps=3", "--train.samples=0",
                             "--train.eval_batches=1", "--optim.warmup_steps=1", "--train.out_dir=" + dir.file("run")});
  CHECK_MESSAGE(r.code == 0, r.err);
  CHECK(contains(r.out, ", bf16 products (float32 accumulation)\n"));
  CliResult bad = run_relgrad({"train", "--train.precision=fp8", "--train.out_dir=" + dir.file("bad")});
  CHECK(bad.code == 2);
  CHECK(contains(bad.err, "train.precision"));
}
