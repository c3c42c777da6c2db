// train.batch_shards (train/trainer/batch_shards.h): a step's rows cut into shards that run forward and
// backward side by side on replicas sharing the weights. The same bits at any thread count, the
// gradient of the whole batch (dropout masks included) up to the order of the sums, a held-out
// evaluation bit for bit evaluate()'s, a bit-identical resume, single rows for a batch smaller than
// the shard count, and one after another under an address-space limit. train.shard_by_length: the
// cut by length, each shard's rows and widths, the whole batch's gradient for every positional scheme
// in every place it fits, the same bits at any thread count, and the settings where it cuts in order.
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
#include "layers/schemes.h"
#include "train/config/run_options.h"
#include "trainer_testing.h"
#include "train/trainer/batch_shards.h"
#include "train/trainer/run.h"
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

// ---- train.shard_by_length ----------------------------------------------------------------------

namespace {

// The largest padded cost, rows × (longest source + longest target), of a cut.
int64_t largest_cost(const std::vector<std::vector<int64_t>>& runs, const std::vector<int64_t>& src,
                     const std::vector<int64_t>& tgt) {
  int64_t worst = 0;
  for (const auto& run : runs) {
    int64_t s = 0, t = 0;
    for (int64_t r : run) s = std::max(s, src[r]), t = std::max(t, tgt[r]);
    worst = std::max(worst, static_cast<int64_t>(run.size()) * (s + t));
  }
  return worst;
}

// The least largest cost of any cut of `order` into `shards` contiguous runs (every cut tried).
int64_t least_cost(const std::vector<int64_t>& order, int64_t shards, const std::vector<int64_t>& src,
                   const std::vector<int64_t>& tgt, size_t from = 0) {
  const size_t n = order.size();
  auto run_cost = [&](size_t a, size_t b) {
    int64_t s = 0, t = 0;
    for (size_t i = a; i < b; ++i) s = std::max(s, src[order[i]]), t = std::max(t, tgt[order[i]]);
    return static_cast<int64_t>(b - a) * (s + t);
  };
  if (shards == 1) return run_cost(from, n);
  int64_t best = INT64_MAX;
  for (size_t end = from + 1; end + static_cast<size_t>(shards - 1) <= n; ++end)
    best = std::min(best, std::max(run_cost(from, end), least_cost(order, shards - 1, src, tgt, end)));
  return best;
}

// A float64 config whose gradients are compared with and without shard_by_length: no dropout (its
// masks are other draws under the cut), rows of 3-6 symbols, 6 rows a batch.
RunConfig exact_config(const std::string& out_dir) {
  RunConfig c = tiny_ed(out_dir);
  c.train.dtype = kFloat64;
  c.model.dropout = 0.0;
  c.data.batch_size = 6;
  c.train.threads = 2;
  return c;
}

// Gradients of 2 steps with the whole batch on one replica, and with 2 shards cut by length: the largest
// gap relative to each step's largest element.
double gap_by_length(RunConfig c) {
  c.train.batch_shards = 1;
  c.train.shard_by_length = false;
  const std::vector<NamedTensors> whole = gradients_of_steps(c, 2);
  c.train.batch_shards = 2;
  c.train.shard_by_length = true;
  c.validate();
  return largest_relative_gap(gradients_of_steps(c, 2), whole);
}

}  // namespace

