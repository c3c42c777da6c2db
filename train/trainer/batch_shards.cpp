// Batch shards: replicas that share the model's weights, one shard of rows each (see batch_shards.h).
#include "train/trainer/batch_shards.h"

#include <sys/resource.h>

#include <algorithm>
#include <exception>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/base/error.h"
#include "core/parallel_tasks.h"
#include "core/rng.h"
#include "layers/module.h"

namespace relgrad {

bool BatchShards::side_by_side_allowed() {
  struct rlimit limit {};
  return ::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY;
}

bool BatchShards::by_length_applies(const ModelOptions& options) {
  if (options.config.random_positions_max > 0) return false;
  return options.type == ModelKind::DecoderOnly || options.config.cross_alignment == CrossAlignment::Left;
}

BatchShards::BatchShards(RunModel& model, const ModelOptions& options, int64_t shards, bool by_length)
    : by_length_(by_length && by_length_applies(options)) {
  RG_CHECK(shards >= 1, "train", "train.batch_shards must be >= 1, got ", shards);
  replicas_.push_back(std::shared_ptr<RunModel>(&model, [](RunModel*) {}));
  params_.push_back(model.module->parameters());
  const auto named = model.module->named_parameters();
  const auto buffers = model.module->named_buffers();
  for (int64_t s = 1; s < shards; ++s) {
    Generator unused(0);  // the replica's own initial values are replaced by the model's below
    std::shared_ptr<RunModel> r = build_model(options, &unused);
    auto r_named = r->module->named_parameters();
    auto r_buffers = r->module->named_buffers();
    RG_CHECK(r_named.size() == named.size() && r_buffers.size() == buffers.size(), "train",
             "train.batch_shards: a replica of the model has ", r_named.size(), " parameters and ", r_buffers.size(),
             " buffers, the model ", named.size(), " and ", buffers.size());
    for (size_t i = 0; i < named.size(); ++i) {
      RG_CHECK(r_named[i].first == named[i].first, "train", "train.batch_shards: the replica's parameter ", i, " is '",
               r_named[i].first, "', the model's '", named[i].first, "'");
      r_named[i].second.set_data(named[i].second);  // the same storage: one update reaches every replica
    }
    for (size_t i = 0; i < buffers.size(); ++i) r_buffers[i].second.set_data(buffers[i].second);
    r->device = model.device;
    params_.push_back(r->module->parameters());
    replicas_.push_back(std::move(r));
  }
}

void BatchShards::start_step() {
  for (size_t s = 1; s < replicas_.size(); ++s) {
    for (Tensor& p : params_[s]) p.set_grad(Tensor());  // Module::zero_grad, without listing them again
    replicas_[s]->module->train();
  }
}

double BatchShards::forward_backward(const Batch& batch, int64_t first_row, int threads, const ShardStep& step) {
  const int64_t batch_rows = (batch.decoder_only() ? batch.tokens : batch.src).size(0);
  const int64_t n = std::min(count(), batch_rows);  // at most one shard per row, as train.batch_shards says
  // Each shard draws from a copy of the step's generator, its dropout numbered by its rows of the
  // whole batch; every shard makes the same draws, so the step's generator then moves on as one did.
  Generator& step_generator = default_generator();
  std::vector<Generator> generators(static_cast<size_t>(n), step_generator);
  std::vector<Batch> shards(static_cast<size_t>(n));
  if (by_length_) {
    const bool lm = batch.decoder_only();
    const std::vector<int64_t> src = lm ? std::vector<int64_t>(static_cast<size_t>(batch_rows), 0)
                                        : row_lengths(batch.src_padding_mask, batch_rows, batch.src.size(1));
    const std::vector<int64_t> tgt = lm ? row_lengths(batch.padding_mask, batch_rows, batch.tokens.size(1))
                                        : row_lengths(batch.tgt_padding_mask, batch_rows, batch.tgt_in.size(1));
    int64_t begin = 0;  // the shard's first place in the length order, which numbers its dropout rows
    const std::vector<std::vector<int64_t>> plan = shards_by_length(src, tgt, n);
    for (int64_t s = 0; s < n; ++s) {
      shards[s] = gather_rows(batch, plan[s], src, tgt);
      const int64_t rows = static_cast<int64_t>(plan[s].size());
      generators[s].set_row_shard(first_row + begin, rows);
      begin += rows;
    }
  } else {
    for (int64_t s = 0; s < n; ++s) {
      const RowRange part = shard_rows(batch_rows, static_cast<int>(s), static_cast<int>(n));
      shards[s] = shard_batch(batch, part);
      generators[s].set_row_shard(first_row + part.begin, part.rows());
    }
  }
  std::vector<double> losses(static_cast<size_t>(n), 0.0);
  parallel_tasks(n, threads, [&](int64_t s, int) {
    DefaultGeneratorGuard draws(generators[s]);
    losses[s] = step(*replicas_[s], shards[s]);  // shard s on replica s, whichever thread runs it
  });
  for (const Generator& g : generators)
    RG_CHECK(g.offset() == generators[0].offset(), "train", "train.batch_shards: the shards drew ",
             generators[0].offset() - step_generator.offset(), " and ", g.offset() - step_generator.offset(),
             " times from the generator; a model's draws must not depend on its rows");
  step_generator.set_state(step_generator.seed(), generators[0].offset());
  double total = 0.0;
  for (double l : losses) total += l;
  return total;
}

namespace {
// Two CPU float32 gradients of one layout, which sum_gradients adds element by element itself: the
// default run's 92 parameters as add_ ops (each out of place, then copied back) took 0.22-0.30 ms a
// step, as plain loops 0.15 (docs/benchmarks.md, "The step's tail, the heads' merge and the shards'
// balance").
bool adds_in_place(const Tensor& sum, const Tensor& g) {
  return sum.device().is_cpu() && g.device().is_cpu() && sum.dtype() == kFloat32 && g.dtype() == kFloat32 &&
         sum.is_contiguous() && g.is_contiguous() && sum.shape() == g.shape();
}
}  // namespace

void BatchShards::sum_gradients(int threads) {
  TensorList& mine = params_[0];
  // One parameter a task: most are too small to share out inside, and side by side the default run's
  // sums took 0.6-0.7x the time of one after another (docs/benchmarks.md, "The programs' malloc").
  parallel_tasks(static_cast<int64_t>(mine.size()), threads, [&](int64_t i, int) {
    NoGradGuard no_grad;  // grad mode is per thread
    for (size_t s = 1; s < params_.size(); ++s) {
      const Tensor g = params_[s][static_cast<size_t>(i)].grad();
      if (!g.defined()) continue;  // no gradient in that shard (as a parameter no loss reached)
      Tensor sum = mine[static_cast<size_t>(i)].grad();
      if (!sum.defined()) {
        mine[static_cast<size_t>(i)].set_grad(g.clone());
      } else if (adds_in_place(sum, g)) {  // add_'s arithmetic (float32 a + b), without an op's dispatch
        float* to = sum.data_ptr<float>();
        const float* from = g.data_ptr<float>();
        for (int64_t k = 0, n = sum.numel(); k < n; ++k) to[k] += from[k];
        sum.bump_version();
      } else {
        sum.add_(g);
      }
    }
  });
}

EvalResult BatchShards::evaluate(const Dataset& data, int64_t batches, Communicator* comm, int threads) {
  std::vector<Batch> held_out;  // built here, on one thread: a Dataset is not asked to be thread-safe
  for (int64_t n = 0; n < batches; ++n)
    if (!comm || n % comm->size() == comm->rank()) held_out.push_back(data.batch(n, Split::HeldOut));
  std::vector<std::unique_ptr<EvalScope>> eval_mode;
  for (const auto& r : replicas_) eval_mode.push_back(std::make_unique<EvalScope>(*r->module));
  std::vector<BatchScore> scores(held_out.size());
  // Thread t scores on replica t (each batch gives the same bits on any replica), so at most count() threads.
  parallel_tasks(static_cast<int64_t>(held_out.size()), static_cast<int>(std::min<int64_t>(threads, count())),
                 [&](int64_t i, int thread) {
                   NoGradGuard no_grad;  // grad mode is per thread
                   scores[i] = score_batch(*replicas_[static_cast<size_t>(thread)], held_out[i]);
                 });
  return eval_result(scores, data.rows_are_examples(), comm);
}

std::vector<int64_t> row_lengths(const Tensor& padding_mask, int64_t rows, int64_t width) {
  std::vector<int64_t> lengths(static_cast<size_t>(rows), width);
  if (!padding_mask.defined()) return lengths;
  RG_CHECK(padding_mask.dim() == 2 && padding_mask.size(0) == rows && padding_mask.size(1) == width, "train",
           "train.shard_by_length: a padding mask of shape ", shape_str(padding_mask.shape()), " for ", rows,
           " rows of ", width, " positions");
  const std::vector<int64_t> pad = padding_mask.to(kInt64).contiguous().to_vector<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t n = width;
    while (n > 0 && pad[static_cast<size_t>(r * width + n - 1)] != 0) --n;
    lengths[static_cast<size_t>(r)] = n;
  }
  return lengths;
}

