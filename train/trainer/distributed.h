// Data-parallel training (docs/distributed.md). N processes ("ranks", `mpirun -np N relgrad train`)
// each hold a replica of the model. Every step each rank builds the whole global batch (cheap: a
// batch is a pure function of (data seed, index), train/data/data.h), keeps rows
// [r·B/N, (r+1)·B/N) of it, and runs forward and backward on them with the loss divided by the
// loss tokens of the GLOBAL step; the gradients are then summed across ranks, so every rank takes
// exactly the optimizer step one process would take on the whole batch (up to float rounding of
// the sum). Ranks start from identical weights (broadcast from rank 0) and stay identical because
// they apply identical updates; only rank 0 writes logs and checkpoints.
//
// Communicator: rank, size and the collectives the trainer needs. Implementations:
//   single  one process (size 1): every collective returns at once. Always built.
//   mpi     OpenMPI (CMake RELGRAD_MPI): non-blocking MPI collectives polled against a deadline
//           (timeout(), the config's train.collective_timeout_s), so a rank that died or hangs
//           becomes an Error naming the collective on the others instead of a hang.
//   nccl    CUDA buffers through NCCL (CMake RELGRAD_NCCL), host buffers through the communicator
//           that exchanged the ncclUniqueId (MPI); every NCCL call is checked (train/trainer/distributed_nccl.cpp).
// The library never exits: a failed collective throws relgrad::Error. The `relgrad` command prints
// the error naming the rank and ends the whole job with abort_job() (train/command/main.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/data/data.h"

namespace relgrad {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "single", "mpi", "nccl"

  // Starts the in-place sum over ranks of n elements of `dtype` (float32 or float64) at `data`; the
  // buffer must be left alone until wait(handle). Several may be in flight; wait for each.
  virtual int64_t start_all_reduce_sum(void* data, int64_t n, DType dtype) = 0;
  // Waits for a reduction started above; throws after timeout() seconds.
  virtual void wait(int64_t handle) = 0;
  // Rank `root`'s `bytes` bytes at `data` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job with exit status `code` (MPI_Abort). For a program's main only, once
  // it has printed its error; the single-process communicator does nothing (main simply returns).
  virtual void abort_job(int code) { (void)code; }

  void all_reduce_sum(float* data, int64_t n) { wait(start_all_reduce_sum(data, n, kFloat32)); }
  void all_reduce_sum(double* data, int64_t n) { wait(start_all_reduce_sum(data, n, kFloat64)); }
  double all_reduce_sum(double value) { all_reduce_sum(&value, 1); return value; }
  bool is_root() const { return rank() == 0; }
  // Seconds a collective waits for the other ranks before it throws; 0 = forever.
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }
  std::string where() const;  // "rank 1 of 2", for messages

 protected:
  double timeout_s_ = 300.0;
};

// One process alone: rank 0 of 1.
std::unique_ptr<Communicator> make_single_communicator();

// The job's communicator. init_world() starts MPI when this process was launched by mpirun (Open
// MPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE or PMIX_RANK, in the environment) and relgrad was built with
// MPI; otherwise (and before init_world) world() is the single-process communicator. Launched with
// more than one process by an MPI without relgrad having MPI built in: Error (every copy would
// train alone and write the same files). Called by the `relgrad` command's main, once.
Communicator& init_world();
Communicator& world();
// For main: an error code (1..127) with more than one rank ends the whole job (abort_job), since the
// other ranks may be waiting for this one in a collective; 0 and 128 + signal (a stop all ranks
// agreed on) finalise MPI. Returns code.
int finish_world(int code);

bool mpi_built();   // compiled with RELGRAD_MPI
bool nccl_built();  // compiled with RELGRAD_NCCL
// NCCL over CUDA device `device` (one GPU per rank), the ncclUniqueId broadcast by `bootstrap`
// (which must outlive the result; it also carries the host-buffer collectives). Error when NCCL is
// not built or the device is missing.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);

// ---- tensors ------------------------------------------------------------------------------------
// In place, a contiguous float tensor (CPU; CUDA with the nccl backend).
void all_reduce_sum(Communicator& comm, const Tensor& t);
void broadcast(Communicator& comm, const Tensor& t, int root);
// Throws on every rank when `value` is not the same on all ranks ("[distributed] rank r of n: <what>
// is not the same ..."), e.g. a checksum of the config or of the weights. A collective.
void check_same(Communicator& comm, uint64_t value, const std::string& what);
// FNV-1a 64 of the parameters' bytes (CPU tensors), for check_same.
uint64_t parameters_checksum(const TensorList& params);
// A stop request (a signal number, or 0) seen by any rank, returned on every rank, so that all ranks
// stop after the same step (SIGTERM may reach only one of them). The rank's own signal wins.
int agree_on_stop(Communicator& comm, int signal);
// Rank 0 does `action` (the others do nothing, e.g. write no file); with several ranks every rank
// learns whether it failed, so that the others stop at once instead of waiting for rank 0 until the
// collective timeout: rank 0 rethrows its error, the others throw "[train] rank 0 could not <what>
// (rank 0's error says why)". A collective.
void root_does(Communicator& comm, const std::string& what, const std::function<void()>& action);

// ---- the rows of a rank -------------------------------------------------------------------------
struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t rows() const { return end - begin; }
};
// Rows [rank·B/size, (rank+1)·B/size) of a batch of B rows (B >= size, so none is empty).
RowRange shard_rows(int64_t rows, int rank, int size);
// Those rows of `batch`, keeping its padded lengths so each row computes exactly as in the whole
// batch (positional alignment uses the padded lengths); num_targets counts the shard's targets.
Batch shard_batch(const Batch& batch, RowRange range);

// Sets the default generator's row shard (core/rng.h) for dropout while alive: a rank's rows draw
// the dropout masks they would draw in the whole batch on one process. Restores "no shard".
class RowShardGuard {
 public:
  explicit RowShardGuard(RowRange range);
  ~RowShardGuard();
  RowShardGuard(const RowShardGuard&) = delete;
  RowShardGuard& operator=(const RowShardGuard&) = delete;
};

// ---- gradients ------------------------------------------------------------------------------------
// Sums the parameters' gradients over ranks in place, in buckets of about `bucket_bytes` (parameters
// in reverse order, the order backward finishes them). Each parameter also sends a 1 when its
// gradient is defined, so a gradient undefined on every rank stays undefined (as in one process)
// and one defined on some ranks is their sum. float32 and float64 parameters.
class GradientReducer {
 public:
  GradientReducer(Communicator& comm, TensorList params, int64_t bucket_bytes = int64_t{4} << 20);
  // After the backward pass(es): every .grad becomes the sum over the ranks. A collective. All
  // buckets are started, then waited for: overlapping them with the backward pass did not pay on
  // the machine this was measured on (docs/distributed.md, "Performance").
  void reduce();
  int64_t bytes_per_reduce() const { return bytes_; }  // what each rank sends in one reduce()
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    int64_t values = 0;          // gradient elements, followed by one flag per parameter
    std::vector<char> buffer;
    int64_t handle = -1;
  };
  void transfer(Bucket& b, bool pack);
  Communicator& comm_;
  TensorList params_;
  DType dtype_ = kFloat32;
  std::vector<Bucket> buckets_;
  int64_t bytes_ = 0;
};

}  // namespace relgrad
