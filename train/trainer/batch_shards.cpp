// Batch shards: replicas that share the model's weights, one shard of rows each (see batch_shards.h).
#include "train/trainer/batch_shards.h"

#include <sys/resource.h>

#include <algorithm>
#include <exception>

#include "autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/parallel_tasks.h"
#include "core/rng.h"
#include "layers/module.h"

namespace relgrad {

bool BatchShards::side_by_side_allowed() {
  struct rlimit limit {};
  return ::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY;
}

BatchShards::BatchShards(RunModel& model, const ModelOptions& options, int64_t shards) {
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
    replicas_[s]->module->zero_grad();
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
  for (int64_t s = 0; s < n; ++s) {
    const RowRange part = shard_rows(batch_rows, static_cast<int>(s), static_cast<int>(n));
    shards[s] = shard_batch(batch, part);
    generators[s].set_row_shard(first_row + part.begin, part.rows());
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

void BatchShards::sum_gradients() {
  NoGradGuard no_grad;
  TensorList& mine = params_[0];
  for (size_t i = 0; i < mine.size(); ++i) {
    for (size_t s = 1; s < params_.size(); ++s) {
      const Tensor g = params_[s][i].grad();
      if (!g.defined()) continue;  // no gradient in that shard (as a parameter no loss reached)
      Tensor sum = mine[i].grad();
      if (sum.defined()) sum.add_(g);
      else mine[i].set_grad(g.clone());
    }
  }
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

}  // namespace relgrad
