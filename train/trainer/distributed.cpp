// Data parallelism: the single-process communicator, the job's world, tensor helpers, row shards and
// the gradient reducer (see distributed.h). The MPI and NCCL backends live in distributed_mpi.cpp
// and distributed_nccl.cpp, compiled in only with RELGRAD_MPI / RELGRAD_NCCL.
#include "train/trainer/distributed.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "core/base/error.h"
#include "core/file_io.h"
#include "core/rng.h"

namespace relgrad {

#if RELGRAD_WITH_MPI
// distributed_mpi.cpp
std::unique_ptr<Communicator> make_mpi_world();
void finalize_mpi();
#endif

namespace {

class SingleCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "single"; }
  int64_t start_all_reduce_sum(void*, int64_t, DType dtype) override {
    RG_CHECK(is_floating(dtype), "distributed", "all_reduce_sum of ", dtype_name(dtype), " values");
    return 0;
  }
  void wait(int64_t) override {}
  void broadcast(void*, int64_t, int root) override {
    RG_CHECK(root == 0, "distributed", "broadcast from rank ", root, " of 1");
  }
  void barrier() override {}
};

SingleCommunicator& single_world() {
  static SingleCommunicator single;
  return single;
}

Communicator* g_world = nullptr;                 // set by init_world
std::unique_ptr<Communicator> g_world_owner;

// The number of processes an MPI launcher started, from its environment: Open MPI's mpirun, or a
// PMI launcher (MPICH's hydra, Slurm); 1 when launched with an unknown count (PMIx), 0 when not.
int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  return std::getenv("PMIX_RANK") ? 1 : 0;
}

}  // namespace

std::string Communicator::where() const {
  return "rank " + std::to_string(rank()) + " of " + std::to_string(size());
}

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

bool mpi_built() {
#if RELGRAD_WITH_MPI
  return true;
#else
  return false;
#endif
}

Communicator& init_world() {
  if (g_world) return *g_world;
  const int launched = launched_size();
#if RELGRAD_WITH_MPI
  if (launched > 0) {
    g_world_owner = make_mpi_world();
    g_world = g_world_owner.get();
    return *g_world;
  }
#else
  RG_CHECK(launched <= 1, "distributed", "started as one of ", launched,
           " processes by mpirun, but this relgrad was built without MPI (RELGRAD_MPI=OFF, or no MPI found at "
           "build time): install libopenmpi-dev and rebuild (docs/distributed.md)");
#endif
  g_world = &single_world();
  return *g_world;
}

Communicator& world() { return g_world ? *g_world : single_world(); }

int finish_world(int code) {
  if (!g_world_owner) return code;
  // An error (1..127) on one rank: the others may wait for it in a collective, so end them all. An
  // agreed stop (128 + signal, every rank returns it) and success finalise normally.
  if (code > 0 && code < 128 && g_world_owner->size() > 1) {
    // The abort kills every rank at once, mid-message too. When the ranks fail together (rank 0 could
    // not lock train.out_dir, and told the others), rank 0's error says why and the others' only point
    // to it: a rank other than 0 waits a moment, so that rank 0 has printed its error before any abort.
    if (!g_world_owner->is_root()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    g_world_owner->abort_job(code);  // does not return
  }
  g_world_owner.reset();  // before MPI_Finalize: the MPI communicator frees what it holds
  g_world = nullptr;
#if RELGRAD_WITH_MPI
  finalize_mpi();
#endif
  return code;
}

// ---- tensors ------------------------------------------------------------------------------------
void all_reduce_sum(Communicator& comm, const Tensor& t) {
  RG_CHECK(t.defined() && t.is_contiguous() && is_floating(t.dtype()), "distributed",
           "all_reduce_sum needs a contiguous float tensor");
  comm.wait(comm.start_all_reduce_sum(t.raw_data(), t.numel(), t.dtype()));
}

void broadcast(Communicator& comm, const Tensor& t, int root) {
  RG_CHECK(t.defined() && t.is_contiguous(), "distributed", "broadcast needs a contiguous tensor");
  comm.broadcast(t.raw_data(), t.numel() * static_cast<int64_t>(dtype_size(t.dtype())), root);
}

void check_same(Communicator& comm, uint64_t value, const std::string& what) {
  if (comm.size() == 1) return;
  uint64_t root_value = value;
  comm.broadcast(&root_value, sizeof root_value, 0);
  const bool differs = root_value != value;
  const double differing = comm.all_reduce_sum(differs ? 1.0 : 0.0);
  if (differing == 0.0) return;
  if (differs)
    throw Error("[distributed] " + comm.where() + ": " + what + " is not the same as on rank 0 (" +
                std::to_string(value) + " here, " + std::to_string(root_value) + " there)");
  throw Error("[distributed] " + comm.where() + ": " + what + " is not the same on every rank (" +
              std::to_string(static_cast<int64_t>(differing)) + " of " + std::to_string(comm.size()) +
              " ranks differ from rank 0)");
}

uint64_t parameters_checksum(const TensorList& params) {
  uint64_t h = fnv1a64(nullptr, 0);
  for (const Tensor& p : params) {
    Tensor c = p.contiguous();
    h = fnv1a64(c.raw_data(), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()), h);
  }
  return h;
}

int agree_on_stop(Communicator& comm, int signal) {
  if (comm.size() == 1) return signal;
  double seen[2] = {signal != 0 ? 1.0 : 0.0, static_cast<double>(signal)};
  comm.all_reduce_sum(seen, 2);
  if (signal != 0 || seen[0] == 0) return signal;
  return static_cast<int>(seen[1] / seen[0]);  // the signal the others saw (their mean, if they differ)
}

