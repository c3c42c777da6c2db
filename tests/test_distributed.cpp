// Data parallelism without MPI (train/trainer/distributed.h): the row shards, the rank-aware dropout stream,
// the gradient reducer's packing (against a scripted stand-in for the other ranks) and the
// single-process communicator. tests/test_distributed_mpi.cpp runs the real thing under mpirun.
#include <doctest/doctest.h>

#include <map>

#include "testing.h"
#include "train/trainer/distributed.h"
#include "train/trainer/trainer.h"
#include "trainer_testing.h"

using namespace relgrad;
using relgrad::testing::bitwise_equal;

namespace {

// Rank 0 of `size` whose all_reduce_sum adds what the scripted other ranks send: `others(data, n)`
// adds their contributions in place. Lets the reducer's packing be checked in one process.
class ScriptedCommunicator : public Communicator {
 public:
  ScriptedCommunicator(int size, std::function<void(double*, int64_t)> others) : size_(size), others_(std::move(others)) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  const char* backend() const override { return "scripted"; }
  int64_t start_all_reduce_sum(void* data, int64_t n, DType dtype) override {
    ++reductions;
    values += n;
    dispatch_float(dtype, "scripted", [&](auto zero) {
      using T = decltype(zero);
      T* p = static_cast<T*>(data);
      std::vector<double> d(p, p + n);
      others_(d.data(), n);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(d[i]);
    });
    return reductions;
  }
  void wait(int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  int64_t reductions = 0, values = 0;

 private:
  int size_;
  std::function<void(double*, int64_t)> others_;
};

Tensor param(const Shape& shape, DType dt, uint64_t seed) {
  Tensor p = relgrad::testing::uniform(shape, -1, 1, dt, seed);
  p.requires_grad_(true);
  return p;
}

}  // namespace

TEST_CASE("distributed: shard_rows splits a batch into contiguous, nearly equal row ranges") {
  for (int size : {1, 2, 3, 5})
    for (int64_t rows : {5, 7, 32}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        RowRange range = shard_rows(rows, r, size);
        CHECK(range.begin == next);
        CHECK(range.rows() >= rows / size);
        CHECK(range.rows() <= rows / size + 1);
        next = range.end;
      }
      CHECK(next == rows);
    }
  relgrad::testing::check_throws_with([] { shard_rows(3, 0, 4); }, "a batch of 3 rows cannot be shared by 4 ranks");
}

TEST_CASE("distributed: shard_batch keeps the padded lengths, and the shards' targets add up to the batch's") {
  RunConfig c = relgrad::testing::tiny_ed("unused");
  c.data.batch_size = 7;
  c.derive_from_data();
  RunData data(c);
  for (bool decoder_only : {false, true}) {
    if (decoder_only) {
      c.model_type = ModelKind::DecoderOnly;
      c.derive_from_data();
    }
    RunData d(c);
    Batch whole = d.batch(3, Split::Train);
    const Tensor& targets = RunModel::targets(whole);
    int64_t sum = 0;
    for (int r = 0; r < 3; ++r) {
      RowRange range = shard_rows(7, r, 3);
      Batch s = shard_batch(whole, range);
      const Tensor& t = RunModel::targets(s);
      CHECK(t.size(0) == range.rows());
      CHECK(t.size(1) == targets.size(1));  // the whole batch's padded length, not the shard's
      CHECK(bitwise_equal(t, targets.narrow(0, range.begin, range.rows())));
      sum += s.num_targets;
    }
    CHECK(sum == whole.num_targets);
  }
}

TEST_CASE("distributed: under a row shard, dropout gives each row the mask it gets in the whole batch") {
  for (Shape shape : {Shape{7, 5, 6}, Shape{7, 2, 4, 4}}) {
    Tensor x = relgrad::testing::uniform(shape, 1, 2, kFloat32, 9);
    Generator whole_gen(42), shard_gen(42);
    Tensor whole = dropout(x, 0.5, true, &whole_gen);
    for (int r = 0; r < 3; ++r) {
      RowRange range = shard_rows(7, r, 3);
      Generator g(42);
      g.set_row_shard(range.begin, range.rows());
      Tensor part = dropout(x.narrow(0, range.begin, range.rows()), 0.5, true, &g);
      CHECK_MESSAGE(bitwise_equal(part, whole.narrow(0, range.begin, range.rows()).contiguous()), "rank ", r,
                    " of 3, shape ", shape_str(shape));
      // Without the shard the rows would draw the whole batch's first rows instead: the test can fail.
      if (range.begin > 0) {
        Generator plain(42);
        Tensor unshifted = dropout(x.narrow(0, range.begin, range.rows()), 0.5, true, &plain);
        CHECK_FALSE(bitwise_equal(unshifted, part));
      }
    }
  }
  // The guard sets and clears the default generator's shard.
  {
    RowShardGuard guard({2, 5});
    CHECK(default_generator().shard_rows() == 3);
    CHECK(default_generator().element_base(12) == 8);  // row 2 of 4-element rows
  }
  CHECK(default_generator().shard_rows() == 0);
  CHECK(default_generator().element_base(12) == 0);
}

