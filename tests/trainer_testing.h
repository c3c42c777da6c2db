// Configs and checks shared by the trainer tests (test_trainer.cpp, test_interrupt.cpp,
// test_precision_train.cpp, test_batch_shards.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "testing.h"
#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

namespace relgrad::testing {

// A tiny encoder–decoder on the reverse task, with dropout so that the RNG matters.
inline RunConfig tiny_ed(const std::string& out_dir) {
  RunConfig c = RunConfig::defaults();
  c.model.d_model = 16;
  c.model.n_heads = 2;
  c.model.d_ff = 32;
  c.model.n_encoder_layers = 1;
  c.model.n_decoder_layers = 1;
  c.model.dropout = 0.1;
  c.model.cross.max_length = 8;
  c.data.num_symbols = 6;
  c.data.min_len = 3;
  c.data.max_len = 6;
  c.data.batch_size = 4;
  c.optim.warmup_steps = 2;
  c.optim.positional_lr_scale = 1.0;  // one lr for every parameter (the default run trains its tables at 10x)
  c.optim.beta1 = 0.9, c.optim.beta2 = 0.999;  // PyTorch's betas (the default run's are 0.8/0.95)
  c.train.steps = 20;
  c.train.batch_shards = 1;  // the whole batch on one replica (the default run cuts it in two, by length)
  c.train.shard_by_length = false;
  c.train.log_every = 1;
  c.train.eval_every = 0;
  c.train.eval_batches = 2;
  c.train.save_every = 0;
  c.train.samples = 0;
  c.train.target_accuracy = 0.0;
  c.train.out_dir = out_dir;
  return c;
}

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A copy of a state dict (its tensors cloned), to compare with after more steps.
inline NamedTensors snapshot(const NamedTensors& state) {
  NamedTensors copy;
  for (const auto& [name, t] : state) copy.push_back({name, t.clone()});
  return copy;
}

// The same names in the same order, and every tensor the same bits.
inline void check_identical(const NamedTensors& a, const NamedTensors& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CHECK(a[k].first == b[k].first);
    CHECK_MESSAGE(bitwise_equal(a[k].second, b[k].second), "'" << a[k].first << "' differs");
  }
}

// The losses of n more training steps.
inline std::vector<double> steps_of(Trainer& t, int n) {
  std::vector<double> losses;
  for (int k = 0; k < n; ++k) losses.push_back(t.train_step());
  return losses;
}

// The largest |a[k] − b[k]| of two loss curves of the same length (0 for identical curves).
inline double largest_gap(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double gap = 0;
  for (size_t k = 0; k < a.size(); ++k) gap = std::max(gap, std::fabs(a[k] - b[k]));
  return gap;
}

// 20 steps straight vs 10 steps, save, a NEW Trainer resumed, 10 more: same losses, weights,
// optimizer state, bit for bit.
inline void check_resume(const RunConfig& c, const std::string& checkpoint) {
  Trainer straight(trainer_options(c));
  std::vector<double> losses = steps_of(straight, 20);
  NamedTensors weights = snapshot(straight.model().module->state_dict());
  NamedTensors optim = snapshot(straight.optimizer().state_tensors());
  {
    Trainer first(trainer_options(c));
    std::vector<double> head = steps_of(first, 10);
    CHECK(head == std::vector<double>(losses.begin(), losses.begin() + 10));
    first.save(checkpoint);
  }
  default_generator().set_state(999, 999);  // resume must restore the dropout stream
  Trainer second(trainer_options(c));
  second.resume(checkpoint);
  CHECK(second.step() == 10);
  CHECK(second.data_position() == 10 * c.train.grad_accum);
  std::vector<double> tail = steps_of(second, 10);
  for (int k = 0; k < 10; ++k) CHECK_MESSAGE(tail[k] == losses[10 + k], "step " << 10 + k);
  check_identical(second.model().module->state_dict(), weights);
  check_identical(second.optimizer().state_tensors(), optim);

  // Control: the same resume with the dropout stream moved elsewhere does not match (when the model
  // has dropout), so the comparison above can fail.
  if (c.model.dropout > 0) {
    Trainer third(trainer_options(c));
    third.resume(checkpoint);
    default_generator().set_state(4242, 0);
    CHECK(third.train_step() != losses[10]);
  }
}

}  // namespace relgrad::testing