std::vector<std::vector<int64_t>> shards_by_length(const std::vector<int64_t>& src_lengths,
                                                   const std::vector<int64_t>& tgt_lengths, int64_t shards) {
  const int64_t rows = static_cast<int64_t>(src_lengths.size());
  RG_CHECK(static_cast<int64_t>(tgt_lengths.size()) == rows && shards >= 1 && shards <= rows, "train",
           "train.shard_by_length: ", rows, " source and ", tgt_lengths.size(), " target lengths cut into ", shards,
           " shards (at least one row each)");
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) order[static_cast<size_t>(r)] = r;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return src_lengths[a] + tgt_lengths[a] < src_lengths[b] + tgt_lengths[b];
  });
  // Runs made greedily, each as long as its cost stays within `limit` (a run's cost only grows as it
  // takes the next row, so the greedy cut has the fewest runs under the limit); their first places.
  auto cut = [&](int64_t limit) {
    std::vector<int64_t> starts{0};
    int64_t longest_src = 0, longest_tgt = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = order[static_cast<size_t>(i)];
      const int64_t s = std::max(longest_src, src_lengths[r]), t = std::max(longest_tgt, tgt_lengths[r]);
      if ((i - starts.back() + 1) * (s + t) > limit && i > starts.back()) {
        starts.push_back(i);
        longest_src = src_lengths[r], longest_tgt = tgt_lengths[r];
      } else {
        longest_src = s, longest_tgt = t;
      }
    }
    return starts;
  };
  // The least limit that needs at most `shards` runs: a binary search up to the whole batch's cost.
  const int64_t longest_src = *std::max_element(src_lengths.begin(), src_lengths.end());
  const int64_t longest_tgt = *std::max_element(tgt_lengths.begin(), tgt_lengths.end());
  int64_t lo = 0, hi = rows * (longest_src + longest_tgt);
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<int64_t>(cut(mid).size()) <= shards) hi = mid;
    else lo = mid + 1;
  }
  std::vector<int64_t> starts = cut(lo);
  // Fewer runs than shards (a cut of fewer runs can be as even): the run of most rows is halved until
  // there are enough; halving a run lowers no other run's cost and raises none.
  while (static_cast<int64_t>(starts.size()) < shards) {
    size_t widest = 0;
    int64_t widest_rows = 0;
    for (size_t k = 0; k < starts.size(); ++k) {
      const int64_t end = k + 1 < starts.size() ? starts[k + 1] : rows;
      if (end - starts[k] > widest_rows) widest = k, widest_rows = end - starts[k];
    }
    starts.insert(starts.begin() + static_cast<std::ptrdiff_t>(widest) + 1, starts[widest] + (widest_rows + 1) / 2);
  }
  std::vector<std::vector<int64_t>> runs;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t end = k + 1 < starts.size() ? starts[k + 1] : rows;
    runs.emplace_back(order.begin() + starts[k], order.begin() + end);
  }
  return runs;
}

