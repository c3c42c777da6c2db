// train.batch_shards = S > 1: each micro-batch's rows are cut into S shards, each shard runs forward
// and backward on a replica of the model of its own, up to train.threads shards at once (one thread
// each), and the replicas' gradients are summed into the model's in shard order before the step.
//
// Why: a small model's step is hundreds of ops, each too short to share between threads (a parallel
// region's handover costs about what the op computes: train/trainer/thread_policy.h), so inside the
// ops a second core does not pay. Whole half-batches do: the default model's step on two shards at
// two threads takes about 0.6x the time of the whole batch on one (docs/benchmarks.md, "Batch
// shards"). The same idea as data-parallel ranks (train/trainer/distributed.h) inside one process.
//
// The replicas share the model's parameters and buffers (the same storage, Tensor::set_data), so the
// optimizer's in-place update reaches all of them; each has a .grad of its own, so no two threads add
// into one tensor. Results are the same bits at any thread count: shard s always runs on replica s,
// the gradients and losses are summed in shard order, and each shard draws its dropout masks from its
// own copy of the step's generator, numbered by the shard's rows as in the whole batch (core/rng.h,
// set_row_shard). Against batch_shards = 1 only the order of the sums over rows differs.
//
// train.shard_by_length: a batch is padded to its longest row, so a shard of rows cut in batch order
// computes nearly the whole batch's padded width too. Ordered by length instead (stable), the rows are
// cut into runs whose padded costs, rows × (longest source + longest target), are as even as they can
// be, and each shard is padded only to its own longest row: the short rows share one shard, and the
// step computes fewer padded positions (the default run's: 0.82x in all, 0.84x in the larger shard).
// Each row's outputs are those of the whole batch where they do not depend on the batch's padded
// lengths: every positional scheme in every place (tests/test_batch_shards.cpp sweeps them), but not
// cross-attention aligned right or scaled (π(i) = i + t1 − t2 or i · t1 / t2: the padded lengths),
// explicit target positions (laid on the whole batch's axis) or random positions (drawn for the batch's
// length). There the rows are cut in order, as without it (by_length_applies). Dropout masks are
// numbered by a row's place in the length order and by the shard's own widths: other draws than the
// whole batch's, the same at any thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "train/data/dataset.h"
#include "train/trainer/distributed.h"
#include "train/trainer/run.h"

namespace relgrad {

class BatchShards {
 public:
  // Forward and backward of one shard on one replica; returns the shard's loss (a number to sum).
  using ShardStep = std::function<double(RunModel& replica, const Batch& shard)>;

  // Replica 0 is `model` itself; builds `shards` - 1 more from `options` (the model's own) on its device.
  // `by_length`: train.shard_by_length (above), where by_length_applies.
  BatchShards(RunModel& model, const ModelOptions& options, int64_t shards, bool by_length = false);
  int64_t count() const { return static_cast<int64_t>(replicas_.size()); }

  // Whether the shards may run side by side in this process: not under an address-space limit
  // (RLIMIT_AS: `ulimit -v`, `prlimit --as`), the one place where a failed allocation is an error
  // rather than the kernel's OOM killer. There, OpenBLAS retries a work buffer it cannot map forever,
  // so a shard whose first product came after the other shard had taken the rest hung
  // instead of ending with relgrad's out-of-memory error (tests/test_oom.cpp). One after another, the
  // same bits.
  static bool side_by_side_allowed();
  // Whether train.shard_by_length can cut this model's batches by length (above).
  static bool by_length_applies(const ModelOptions& options);

  // Before a step: the replicas (not the model: the optimizer zeroes its .grad) drop their
  // gradients and take the model's training mode.
  void start_step();
  // `batch` holds the step's whole batch from row `first_row` on (0; with several ranks, where this
  // rank's rows begin). Cuts it into count() shards (at most one per row), runs `step` on each (shard s on replica s) on up
  // to `threads` threads, and returns the sum of their losses in shard order. A shard's error is
  // rethrown once every shard has finished (the lowest shard's).
  double forward_backward(const Batch& batch, int64_t first_row, int threads, const ShardStep& step);
  // After the step's micro-batches: every replica's .grad added into the model's, in shard order,
  // the parameters shared out to up to `threads` threads (each sum elementwise: the same bits on any).
  void sum_gradients(int threads);
  // evaluate() (train/trainer/run.h) with the held-out batches scored side by side on the replicas,
  // up to `threads` at once: the same result, bit for bit (each batch is scored as on one thread, the
  // scores added in batch order).
  EvalResult evaluate(const Dataset& data, int64_t batches, Communicator* comm, int threads);

 private:
  std::vector<std::shared_ptr<RunModel>> replicas_;  // [0] does not own: it is the model itself
  std::vector<TensorList> params_;                   // params_[s]: replica s's, in the model's order
  bool by_length_ = false;
};

// Each row's length under its padding mask (bool (B, T), true = PAD): one past its last real token; T
// for every row where the mask is undefined.
std::vector<int64_t> row_lengths(const Tensor& padding_mask, int64_t rows, int64_t width);
// train.shard_by_length's cut of rows with these source and target lengths (decoder-only: sources of
// 0) into `shards` runs, each of at least one row: the rows ordered by source + target length (ties in
// row order), then cut into contiguous runs of that order so that the largest run's padded cost,
// rows × (its longest source + its longest target), is the least any such cut gives. Each run's rows
// in that order.
std::vector<std::vector<int64_t>> shards_by_length(const std::vector<int64_t>& src_lengths,
                                                   const std::vector<int64_t>& tgt_lengths, int64_t shards);
// The rows of `batch` named by `rows`, in that order, every tensor cut to the longest of them:
// `src_lengths` and `tgt_lengths` are every row's (row_lengths; decoder-only: tgt_lengths alone).
Batch gather_rows(const Batch& batch, const std::vector<int64_t>& rows, const std::vector<int64_t>& src_lengths,
                  const std::vector<int64_t>& tgt_lengths);

}  // namespace relgrad
