// optim.positional_lr_scale (train/optim/optim.h): the relative positional tables in optimizer
// groups of their own at lr × scale, following the schedule; scale 1 leaves the two decay_groups (the
// checkpoints' layout) untouched; the Trainer with a scale trains as a hand-made loop with a third
// group of the positional tables at lr × scale does; a resume keeps and checks the scale.
#include <cmath>
#include <memory>

#include <nlohmann/json.hpp>

#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/config/run_options.h"
#include "train/optim/optim.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// A tiny shift-copy encoder–decoder with T5 in cross-attention only, no dropout (as the experiments).
RunConfig tiny_shift(const std::string& out_dir) {
  RunConfig c = tiny_ed(out_dir);
  c.model.dropout = 0.0;
  c.model.encoder_self = PositionalConfig{"none"};
  c.model.decoder_self = PositionalConfig{"seed"};
  c.model.decoder_self.max_length = 8;
  c.model.cross = PositionalConfig{"t5"};
  c.data.task = TaskKind::Shift;
  c.data.lag = 2;
  c.data.seed = 1;
  c.optim.min_lr = 5e-5;
  c.optim.positional_lr_scale = 10.0;
  return c;
}

// The reference: a plain loop (AdamW, warmup + cosine to min_lr, clip) whose optimizer has decay_groups'
// two groups without the "*.positional.*" parameters and a third of those at lr × scale with weight
// decay, the mean token loss of each batch. (The verification experiments trained by this loop before
// they trained through the Trainer.)
std::shared_ptr<RunModel> hand_made_loop(const RunConfig& config, const Dataset& data, double scale) {
  Generator init(config.train.seed);
  const std::shared_ptr<RunModel> model = build_model(model_options(config), &init);
  const OptimConfig& o = config.optim;
  std::vector<std::pair<std::string, Tensor>> plain, tables;
  for (const auto& entry : model->module->named_parameters())
    (entry.first.find(".positional.") != std::string::npos ? tables : plain).push_back(entry);
  std::vector<ParamGroup> groups = decay_groups(plain, o.lr, o.weight_decay);
  ParamGroup positional;
  positional.weight_decay = o.weight_decay;
  for (const auto& entry : tables) positional.params.push_back(entry.second);
  groups.push_back(positional);
  AdamW optimizer(groups, AdamWOptions(o.lr).betas(o.beta1, o.beta2).eps(o.eps));
  LrSchedule schedule(o.lr, o.warmup_steps, config.train.steps, o.min_lr, LrSchedule::Decay::Cosine);
  const TensorList params = model->module->parameters();
  model->module->train();
  for (int64_t step = 0; step < config.train.steps; ++step) {
    optimizer.set_lr(schedule.lr_at(step));
    optimizer.param_groups().back().lr = schedule.lr_at(step) * scale;
    optimizer.zero_grad();
    const Batch b = data.batch(step, Split::Train);
    Tensor logits = model->logits(b);  // (B, T, V)
    const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
    cross_entropy(logits.reshape({B * T, V}), RunModel::targets(b).reshape({B * T})).backward();
    clip_grad_norm_(params, o.clip > 0 ? o.clip : INFINITY);
    optimizer.step();
  }
  return model;
}

bool holds(const ParamGroup& g, const Tensor& p) {
  for (const Tensor& q : g.params)
    if (q.impl() == p.impl()) return true;
  return false;
}

}  // namespace