Batch gather_rows(const Batch& batch, const std::vector<int64_t>& rows, const std::vector<int64_t>& src_lengths,
                  const std::vector<int64_t>& tgt_lengths) {
  const Tensor index = from_vector<int64_t>(rows, {static_cast<int64_t>(rows.size())});
  // The rows, cut to the longest of `lengths` among them (at least one position, where every row is
  // empty), contiguous: a shard's tensors are its own, as shard_batch's views of whole rows are laid out.
  auto take = [&](const Tensor& t, const std::vector<int64_t>& lengths) {
    if (!t.defined()) return t;
    int64_t width = 1;
    for (int64_t r : rows) width = std::max(width, lengths[static_cast<size_t>(r)]);
    return index_select(t, 0, index).narrow(1, 0, std::min(width, t.size(1))).contiguous();
  };
  Batch s;
  if (batch.decoder_only()) {
    s.tokens = take(batch.tokens, tgt_lengths);
    s.targets = take(batch.targets, tgt_lengths);
    s.padding_mask = take(batch.padding_mask, tgt_lengths);
  } else {
    s.src = take(batch.src, src_lengths);
    s.src_padding_mask = take(batch.src_padding_mask, src_lengths);
    s.tgt_in = take(batch.tgt_in, tgt_lengths);
    s.tgt_out = take(batch.tgt_out, tgt_lengths);
    s.tgt_padding_mask = take(batch.tgt_padding_mask, tgt_lengths);
    s.tgt_positions = batch.tgt_positions.defined() ? batch.tgt_positions.narrow(0, 0, s.tgt_in.size(1))
                                                    : batch.tgt_positions;
  }
  s.num_targets = count_targets((s.decoder_only() ? s.targets : s.tgt_out).contiguous().to_vector<int64_t>());
  return s;
}

}  // namespace relgrad
