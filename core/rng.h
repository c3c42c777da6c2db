// Generator: the state of a Philox stream, (seed, offset). Each draw (rand, randn, dropout mask, ...)
// uses the current offset for all its elements and then advances it by one, so a draw's numbers
// depend only on the seed and on how many draws came before it, never on thread count or device.
#pragma once
#include <cstdint>

namespace relgrad {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  // Restores a saved state (for checkpoints).
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // The offset to use for the next draw; advances the state.
  uint64_t next_offset() { return offset_++; }
  // Data parallelism (train/trainer/distributed.h): this process holds rows [row_begin, row_begin + rows) of
  // the job's batch. Dropout then numbers the n elements of a batch-major tensor from
  // row_begin * n / rows, so each row draws the mask it would draw in the whole batch in one process.
  // rows = 0 (the default): no shard. Not part of the saved state.
  void set_row_shard(int64_t row_begin, int64_t rows) { shard_begin_ = row_begin; shard_rows_ = rows; }
  int64_t shard_rows() const { return shard_rows_; }
  uint64_t element_base(int64_t numel) const {
    return shard_rows_ > 0 ? static_cast<uint64_t>(shard_begin_ * (numel / shard_rows_)) : 0;
  }

 private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
  int64_t shard_begin_ = 0, shard_rows_ = 0;
};

// The process-wide default generator (used when an op is given none). Not thread-safe: seed and
// draw from one thread, as in PyTorch's default CPU generator usage; work split over threads gives
// each thread a generator of its own through DefaultGeneratorGuard.
Generator& default_generator();

// While alive, default_generator() on this thread is `generator` (the caller keeps it alive): the
// batch shards of one training step, run on several threads, each draw from a copy of the step's
// generator (train/trainer/batch_shards.cpp). Restores the previous one (this thread's or none).
class DefaultGeneratorGuard {
 public:
  explicit DefaultGeneratorGuard(Generator& generator);
  ~DefaultGeneratorGuard();
  DefaultGeneratorGuard(const DefaultGeneratorGuard&) = delete;
  DefaultGeneratorGuard& operator=(const DefaultGeneratorGuard&) = delete;

 private:
  Generator* previous_;
};
// Seeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace relgrad