void root_does(Communicator& comm, const std::string& what, const std::function<void()>& action) {
  std::exception_ptr failed;
  if (comm.is_root()) {
    try {
      action();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (comm.size() > 1 && comm.all_reduce_sum(failed ? 1.0 : 0.0) > 0 && !failed)
    throw Error("[train] rank 0 could not " + what + " (rank 0's error says why)");
  if (failed) std::rethrow_exception(failed);
}

// ---- row shards -----------------------------------------------------------------------------------
RowRange shard_rows(int64_t rows, int rank, int size) {
  RG_CHECK(size >= 1 && rank >= 0 && rank < size, "distributed", "rank ", rank, " of ", size);
  RG_CHECK(rows >= size, "distributed", "a batch of ", rows, " rows cannot be shared by ", size,
           " ranks (each needs at least one row): raise data.batch_size or use fewer ranks");
  return {rows * rank / size, rows * (rank + 1) / size};
}

Batch shard_batch(const Batch& batch, RowRange range) {
  auto rows = [&](const Tensor& t) { return t.defined() ? t.narrow(0, range.begin, range.rows()) : t; };
  Batch s;
  s.src = rows(batch.src);
  s.tgt_in = rows(batch.tgt_in);
  s.tgt_out = rows(batch.tgt_out);
  s.src_padding_mask = rows(batch.src_padding_mask);
  s.tgt_padding_mask = rows(batch.tgt_padding_mask);
  s.tgt_positions = batch.tgt_positions;  // (t2), the same for every row: each shard keeps it whole
  s.tokens = rows(batch.tokens);
  s.targets = rows(batch.targets);
  s.padding_mask = rows(batch.padding_mask);
  const Tensor& targets = s.decoder_only() ? s.targets : s.tgt_out;
  s.num_targets = count_targets(targets.contiguous().to_vector<int64_t>());
  return s;
}

RowShardGuard::RowShardGuard(RowRange range) { default_generator().set_row_shard(range.begin, range.rows()); }
RowShardGuard::~RowShardGuard() { default_generator().set_row_shard(0, 0); }

// ---- GradientReducer ------------------------------------------------------------------------------
GradientReducer::GradientReducer(Communicator& comm, TensorList params, int64_t bucket_bytes) : comm_(comm) {
  for (const Tensor& p : params)  // a tied tensor once
    if (std::none_of(params_.begin(), params_.end(), [&](const Tensor& q) { return q.same(p); })) params_.push_back(p);
  RG_CHECK(!params_.empty(), "distributed", "GradientReducer: no parameters");
  dtype_ = params_[0].dtype();
  for (const Tensor& p : params_)
    RG_CHECK(p.dtype() == dtype_ && is_floating(dtype_) && p.device().is_cpu(), "distributed",
             "GradientReducer: parameters must be CPU tensors of one float dtype (", dtype_name(dtype_), " and ",
             dtype_name(p.dtype()), " on ", p.device().str(), ")");
  const int64_t elem = static_cast<int64_t>(dtype_size(dtype_));
  Bucket current;
  auto close = [&] {
    if (current.params.empty()) return;
    current.values += static_cast<int64_t>(current.params.size());  // the flags
    current.buffer.resize(static_cast<size_t>(current.values * elem));
    bytes_ += current.values * elem;
    buckets_.push_back(std::move(current));
    current = Bucket();
  };
  for (size_t i = params_.size(); i-- > 0;) {
    current.params.push_back(i);
    current.values += params_[i].numel();
    if (current.values * elem >= bucket_bytes) close();
  }
  close();
}

// The bucket's layout, walked both ways: pack copies each gradient in (zeros where it is undefined)
// and sets its flag; unpack copies the sums back to each gradient defined on some rank.
void GradientReducer::transfer(Bucket& b, bool pack) {
  dispatch_float(dtype_, "distributed", [&](auto zero) {
    using T = decltype(zero);
    T* at = reinterpret_cast<T*>(b.buffer.data());
    T* flags = at + b.values - static_cast<int64_t>(b.params.size());
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      Tensor g(p.impl()->grad);
      const size_t bytes = static_cast<size_t>(p.numel()) * sizeof(T);
      if (pack) {
        if (g.defined()) std::memcpy(at, g.contiguous().data_ptr<T>(), bytes);
        else std::fill(at, at + p.numel(), T(0));
        flags[k] = g.defined() ? T(1) : T(0);
      } else if (flags[k] > T(0)) {  // defined on some rank: the sum (zeros stood in for the others)
        if (!g.defined() || !g.is_contiguous()) {  // else overwritten in place: .grad is owned by its parameter
          g = empty(p.shape(), TensorOptions(dtype_));
          p.impl()->grad = g.impl_ptr();
        }
        std::memcpy(g.data_ptr<T>(), at, bytes);
      }
      at += p.numel();
    }
  });
}

void GradientReducer::reduce() {
  if (comm_.size() == 1) return;
  for (Bucket& b : buckets_) {
    transfer(b, /*pack=*/true);
    b.handle = comm_.start_all_reduce_sum(b.buffer.data(), b.values, dtype_);
  }
  for (Bucket& b : buckets_) {
    comm_.wait(b.handle);
    b.handle = -1;
    transfer(b, /*pack=*/false);
  }
}

}  // namespace relgrad