TEST_CASE("positional lr: scale 1 is decay_groups, another scale moves *.positional.* into groups 2 and 3") {
  TempDir dir;
  Trainer t(trainer_options(tiny_shift(dir.file("run"))));
  const auto named = t.model().module->named_parameters();
  const std::vector<ParamGroup> plain = decay_groups(named, 1e-3, 0.1);

  ScaledGroups one = scaled_positional_groups(named, 1e-3, 0.1, 1.0);
  REQUIRE(one.groups.size() == 2);
  CHECK(one.lr_scale == std::vector<double>{1.0, 1.0});
  for (size_t g = 0; g < 2; ++g) {
    REQUIRE(one.groups[g].params.size() == plain[g].params.size());
    for (size_t i = 0; i < plain[g].params.size(); ++i)
      CHECK(one.groups[g].params[i].impl() == plain[g].params[i].impl());
  }

  ScaledGroups ten = scaled_positional_groups(named, 1e-3, 0.1, 10.0);
  REQUIRE(ten.groups.size() == 4);
  CHECK(ten.lr_scale == std::vector<double>{1.0, 1.0, 10.0, 10.0});
  CHECK(ten.groups[2].lr == doctest::Approx(1e-2));
  CHECK(ten.groups[2].weight_decay == 0.1);
  CHECK(ten.groups[3].weight_decay == 0.0);
  int positional = 0;
  for (const auto& entry : named) {
    const auto& name = entry.first;
    const auto& p = entry.second;
    CAPTURE(name);
    const bool pos = name.find(".positional.") != std::string::npos;
    positional += pos;
    // A positional parameter sits in group 2 or 3, by decay_groups' rule; every other one in 0 or 1.
    const bool decays = holds(plain[0], p);
    CHECK(holds(ten.groups[pos ? 2 : 0], p) == decays);
    CHECK(holds(ten.groups[pos ? 3 : 1], p) == !decays);
    CHECK(!holds(ten.groups[pos ? 0 : 2], p));
    CHECK(!holds(ten.groups[pos ? 1 : 3], p));
  }
  CHECK(positional == 2);  // T5's table (cross) and the seed's table (decoder self-attention)

  CHECK_THROWS_WITH_AS(scaled_positional_groups(named, 1e-3, 0.1, 0.0),
                       doctest::Contains("positional_lr_scale"), Error);
  CHECK_THROWS_WITH_AS(scaled_positional_groups(named, 1e-3, 0.1, NAN),
                       doctest::Contains("positional_lr_scale"), Error);
}

TEST_CASE("positional lr: the Trainer's groups follow the schedule at lr × scale, scale 1 keeps two groups") {
  TempDir dir;
  RunConfig c = tiny_shift(dir.file("run"));
  Trainer t(trainer_options(c));
  REQUIRE(t.optimizer().param_groups().size() == 4);
  LrSchedule schedule(c.optim.lr, c.optim.warmup_steps, c.train.steps, c.optim.min_lr,
                      LrSchedule::Decay::Cosine);
  for (int64_t step = 0; step < 5; ++step) {
    t.train_step();
    const auto& g = t.optimizer().param_groups();
    CHECK(g[0].lr == schedule.lr_at(step));
    CHECK(g[1].lr == schedule.lr_at(step));
    CHECK(g[2].lr == schedule.lr_at(step) * 10.0);
    CHECK(g[3].lr == schedule.lr_at(step) * 10.0);
  }
  // Scale 1 (every existing config): decay_groups' two groups, parameter for parameter, each at the
  // schedule's lr exactly (× 1.0 is exact) — the optimizer the Trainer built before the key existed,
  // so its losses are bit for bit those of before.
  c.optim.positional_lr_scale = 1.0;
  Trainer plain(trainer_options(c));
  const std::vector<ParamGroup> expected =
      decay_groups(plain.model().module->named_parameters(), c.optim.lr, c.optim.weight_decay);
  REQUIRE(plain.optimizer().param_groups().size() == 2);
  for (size_t g = 0; g < 2; ++g) {
    const ParamGroup& got = plain.optimizer().param_groups()[g];
    CHECK(got.weight_decay == expected[g].weight_decay);
    REQUIRE(got.params.size() == expected[g].params.size());
    for (size_t i = 0; i < got.params.size(); ++i)
      CHECK(got.params[i].impl() == expected[g].params[i].impl());
  }
  for (int64_t step = 0; step < 3; ++step) {
    plain.train_step();
    for (const ParamGroup& g : plain.optimizer().param_groups()) CHECK(g.lr == schedule.lr_at(step));
  }
  c.optim.positional_lr_scale = -1.0;
  CHECK_THROWS_WITH_AS(trainer_options(c), doctest::Contains("optim.positional_lr_scale must be in (0, 1e6]"),
                       Error);
}