TEST_CASE("shard by length: the cut orders the rows by length and makes the largest shard's cost the least") {
  // Equal lengths: the row order kept, the rows cut as evenly as they go.
  const std::vector<int64_t> zeros(5, 0), fives(5, 5);
  const auto even = shards_by_length(zeros, fives, 2);
  CHECK(even == std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4}});
  CHECK(shards_by_length(zeros, fives, 5) == std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {3}, {4}});
  // Lengths 9 8 1 2 1 (targets only, as a decoder-only batch's): ordered 2 4 3 1 0 (ties in row order);
  // the cut {2 4 3 1} {0} costs 4 × 8 = 32 and 9, against 3 × 2 = 6 and 2 × 9 = 18 for {2 4 3} {1 0}: 18.
  const std::vector<int64_t> none(5, 0), lm{9, 8, 1, 2, 1};
  CHECK(shards_by_length(none, lm, 2) == std::vector<std::vector<int64_t>>{{2, 4, 3}, {1, 0}});
  // Random lengths against every cut, for 2-4 shards: each row once, in length order, the least cost.
  Generator gen(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t rows = 2 + trial % 11, shards = 1 + trial % std::min<int64_t>(4, rows);
    const std::vector<int64_t> src = randint(0, 9, {rows}, TensorOptions(kInt64), &gen).to_vector<int64_t>();
    const std::vector<int64_t> tgt = randint(1, 9, {rows}, TensorOptions(kInt64), &gen).to_vector<int64_t>();
    INFO("trial ", trial, ": ", rows, " rows, ", shards, " shards");
    const auto runs = shards_by_length(src, tgt, shards);
    REQUIRE(static_cast<int64_t>(runs.size()) == shards);
    std::vector<int64_t> order;
    for (const auto& run : runs) {
      CHECK(!run.empty());
      order.insert(order.end(), run.begin(), run.end());
    }
    std::vector<int64_t> expected(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) expected[static_cast<size_t>(r)] = r;
    std::stable_sort(expected.begin(), expected.end(),
                     [&](int64_t a, int64_t b) { return src[a] + tgt[a] < src[b] + tgt[b]; });
    CHECK(order == expected);
    CHECK(largest_cost(runs, src, tgt) == least_cost(expected, shards, src, tgt));
  }
  check_throws_with([] { shards_by_length({1, 2}, {1, 2}, 3); }, "2 source and 2 target lengths cut into 3 shards");
  check_throws_with([] { shards_by_length({1, 2}, {1}, 1); }, "2 source and 1 target lengths");
}

TEST_CASE("shard by length: a shard holds its rows, cut to its own longest source and target") {
  RunConfig c = tiny_ed("unused");
  c.data.batch_size = 7;
  for (bool decoder_only : {false, true}) {
    INFO("decoder-only ", decoder_only);
    if (decoder_only) c.model_type = ModelKind::DecoderOnly;
    c.derive_from_data();
    RunData data(c);
    const Batch whole = data.batch(3, Split::Train);
    const Tensor& ids = decoder_only ? whole.tokens : whole.tgt_in;
    const Tensor& mask = decoder_only ? whole.padding_mask : whole.tgt_padding_mask;
    const std::vector<int64_t> lengths = row_lengths(mask, 7, ids.size(1));
    const std::vector<bool> pad = mask.contiguous().to_vector<bool>();
    for (int64_t r = 0; r < 7; ++r) {  // one past the last real token; PAD from there on
      REQUIRE(lengths[r] >= 1);
      CHECK(!pad[static_cast<size_t>(r * ids.size(1) + lengths[r] - 1)]);
      for (int64_t t = lengths[r]; t < ids.size(1); ++t) CHECK(pad[static_cast<size_t>(r * ids.size(1) + t)]);
    }
    const std::vector<int64_t> rows{6, 2, 4};
    const std::vector<int64_t> src_lengths =
        decoder_only ? std::vector<int64_t>(7, 0) : row_lengths(whole.src_padding_mask, 7, whole.src.size(1));
    const Batch part = gather_rows(whole, rows, src_lengths, lengths);
    const int64_t width = std::max({lengths[6], lengths[2], lengths[4]});
    const Tensor& targets = RunModel::targets(part);
    CHECK(targets.size(0) == 3);
    CHECK(targets.size(1) == width);
    int64_t counted = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      CHECK(bitwise_equal(targets.select(0, static_cast<int64_t>(i)),
                          RunModel::targets(whole).select(0, rows[i]).narrow(0, 0, width)));
      for (int64_t v : RunModel::targets(whole).select(0, rows[i]).contiguous().to_vector<int64_t>())
        counted += v != kIgnoreIndex;
    }
    CHECK(part.num_targets == counted);
    if (!decoder_only) {  // the source cut to its own longest row
      const std::vector<int64_t> src = row_lengths(whole.src_padding_mask, 7, whole.src.size(1));
      CHECK(part.src.size(1) == std::max({src[6], src[2], src[4]}));
      CHECK(bitwise_equal(part.src.select(0, 1), whole.src.select(0, 2).narrow(0, 0, part.src.size(1))));
    }
  }
  CHECK(row_lengths(Tensor(), 3, 5) == std::vector<int64_t>{5, 5, 5});  // no mask: every row whole
  check_throws_with([] { row_lengths(full({3, 4}, 1.0, TensorOptions(kBool)), 3, 5); },
                    "train.shard_by_length: a padding mask of shape (3,4) for 3 rows of 5 positions");
}

