// train.batch_shards (train/trainer/batch_shards.h): a step's rows cut into shards that run forward and
// backward side by side on replicas sharing the weights. The same bits at any thread count, the
// gradient of the whole batch (dropout masks included) up to the order of the sums, a held-out
// evaluation bit for bit evaluate()'s, a bit-identical resume, single rows for a batch smaller than
// the shard count, and one after another under an address-space limit.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/trainer/batch_shards.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Every parameter's gradient of each step, captured after the backward pass(es); `dropout_state`
// (seed, offset), when given, replaces the dropout stream the Trainer set up.
std::vector<NamedTensors> gradients_of_steps(const RunConfig& c, int steps, std::pair<uint64_t, uint64_t> dropout_state = {0, 0}) {
  Trainer t(trainer_options(c));
  if (dropout_state.first != 0) default_generator().set_state(dropout_state.first, dropout_state.second);
  std::vector<NamedTensors> out;
  t.set_after_backward([&](Trainer& tr) {
    NamedTensors grads;
    for (const auto& [name, p] : tr.model().module->named_parameters())
      grads.push_back({name, p.grad().defined() ? p.grad().clone() : Tensor()});
    out.push_back(grads);
  });
  steps_of(t, steps);
  return out;
}

// The largest |a − b| over every gradient element of a step, relative to the step's largest |b|
// (a per-tensor scale would not do: some gradients are zero but for rounding, as a key bias's).
double largest_relative_gap(const std::vector<NamedTensors>& a, const std::vector<NamedTensors>& b) {
  REQUIRE(a.size() == b.size());
  double gap = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    REQUIRE(a[s].size() == b[s].size());
    double scale = 0, diff = 0;
    for (size_t k = 0; k < a[s].size(); ++k) {
      REQUIRE(a[s][k].second.defined() == b[s][k].second.defined());
      if (!a[s][k].second.defined()) continue;
      const std::vector<double> x = a[s][k].second.contiguous().to_vector<double>();
      const std::vector<double> y = b[s][k].second.contiguous().to_vector<double>();
      for (size_t i = 0; i < x.size(); ++i) {
        scale = std::max(scale, std::fabs(y[i]));
        diff = std::max(diff, std::fabs(x[i] - y[i]));
      }
    }
    gap = std::max(gap, diff / (scale + 1e-300));
  }
  return gap;
}

}  // namespace

TEST_CASE("batch shards: the same losses and weights, bit for bit, at 1 and 2 threads (dropout on)") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.batch_shards = 2;
  c.train.grad_accum = 2;
  c.train.threads = 1;
  Trainer one(trainer_options(c));
  const std::vector<double> l1 = steps_of(one, 6);
  c.train.threads = 2;
  Trainer two(trainer_options(c));
  const std::vector<double> l2 = steps_of(two, 6);
  CHECK(l1 == l2);
  check_identical(two.model().module->state_dict(), one.model().module->state_dict());
  check_identical(two.optimizer().state_tensors(), one.optimizer().state_tensors());
  // Shards sum their rows in another order than the whole batch: not the same bits as one shard,
  // so the equality above compares the sharded path with itself.
  c.train.batch_shards = 1;
  Trainer whole(trainer_options(c));
  CHECK(steps_of(whole, 6) != l1);
}

TEST_CASE("batch shards: each step's gradient is the whole batch's, dropout masks included (float64)") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.dtype = kFloat64;
  c.train.grad_accum = 2;
  c.train.threads = 2;
  c.train.batch_shards = 1;
  const std::vector<NamedTensors> whole = gradients_of_steps(c, 3);
  c.train.batch_shards = 3;  // 4 rows: shards of 1, 1 and 2
  const std::vector<NamedTensors> sharded = gradients_of_steps(c, 3);
  // Steps 2 and 3 start from weights that differ in the last bits, and draw their masks after step
  // 1's: a mask drawn from the wrong offset or for the wrong rows changes gradients by O(1).
  CHECK(largest_relative_gap(sharded, whole) < 1e-9);

  // Control: the same shards with the dropout stream moved elsewhere are far apart.
  const std::vector<NamedTensors> other_masks = gradients_of_steps(c, 3, {4242, 0});
  CHECK(largest_relative_gap(other_masks, whole) > 1e-3);
}

TEST_CASE("batch shards: the held-out evaluation side by side is evaluate()'s, bit for bit") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.batch_shards = 2;
  c.train.threads = 2;
  c.train.eval_batches = 5;  // an odd count: one replica scores three
  Trainer t(trainer_options(c));
  steps_of(t, 4);
  const EvalResult side_by_side = t.evaluate();
  const EvalResult one = evaluate(t.model(), t.data(), c.train.eval_batches);
  CHECK(side_by_side.loss == one.loss);
  CHECK(side_by_side.accuracy == one.accuracy);
  CHECK(side_by_side.sequence_accuracy == one.sequence_accuracy);
  CHECK(side_by_side.tokens == one.tokens);
  CHECK(side_by_side.sequences == one.sequences);
  CHECK(one.tokens > 0);
  CHECK(t.model().module->is_training());  // the mode is given back
}

TEST_CASE("batch shards: resume is bit-identical (dropout, grad_accum = 2, 2 shards)") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.grad_accum = 2;
  c.train.batch_shards = 2;
  check_resume(c, dir.file("half.safetensors"));
}

TEST_CASE("batch shards: more shards than a batch has rows cut it into single rows") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));  // batch_size 4
  c.train.batch_shards = 0;
  check_throws_with([&] { c.validate(); }, "train.batch_shards must be >= 1, got 0");
  c.train.batch_shards = 4;
  Trainer by_rows(trainer_options(c));
  const std::vector<double> four = steps_of(by_rows, 3);
  c.train.batch_shards = 7;
  CHECK_NOTHROW(c.validate());
  Trainer more(trainer_options(c));
  CHECK(steps_of(more, 3) == four);
  check_identical(more.model().module->state_dict(), by_rows.model().module->state_dict());
  c.train.batch_shards = 2;  // control: another cut, other bits
  Trainer two(trainer_options(c));
  CHECK(steps_of(two, 3) != four);
}

TEST_CASE("batch shards: one after another under an address-space limit (OpenBLAS would wait forever there)") {
  struct rlimit now {};
  REQUIRE(::getrlimit(RLIMIT_AS, &now) == 0);
  CHECK(BatchShards::side_by_side_allowed() == (now.rlim_cur == RLIM_INFINITY));
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // a limit far above anything this process maps: only its presence matters
    struct rlimit limit = now;
    limit.rlim_cur = rlim_t(1) << 42;
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < limit.rlim_cur) limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(2);
    ::_exit(BatchShards::side_by_side_allowed() ? 1 : 0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
