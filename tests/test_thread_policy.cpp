// The CPU thread policy (train/trainer/thread_policy.h): its decisions on timings the test makes up,
// and the property that lets it switch freely: a training step gives the same bits at any thread
// count, for every positional scheme, both model kinds and the fused attention core.
#include <omp.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "file_testing.h"
#include "testing.h"
#include "train/config/config.h"
#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Feeds `steps` steps to the policy; `seconds_per_token(threads)` says how fast each count runs.
template <class F>
std::vector<int> drive(ThreadPolicy& p, int steps, F seconds_per_token, int64_t tokens = 1000) {
  std::vector<int> used;
  for (int s = 0; s < steps; ++s) {
    const int n = p.threads_for_next_step();
    used.push_back(n);
    p.record(seconds_per_token(n) * double(tokens), tokens);
  }
  return used;
}

constexpr int kToDecision = ThreadPolicy::kWarmupSteps + ThreadPolicy::kTrialRounds * 2;  // two candidates

}  // namespace

TEST_CASE("thread policy: train.threads above the cores is capped with a warning, at or below it is kept") {
  ThreadPolicy over(1000, 2, 2);
  CHECK(over.threads_for_next_step() == 2);
  CHECK_FALSE(over.adaptive());
  CHECK(over.capped_warning().find("train.threads = 1000 is more than the 2 cores") != std::string::npos);
  ThreadPolicy fixed(3, 8, 8);
  CHECK(fixed.threads_for_next_step() == 3);
  CHECK(fixed.capped_warning().empty());
  drive(fixed, 50, [](int n) { return 1.0 / n; });
  CHECK(fixed.threads_for_next_step() == 3);  // never changed by timings
  CHECK(fixed.take_change().empty());
}

TEST_CASE("thread policy: adaptive candidates are the cores (or OMP_NUM_THREADS below them), half, and 1") {
  ThreadPolicy two(0, 2, 2);
  CHECK(two.adaptive());
  CHECK(two.most() == 2);
  ThreadPolicy omp_lower(0, 16, 3);  // OMP_NUM_THREADS=3 on 16 cores
  CHECK(omp_lower.most() == 3);
  ThreadPolicy one_core(0, 1, 4);  // OMP_NUM_THREADS=4 on one core: 1, not adaptive
  CHECK_FALSE(one_core.adaptive());
  CHECK(one_core.threads_for_next_step() == 1);
  ThreadPolicy eight(0, 8, 8);
  std::vector<int> used = drive(eight, ThreadPolicy::kWarmupSteps + 3 * ThreadPolicy::kTrialRounds,
                                [](int n) { return n == 4 ? 0.5 : 1.0; });
  std::set<int> tried(used.begin(), used.end());
  CHECK(tried == std::set<int>{1, 4, 8});
  CHECK(eight.threads_for_next_step() == 4);  // the fastest
}

TEST_CASE("thread policy: picks the faster count, keeps fewer threads unless more are 10 % faster") {
  // Idle machine, a model that scales: 2 threads.
  ThreadPolicy scaling(0, 2, 2);
  drive(scaling, kToDecision, [](int n) { return n == 2 ? 0.55 : 1.0; });
  CHECK(scaling.threads_for_next_step() == 2);
  CHECK(scaling.take_change().find("threads: 2 threads of up to 2") == 0);
  // A small model, 4 % faster on 2 threads (the default run idle): within the margin, 1 thread.
  ThreadPolicy small(0, 2, 2);
  drive(small, kToDecision, [](int n) { return n == 2 ? 0.96 : 1.0; });
  CHECK(small.threads_for_next_step() == 1);
  // Beside a busy process, 2 threads 2.7x slower: 1 thread.
  ThreadPolicy busy(0, 2, 2);
  std::vector<int> used = drive(busy, kToDecision, [](int n) { return n == 2 ? 2.7 : 1.0; });
  CHECK(busy.threads_for_next_step() == 1);
  // Warm-up steps run at the most threads and are not measured: a slow first step changes nothing.
  CHECK(used[0] == 2);
}

TEST_CASE("thread policy: tries again after the hold and follows a machine that changed") {
  ThreadPolicy p(0, 2, 2);
  bool busy = false;
  auto speed = [&](int n) { return n == 2 ? (busy ? 2.7e-3 : 0.5e-3) : 1.0e-3; };  // seconds per token
  drive(p, kToDecision, speed);
  REQUIRE(p.threads_for_next_step() == 2);
  CHECK(p.take_change().find("2 threads") != std::string::npos);
  busy = true;  // another process starts
  // Held for max(kHoldSeconds, kHoldFactor x the trial's time) of steps, then a trial finds 1 faster.
  const double trial_seconds = ThreadPolicy::kTrialRounds * (0.5 + 1.0);  // 1000 tokens per step
  const double hold = std::max(ThreadPolicy::kHoldSeconds, ThreadPolicy::kHoldFactor * trial_seconds);
  const int held_steps = int(hold / 2.7);  // steps at 2 threads, now 2.7 s each
  std::vector<int> used = drive(p, held_steps, speed);
  CHECK(std::count(used.begin(), used.end(), 2) == held_steps);  // no trial during the hold
  drive(p, 2 + 2 * ThreadPolicy::kTrialRounds, speed);
  CHECK(p.threads_for_next_step() == 1);
  CHECK(p.take_change().find("threads: 2 threads -> 1 thread") == 0);
  busy = false;  // it ends: back to 2 after the next hold and trial
  drive(p, 400, speed);
  CHECK(p.threads_for_next_step() == 2);
}