TEST_CASE("shard by length: each step's gradient is the whole batch's, for every scheme in every place it fits") {
  TempDir dir;
  int compared = 0;
  for (const SchemeEntry& e : positional_schemes())
    for (const char* place : {"encoder_self", "decoder_self", "cross", "decoder-only"}) {
      const bool cross = std::string(place) == "cross";
      const bool causal = std::string(place) == "decoder_self" || std::string(place) == "decoder-only";
      if (placement(e, causal, cross) != Placement::Allowed) continue;
      INFO("scheme ", e.name, " in ", place);
      RunConfig c = exact_config(dir.file(e.name + place));
      PositionalConfig p{e.name};
      if (std::string(place) == "encoder_self") c.model.encoder_self = p;
      if (std::string(place) == "decoder_self") c.model.decoder_self = p;
      if (cross) p.max_length = 8, c.model.cross = p;
      if (std::string(place) == "decoder-only") {
        c.model_type = ModelKind::DecoderOnly;
        c.model.decoder_self = p;
      }
      // Only the order of the sums over rows differs: float64 rounding. A padded width the rows' outputs
      // depended on would move them by O(1) (the control below).
      CHECK(gap_by_length(c) < 1e-9);
      ++compared;
    }
  CHECK(compared >= 2 * static_cast<int>(positional_schemes().size()));

  // Control: under right alignment the queries' places follow the padded widths (π(i) = i + t1 − t2),
  // so one more column of source padding moves every row's logits; under left alignment none.
  for (CrossAlignment alignment : {CrossAlignment::Left, CrossAlignment::Right}) {
    RunConfig c = exact_config(dir.file("align"));
    c.model.cross_alignment = alignment;
    c.derive_from_data();
    RunData data(c);
    const Batch whole = data.batch(1, Split::Train);
    Batch wider = whole;
    wider.src = cat({whole.src, full({6, 1}, double(kPad), TensorOptions(kInt64))}, 1);
    wider.src_padding_mask = cat({whole.src_padding_mask, full({6, 1}, 1.0, TensorOptions(kBool))}, 1);
    Generator init(3);
    std::shared_ptr<RunModel> model = build_model(trainer_options(c).model, &init);
    model->module->eval();
    const std::vector<double> a = model->logits(whole).contiguous().to_vector<double>();
    const std::vector<double> b = model->logits(wider).contiguous().to_vector<double>();
    const std::vector<int64_t> targets = RunModel::targets(whole).contiguous().to_vector<int64_t>();
    const int64_t vocab = static_cast<int64_t>(a.size() / targets.size());
    double gap = 0;
    for (size_t k = 0; k < a.size(); ++k)
      if (targets[k / static_cast<size_t>(vocab)] != kIgnoreIndex) gap = std::max(gap, std::fabs(a[k] - b[k]));
    INFO("alignment ", kCrossAlignmentNames.name(alignment), ": largest logit gap ", gap);
    if (alignment == CrossAlignment::Left) CHECK(gap < 1e-12);
    else CHECK(gap > 1e-3);
  }
  // So there the rows are cut in order, as without the option: the same bits as train.shard_by_length = false.
  RunConfig right = exact_config(dir.file("right"));
  right.model.cross_alignment = CrossAlignment::Right;
  right.train.batch_shards = 2;
  CHECK(!BatchShards::by_length_applies(trainer_options(right).model));
  CHECK(BatchShards::by_length_applies(trainer_options(exact_config(dir.file("left"))).model));
  right.train.shard_by_length = true;
  const std::vector<NamedTensors> asked = gradients_of_steps(right, 2);
  right.train.shard_by_length = false;
  CHECK(largest_relative_gap(asked, gradients_of_steps(right, 2)) == 0.0);
}

TEST_CASE("shard by length: the same bits at 1 and 2 threads (dropout on), and not where positions are drawn") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.data.batch_size = 6;
  c.train.batch_shards = 2;
  c.train.shard_by_length = true;
  c.train.threads = 1;
  Trainer one(trainer_options(c));
  const std::vector<double> l1 = steps_of(one, 5);
  c.train.threads = 2;
  Trainer two(trainer_options(c));
  CHECK(steps_of(two, 5) == l1);
  check_identical(two.model().module->state_dict(), one.model().module->state_dict());
  c.train.shard_by_length = false;  // control: the cut by rows is another path
  Trainer by_rows(trainer_options(c));
  CHECK(steps_of(by_rows, 5) != l1);

  RunConfig lm = tiny_ed(dir.file("lm"));
  lm.model_type = ModelKind::DecoderOnly;
  lm.model.decoder_self = PositionalConfig{"rope"};
  lm.model.random_positions_max = 64;
  CHECK(!BatchShards::by_length_applies(trainer_options(lm).model));  // positions drawn for the batch's length
  lm.model.random_positions_max = 0;
  CHECK(BatchShards::by_length_applies(trainer_options(lm).model));
}