TEST_CASE("distributed: GradientReducer sums gradients across ranks — undefined stays undefined only if so everywhere") {
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dt));
    TensorList params = {param({3, 4}, dt, 1), param({5}, dt, 2), param({2, 2}, dt, 3), param({6}, dt, 4)};
    // Gradients here for params 0, 1 and 3; param 2 gets none on this rank.
    for (size_t i : {0u, 1u, 3u}) params[i].set_grad(relgrad::testing::uniform(params[i].shape(), -1, 1, dt, 10 + i));
    std::vector<Tensor> mine;
    for (const Tensor& p : params) mine.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    // The other rank: gradient 0.5 everywhere for params 0 and 2, none for 1 and 3. With a 1-byte
    // bucket size every bucket holds one parameter and its "defined" flag: n = numel + 1, which
    // tells the script which parameter it is (12, 5, 4, 6 values).
    const std::map<int64_t, bool> other_has = {{13, true}, {6, false}, {5, true}, {7, false}};
    ScriptedCommunicator comm(2, [&](double* d, int64_t n) {
      REQUIRE(other_has.count(n) == 1);
      const bool has = other_has.at(n);
      for (int64_t j = 0; j + 1 < n; ++j) d[j] += has ? 0.5 : 0.0;
      d[n - 1] += has ? 1.0 : 0.0;
    });
    GradientReducer reducer(comm, params, /*bucket_bytes=*/1);  // one parameter per bucket
    CHECK(reducer.buckets() == 4);
    CHECK(reducer.bytes_per_reduce() == (27 + 4) * static_cast<int64_t>(dtype_size(dt)));
    reducer.reduce();
    CHECK(comm.reductions == 4);
    // param 0: mine + 0.5; param 1: mine; param 2: 0.5 (defined, from the other rank); param 3: mine.
    CHECK_CLOSE(params[0].grad(), add(mine[0], 0.5), 1e-7, 0);
    CHECK(bitwise_equal(params[1].grad(), mine[1]));
    REQUIRE(params[2].grad().defined());
    CHECK_CLOSE(params[2].grad(), full({2, 2}, 0.5, dt), 0, 0);
    CHECK(bitwise_equal(params[3].grad(), mine[3]));
  }
  // A gradient that no rank has stays undefined (the optimizer then skips the parameter, as in one process).
  Tensor p = param({4}, kFloat32, 5);
  ScriptedCommunicator nobody(3, [](double*, int64_t) {});
  GradientReducer reducer(nobody, {p});
  reducer.reduce();
  CHECK_FALSE(p.grad().defined());
}

TEST_CASE("distributed: one process needs no MPI: the single communicator, and a Trainer without a reducer") {
  Communicator& w = world();
  CHECK(w.size() == 1);
  CHECK(w.rank() == 0);
  CHECK(std::string(w.backend()) == "single");
  double v[2] = {1.5, -2.0};
  w.all_reduce_sum(v, 2);
  CHECK(v[0] == 1.5);
  CHECK(v[1] == -2.0);
  CHECK(agree_on_stop(w, 15) == 15);
  CHECK(agree_on_stop(w, 0) == 0);
  check_same(w, 7, "anything");  // nothing to compare with
  Trainer trainer(trainer_options(relgrad::testing::tiny_ed("unused")));
  CHECK(trainer.gradient_reducer() == nullptr);
  CHECK(&trainer.communicator() == &w);
  if (!nccl_built()) relgrad::testing::check_throws_with([] { make_nccl_communicator(world(), 0); }, "built without NCCL");
}

TEST_CASE("distributed: NCCL with one rank sums and broadcasts CUDA tensors in place (GPU smoke test)") {
  if (!nccl_built() || !cuda_available()) {
    MESSAGE("skipped: needs a GPU and relgrad built with NCCL (RELGRAD_NCCL)");
    return;
  }
  std::unique_ptr<Communicator> nccl = make_nccl_communicator(world(), 0);
  CHECK(std::string(nccl->backend()) == "nccl");
  CHECK(nccl->size() == 1);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor host = relgrad::testing::uniform({1000, 3}, -1, 1, dt, 3);
    Tensor device = host.to(Device::cuda(0));
    all_reduce_sum(*nccl, device);  // one rank: the sum is the tensor itself
    broadcast(*nccl, device, 0);
    CHECK(bitwise_equal(device.to(Device::cpu()), host));
  }
  double v = nccl->all_reduce_sum(2.5);  // a host value goes through the bootstrap communicator
  CHECK(v == 2.5);
}
