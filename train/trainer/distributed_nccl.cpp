// The NCCL communicator (compiled only with RELGRAD_NCCL; see distributed.h): CUDA device buffers go
// through NCCL on one GPU per rank; host buffers through the bootstrap communicator (MPI), which
// also broadcasts the ncclUniqueId from rank 0. The communicator is created non-blocking and every
// wait polls the CUDA event and ncclCommGetAsyncError against the deadline, so a missing or failed
// rank is an Error (after ncclCommAbort), not a hang. Every NCCL and CUDA call is checked and named.
#include "train/trainer/distributed.h"

#include "core/base/error.h"

#if RELGRAD_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

#include <chrono>
#include <map>
#endif

namespace relgrad {

#if RELGRAD_WITH_NCCL
namespace {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device) : bootstrap_(bootstrap), device_(device) {
    timeout_s_ = bootstrap.timeout();
    int count = 0;
    cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    RG_CHECK(device >= 0 && device < count, "distributed", where(), ": CUDA device ", device, " does not exist (",
             count, " devices)");
    cuda(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id{};
    if (bootstrap.is_root()) nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bootstrap.broadcast(&id, sizeof id, 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // returns at once; settle() polls with the deadline
    nccl(ncclCommInitRankConfig(&comm_, bootstrap.size(), id, bootstrap.rank(), &config), "ncclCommInitRankConfig");
    settle("ncclCommInitRankConfig");
    cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }

  ~NcclCommunicator() override {
    for (auto& [handle, p] : pending_)
      if (p.event) cudaEventDestroy(p.event);
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return bootstrap_.rank(); }
  int size() const override { return bootstrap_.size(); }
  const char* backend() const override { return "nccl"; }

  int64_t start_all_reduce_sum(void* data, int64_t n, DType dtype) override {
    RG_CHECK(is_floating(dtype), "distributed", "all_reduce_sum of ", dtype_name(dtype), " values");
    Pending p;
    if (!on_device(data)) {
      p.host_handle = bootstrap_.start_all_reduce_sum(data, n, dtype);
    } else {
      p.what = "all_reduce_sum of " + std::to_string(n) + " " + dtype_name(dtype) + " values";
      // The stream waits for the work already queued on the legacy default stream (relgrad's kernels).
      cudaEvent_t ready;
      cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      cuda(cudaEventRecord(ready, 0), "cudaEventRecord");
      cuda(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
      cuda(cudaEventDestroy(ready), "cudaEventDestroy");
      nccl(ncclAllReduce(data, data, static_cast<size_t>(n), dtype == kFloat32 ? ncclFloat32 : ncclFloat64, ncclSum,
                         comm_, stream_),
           "ncclAllReduce");
      cuda(cudaEventCreateWithFlags(&p.event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      cuda(cudaEventRecord(p.event, stream_), "cudaEventRecord");
    }
    pending_[next_handle_] = p;
    return next_handle_++;
  }

  void wait(int64_t handle) override {
    auto it = pending_.find(handle);
    RG_CHECK(it != pending_.end(), "distributed", "wait on unknown all_reduce handle ", handle);
    Pending p = it->second;
    pending_.erase(it);
    if (!p.event) return bootstrap_.wait(p.host_handle);
    settle(p.what, p.event);
    cuda(cudaEventDestroy(p.event), "cudaEventDestroy");
    // Later kernels on the default stream must see the sums.
    cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    if (!on_device(data)) return bootstrap_.broadcast(data, bytes, root);
    nccl(ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    cudaEvent_t done;
    cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    cuda(cudaEventRecord(done, stream_), "cudaEventRecord");
    settle("broadcast of " + std::to_string(bytes) + " bytes", done);
    cuda(cudaEventDestroy(done), "cudaEventDestroy");
  }

  void barrier() override { bootstrap_.barrier(); }

  void abort_job(int code) override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_.abort_job(code);
  }

 private:
  struct Pending {
    cudaEvent_t event = nullptr;  // null: a host buffer, reduced by the bootstrap communicator
    int64_t host_handle = -1;
    std::string what;
  };

  static bool on_device(const void* p) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      cudaGetLastError();  // plain host memory on old drivers: clear the sticky-free error
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  }

  void cuda(cudaError_t rc, const char* call) const {
    if (rc != cudaSuccess)
      throw DeviceError("[distributed] " + where() + ": " + call + " failed: " + cudaGetErrorString(rc));
  }
  void nccl(ncclResult_t rc, const char* call) const {
    if (rc != ncclSuccess && rc != ncclInProgress)
      throw DeviceError("[distributed] " + where() + ": " + call + " failed: " + ncclGetErrorString(rc) + " (" +
                        ncclGetLastError(comm_) + ")");
  }

  // Waits until the communicator has no operation in progress and `event` (if any) has completed;
  // aborts the communicator and throws on an asynchronous NCCL error or at the deadline.
  void settle(const std::string& what, cudaEvent_t event = nullptr) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      nccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw DeviceError("[distributed] " + where() + ": " + what + " failed: " + ncclGetErrorString(state));
      }
      bool done = state == ncclSuccess;
      if (done && event) {
        const cudaError_t q = cudaEventQuery(event);
        if (q != cudaErrorNotReady) cuda(q, "cudaEventQuery");
        done = q == cudaSuccess;
      }
      if (done) return;
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (timeout_s_ > 0 && waited > timeout_s_) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error(detail::concat("[distributed] ", where(), ": ", what, " did not complete within ", timeout_s_,
                                   " s: another rank has failed or stopped (train.collective_timeout_s sets this limit)"));
      }
      timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
  }

  Communicator& bootstrap_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::map<int64_t, Pending> pending_;
  int64_t next_handle_ = 1;
};

}  // namespace
#endif  // RELGRAD_WITH_NCCL

bool nccl_built() {
#if RELGRAD_WITH_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
#if RELGRAD_WITH_NCCL
  return std::make_unique<NcclCommunicator>(bootstrap, device);
#else
  (void)bootstrap;
  (void)device;
  throw DeviceError("[distributed] this relgrad was built without NCCL (needs CUDA, MPI and nccl.h at build time; "
                    "CMake RELGRAD_NCCL)");
#endif
}

}  // namespace relgrad