TEST_CASE("thread policy: the OpenMP thread count is put back when the policy ends") {
  const int before = omp_get_max_threads();
  {
    ThreadPolicy p(1, 2, before);
    p.set_for_next_step();
    CHECK(omp_get_max_threads() == 1);
  }
  CHECK(omp_get_max_threads() == before);
}

TEST_CASE("thread policy: a training step gives the same bits at 1, 2 and 3 threads (every scheme, fused core)") {
  // What lets the policy switch mid-run: logits and every gradient identical bit for bit. Sizes big
  // enough for the kernels' parallel paths (rows of 64 x 96 per batch, scores over 32 768 elements).
  struct Setup { std::string name; std::vector<std::string> overrides; };
  std::vector<Setup> setups = {
      {"default (T5 self, seed cross)", {}},
      {"decoder-only huang", {"model.type=decoder-only", "model.n_encoder_layers=0", "model.decoder_self.scheme=huang",
                              "model.cross.scheme=none", "data.task=periodic_lm", "data.max_len=96", "data.period=8"}},
  };
  for (const char* scheme : {"shaw", "t5", "alibi", "rope", "transformer_xl", "none", "seed"})
    setups.push_back({std::string("decoder-only ") + scheme,
                      {"model.type=decoder-only", "model.n_encoder_layers=0", std::string("model.decoder_self.scheme=") + scheme,
                       "model.cross.scheme=none", "data.task=periodic_lm", "data.max_len=96", "data.period=8"}});
  setups.push_back({"encoder-decoder, fused attention", {"model.fused_attention=true"}});
  setups.push_back({"decoder-only huang, fused attention",
                    {"model.fused_attention=true", "model.type=decoder-only", "model.n_encoder_layers=0",
                     "model.decoder_self.scheme=huang", "model.cross.scheme=none", "data.task=periodic_lm",
                     "data.max_len=96", "data.period=8"}});
  const int saved = omp_get_max_threads();
  for (const Setup& s : setups) {
    INFO(s.name);
    RunConfig c = RunConfig::defaults();
    c.model.dropout = 0.1;
    std::vector<std::string> args;
    for (const std::string& o : s.overrides) args.push_back("--" + o);
    apply_overrides(c, args);
    TrainerOptions o = trainer_options(c, nullptr);
    const Batch batch = o.data->batch(0, Split::Train);
    std::vector<std::vector<double>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      Generator init(7);
      const std::shared_ptr<RunModel> model = build_model(o.model, &init);
      RunModel& m = *model;
      m.module->train();
      default_generator().set_state(11, 0);  // the same dropout masks
      Tensor logits = m.logits(batch);
      const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
      cross_entropy(logits.reshape({B * T, V}), RunModel::targets(batch).reshape({B * T})).backward();
      std::vector<double> r = logits.to(kFloat64).to_vector<double>();
      for (const auto& entry : m.module->named_parameters()) {
        const auto& name = entry.first;
        const auto& p = entry.second;
        REQUIRE_MESSAGE(p.grad().defined(), name);
        std::vector<double> g = p.grad().to(kFloat64).to_vector<double>();
        r.insert(r.end(), g.begin(), g.end());
      }
      results.push_back(std::move(r));
    }
    CHECK(results[0] == results[1]);  // bit for bit
    CHECK(results[0] == results[2]);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("thread policy: the default run's weights are the same bits with train.threads 1, 2 and adaptive") {
  TempDir dir;
  std::vector<std::vector<double>> weights;
  for (int64_t threads : {1, 2, 0}) {
    RunConfig c = RunConfig::defaults();
    c.train.steps = 24;  // past the adaptive policy's first trial (2 + 5 x 2 steps)
    c.optim.warmup_steps = 5;
    c.train.threads = threads;
    c.train.eval_every = 0;
    c.train.save_every = 0;
    c.train.samples = 0;
    c.train.target_accuracy = 0.0;
    c.train.out_dir = dir.file("run" + std::to_string(threads));
    Trainer t(trainer_options(c, nullptr), nullptr);
    for (int s = 0; s < 24; ++s) t.train_step();
    std::vector<double> w;
    for (const Tensor& p : t.model().module->parameters()) {
      std::vector<double> v = p.to(kFloat64).to_vector<double>();
      w.insert(w.end(), v.begin(), v.end());
    }
    weights.push_back(std::move(w));
  }
  CHECK(weights[0] == weights[1]);
  CHECK(weights[0] == weights[2]);
}
