// The MPI communicator (compiled only with RELGRAD_MPI; see distributed.h). Every collective is
// non-blocking (MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier) and waited for by polling MPI_Test against
// a deadline: a rank that died or hangs becomes an Error on the others ("... did not complete within
// N s"), not an endless wait. Errors are returned (MPI_ERRORS_RETURN), not fatal, and each names
// the MPI call. While a collective waits, the ranks exchange heartbeats, so that the error names the
// ranks that were not heard from: the lost one when a host or its link goes down (tested across
// network namespaces by tests/distributed_hosts.sh).
#if RELGRAD_WITH_MPI
#include <mpi.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "train/trainer/distributed.h"

namespace relgrad {
namespace {

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator() {
    check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    if (size_ > 1) {
      // Heartbeats travel on their own communicator, so they can never match a collective's messages.
      check(MPI_Comm_dup(MPI_COMM_WORLD, &beats_), "MPI_Comm_dup");
      check(MPI_Comm_set_errhandler(beats_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      beat_sends_.assign(size_, MPI_REQUEST_NULL);
      heard_.assign(size_, clock::time_point::min());
      post_beat_receive();
    }
  }
  // Before MPI_Finalize (finish_world resets the world first). Not reached when the job is aborted.
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || beats_ == MPI_COMM_NULL) return;
    if (beat_receive_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&beat_receive_);
      MPI_Wait(&beat_receive_, MPI_STATUS_IGNORE);
    }
    // A one-byte send completes locally; freeing lets one still under way finish on its own.
    for (MPI_Request& r : beat_sends_)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    MPI_Comm_free(&beats_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  int64_t start_all_reduce_sum(void* data, int64_t n, DType dtype) override {
    RG_CHECK(is_floating(dtype), "distributed", "all_reduce_sum of ", dtype_name(dtype), " values");
    RG_CHECK(n >= 0 && n <= INT_MAX, "distributed", "all_reduce_sum of ", n, " values (at most ", INT_MAX, " per call)");
    Pending p;
    p.what = "all_reduce_sum of " + std::to_string(n) + " " + dtype_name(dtype) + " values";
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), dtype == kFloat32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM,
                         MPI_COMM_WORLD, &p.request),
          "MPI_Iallreduce");
    pending_[next_handle_] = std::move(p);
    return next_handle_++;
  }

  void wait(int64_t handle) override {
    auto it = pending_.find(handle);
    RG_CHECK(it != pending_.end(), "distributed", "wait on unknown all_reduce handle ", handle);
    Pending p = std::move(it->second);
    pending_.erase(it);
    finish(p.request, p.what);
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    RG_CHECK(root >= 0 && root < size_, "distributed", "broadcast from rank ", root, " of ", size_);
    auto* at = static_cast<char*>(data);
    do {  // MPI counts are ints: large buffers go in pieces
      const int chunk = static_cast<int>(std::min<int64_t>(bytes, INT_MAX));
      MPI_Request request;
      check(MPI_Ibcast(at, chunk, MPI_BYTE, root, MPI_COMM_WORLD, &request), "MPI_Ibcast");
      finish(request, "broadcast of " + std::to_string(chunk) + " bytes from rank " + std::to_string(root));
      at += chunk;
      bytes -= chunk;
    } while (bytes > 0);
  }

  void barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    finish(request, "barrier");
  }

  void abort_job(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 private:
  using clock = std::chrono::steady_clock;
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    std::string what;
  };

  // Heartbeats. A collective that waits longer than kBeatAfter sends a one-byte message to every
  // other rank every kBeatEvery (never more than one under way per peer) and records when each
  // peer's arrive. At the deadline, the ranks not heard from within kHeardWithin are named: they
  // did not reach a collective (hung, stopped, still computing) or cannot reach this rank (a host or
  // link that went down; over TCP a lost link gives no error for many minutes, only silence). A
  // rank's message says which rank it lost; the others waited with it. Heartbeats are best effort:
  // an error from one is ignored, and the collective's own deadline still ends the wait.
  static constexpr double kBeatAfter = 0.25, kBeatEvery = 0.25, kHeardWithin = 2.0;

  void post_beat_receive() {
    if (MPI_Irecv(&beat_in_, 1, MPI_CHAR, MPI_ANY_SOURCE, 0, beats_, &beat_receive_) != MPI_SUCCESS)
      beat_receive_ = MPI_REQUEST_NULL;
  }

  // One round: records the heartbeats that arrived (a wait's first round only drains them: they were
  // sent while an earlier collective waited) and sends this rank's when one is due.
  void keep_in_touch(bool first_round) {
    const auto now = clock::now();
    if (beat_receive_ == MPI_REQUEST_NULL) post_beat_receive();  // an earlier one failed
    while (beat_receive_ != MPI_REQUEST_NULL) {
      int arrived = 0;
      MPI_Status status;
      if (MPI_Test(&beat_receive_, &arrived, &status) != MPI_SUCCESS) {
        beat_receive_ = MPI_REQUEST_NULL;
        break;
      }
      if (!arrived) break;
      const int from = status.MPI_SOURCE;
      if (!first_round && from >= 0 && from < size_) heard_[from] = now;
      post_beat_receive();
    }
    if (first_round) std::fill(heard_.begin(), heard_.end(), clock::time_point::min());
    if (!first_round && std::chrono::duration<double>(now - last_beat_).count() < kBeatEvery) return;
    static const char kBeat = 1;
    for (int peer = 0; peer < size_; ++peer) {
      MPI_Request& r = beat_sends_[peer];
      if (peer == rank_) continue;
      int done = 1;
      if (r != MPI_REQUEST_NULL && MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        r = MPI_REQUEST_NULL;
      if (r != MPI_REQUEST_NULL && !done) continue;  // the last one is still under way (a link that is down)
      if (MPI_Isend(&kBeat, 1, MPI_CHAR, peer, 0, beats_, &r) != MPI_SUCCESS) r = MPI_REQUEST_NULL;
    }
    last_beat_ = now;
  }

  // "; no word from rank 2 while waiting: ..." for the timeout's message.
  std::string silent_ranks() const {
    if (beats_ == MPI_COMM_NULL) return "";
    const auto now = clock::now();
    // A deadline shorter than twice the window would count beats from before a rank went silent.
    const double within = timeout_s_ > 0 ? std::min(kHeardWithin, timeout_s_ / 2) : kHeardWithin;
    std::vector<int> silent, heard;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      const bool recent = heard_[peer] != clock::time_point::min() &&
                          std::chrono::duration<double>(now - heard_[peer]).count() <= within;
      (recent ? heard : silent).push_back(peer);
    }
    if (silent.empty()) return "; every other rank was heard from while waiting";
    std::string text = "; no word from " + rank_list(silent) +
                       " while waiting: lost (a host or network link down), hung or stopped";
    if (!heard.empty())
      text += " (" + rank_list(heard) + (heard.size() == 1 ? " was" : " were") + " heard from)";
    return text;
  }

  static std::string rank_list(const std::vector<int>& ranks) {
    std::string text = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
      text += std::to_string(ranks[i]);
    }
    return text;
  }

  void check(int rc, const char* call) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw Error("[distributed] " + where() + ": " + call + " failed: " + std::string(text, length));
  }

  // Polls until `request` completes. Open MPI moves a non-blocking collective's data only inside MPI
  // calls, one round of its schedule per call, so the first second is a tight MPI_Test loop (with
  // sched_yield, so that a core shared with other work is given up): sleeping between polls made a
  // 1 MB all-reduce take 12 ms instead of 0.2. Past a second (another rank is writing a checkpoint,
  // or has failed) the loop sleeps 100 µs between polls, to leave the core alone.
  void finish(MPI_Request& request, const std::string& what) {
    const auto start = clock::now();
    bool beating = false;
    for (int polls = 0;; ++polls) {
      int flag = 0;
      check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag) return;
      if (polls % 64 != 63) {
        sched_yield();
        continue;
      }
      const double waited = std::chrono::duration<double>(clock::now() - start).count();
      if (beats_ != MPI_COMM_NULL && waited > kBeatAfter) {
        keep_in_touch(!beating);
        beating = true;
      }
      if (timeout_s_ > 0 && waited > timeout_s_)  // the seconds as %g (ostream's default format)
        throw Error(detail::concat("[distributed] ", where(), ": ", what, " did not complete within ", timeout_s_,
                                   " s: another rank has failed or stopped (train.collective_timeout_s sets this limit)",
                                   silent_ranks()));
      if (waited > 1.0) {
        timespec ts{0, 100000};
        nanosleep(&ts, nullptr);
      }
    }
  }

  int rank_ = 0, size_ = 1;
  MPI_Comm beats_ = MPI_COMM_NULL;
  MPI_Request beat_receive_ = MPI_REQUEST_NULL;
  char beat_in_ = 0;
  std::vector<MPI_Request> beat_sends_;
  std::vector<clock::time_point> heard_;
  clock::time_point last_beat_;
  std::map<int64_t, Pending> pending_;
  int64_t next_handle_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Open MPI's non-blocking all-reduce picks by default an algorithm that took 0.7-2.4 ms for 1 MB
    // between 2 ranks here; the ring takes 0.15 ms, as fast as the blocking MPI_Allreduce. A
    // setting from the user's environment or mpirun --mca wins (no overwrite).
    ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
    int provided = 0;
    // OpenMP threads compute; only the thread that called init_world() talks to MPI.
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    RG_CHECK(rc == MPI_SUCCESS, "distributed", "MPI_Init_thread failed (code ", rc, ")");
  }
  return std::make_unique<MpiCommunicator>();
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace relgrad
#endif  // RELGRAD_WITH_MPI