// The hand-made loop takes the mean token loss, the Trainer sum / count: the same number up to
// rounding, so the weights agree to float32 rounding after a few steps (5.96e-08 at most measured), not
// bit for bit.
TEST_CASE("positional lr: the Trainer trains as a hand-made loop with a positional group at the same scale") {
  TempDir dir;
  RunConfig c = tiny_shift(dir.file("run"));
  c.train.steps = 12;
  TrainerOptions o = trainer_options(c);
  Trainer t(o);
  for (int i = 0; i < 12; ++i) t.train_step();
  RunConfig derived = c;
  derived.derive_from_data();
  const auto reference = hand_made_loop(derived, *o.data, 10.0);
  const auto one_lr = hand_made_loop(derived, *o.data, 1.0);
  const auto mine = t.model().module->named_parameters(), theirs = reference->module->named_parameters(),
             unscaled = one_lr->module->named_parameters();
  REQUIRE(mine.size() == theirs.size());
  double worst = 0.0, positional_gap = 0.0;
  for (size_t i = 0; i < mine.size(); ++i) {
    REQUIRE(mine[i].first == theirs[i].first);
    std::vector<float> a = mine[i].second.contiguous().to_vector<float>(),
                       b = theirs[i].second.contiguous().to_vector<float>();
    std::vector<float> u = unscaled[i].second.contiguous().to_vector<float>();
    // A key projection's bias has a zero gradient in exact arithmetic (softmax ignores a shift shared
    // by every key), so its gradient is rounding noise, which Adam scales up to steps of about lr.
    if (mine[i].first.find("k_proj.bias") != std::string::npos) continue;
    for (size_t k = 0; k < a.size(); ++k) {
      worst = std::max(worst, static_cast<double>(std::abs(a[k] - b[k])));
      if (is_positional_parameter(mine[i].first))
        positional_gap = std::max(positional_gap, static_cast<double>(std::abs(a[k] - u[k])));
    }
  }
  CHECK(worst < 1e-6);
  CHECK(positional_gap > 1e-2);  // control: at one lr the tables end elsewhere, so the check above can fail
}

TEST_CASE(
    "positional lr: a checkpoint keeps the four groups, resume is bit-identical and refuses another scale") {
  TempDir dir;
  RunConfig c = tiny_shift(dir.file("run"));
  Trainer straight(trainer_options(c));
  std::vector<double> losses;
  for (int i = 0; i < 8; ++i) losses.push_back(straight.train_step());
  {
    Trainer first(trainer_options(c));
    for (int i = 0; i < 4; ++i) first.train_step();
    first.save(dir.file("half.safetensors"));
  }
  Trainer second(trainer_options(c));
  second.resume(dir.file("half.safetensors"));
  for (int i = 4; i < 8; ++i) CHECK(second.train_step() == losses[i]);
  // Both tables have 2+ dims, so they decay: group 2 holds them, group 3 is empty (no state names).
  int group2 = 0, group3 = 0;
  for (const auto& [name, tensor] : second.optimizer().state_tensors()) {
    group2 += name.rfind("group2.", 0) == 0 && name.find(".exp_avg_sq") != std::string::npos;
    group3 += name.rfind("group3.", 0) == 0;
  }
  CHECK(group2 == 2);
  CHECK(group3 == 0);

  RunConfig other = c;
  other.optim.positional_lr_scale = 5.0;
  Trainer refused(trainer_options(other));
  CHECK_THROWS_WITH_AS(refused.resume(dir.file("half.safetensors")),
                       doctest::Contains("optim.positional_lr_scale is 10.0 there and 5.0 here"), Error);
  other.optim.positional_lr_scale = 1.0;
  Trainer refused_one(trainer_options(other));
  CHECK_THROWS_WITH_AS(refused_one.resume(dir.file("half.safetensors")),
                       doctest::Contains("optim.positional_lr_scale"), Error);
}

// A checkpoint written before the key existed has no optim.positional_lr_scale in its config: it trained
// at one lr, so a resume at another scale is refused (its optimizer state has two groups, not four).
TEST_CASE("positional lr: a config without the key (an older checkpoint) counts as scale 1 on resume") {
  TempDir dir;
  RunConfig old_run = tiny_shift(dir.file("run"));
  old_run.optim.positional_lr_scale = 1.0;
  old_run.derive_from_data();
  nlohmann::json saved = nlohmann::json::parse(config_to_json(old_run));
  REQUIRE(saved["optim"].erase("positional_lr_scale") == 1);
  RunConfig c = tiny_shift(dir.file("run"));
  c.optim.positional_lr_scale = 1.0;
  CHECK_NOTHROW(trainer_options(c).check_resume(saved.dump(), "old.safetensors"));
  c.optim.positional_lr_scale = 10.0;
  CHECK_THROWS_WITH_AS(trainer_options(c).check_resume(saved.dump(), "old.safetensors"),
                       doctest::Contains("optim.positional_lr_scale is 1.0 there and 10.0 here"), Error);
}
