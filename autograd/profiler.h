// The op-level profiler: where the time of a training step goes, per op family, without Nsight.
//
//   Profiler profiler(device);
//   profiler.begin_step();   // this thread's ops now record into `profiler`
//   ... forward, backward, optimizer step ...
//   profiler.end_step();     // one wait for the device, then the step's times are added up
//   std::cout << profiler.report().table();
//
// The seam: every differentiable op opens a ProfileScope named after itself (PyTorch's names:
// matmul, softmax, layer_norm, ...) as its first line, and the engine (autograd/engine.cpp) opens
// one named "<op>.backward" around each tape node's backward. Only the outermost scope open on the
// thread is timed: an op built from other ops (gelu calling gelu_erf, matmul's views, the matmuls
// inside matmul's backward) counts all of its time, exclusively, under the outermost name, so the
// rows never overlap and add up to at most the step. When no profiler is active a scope costs one
// branch on a thread-local pointer.
//
// Times come from core/backend/timeline.h: a steady clock on the CPU; on a GPU, CUDA events
// recorded on the default stream around each outermost op and read once at end_step (one
// synchronisation per step, not per op), so an op's time is the GPU's time between its two events,
// including any wait for the host to launch its kernels.
//
// FLOPs are counted where they are done: every GEMM (core of matmul, bmm, addmm and the layers'
// Linear) adds 2·M·N·K to the outermost scope open at the time, so "matmul.backward" gets the two
// GEMMs of the gradients it computes. Fused attention adds attention_flops() (below).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace relgrad {

namespace backend {
class Timeline;
}
class Profiler;

namespace profiler_detail {
inline thread_local Profiler* active = nullptr;  // the profiler this thread's ops record into, or none
}

// One op family over the profiled steps: its forward ("matmul") or its backward ("matmul.backward"),
// or a named phase of the step ("optimizer.step", "clip_grad_norm_", "accumulate_grad").
struct ProfileRow {
  std::string op;
  int64_t calls = 0;    // over all profiled steps
  double seconds = 0;   // total, exclusive of any enclosing op (outermost scopes only)
  double flops = 0;     // total floating-point operations; 0 where they are not defined
};

struct ProfileReport {
  std::string device;       // "cpu", "cuda:0"
  int64_t steps = 0;        // profiled steps
  int64_t first_step = 0;   // the 1-based number of the first profiled step (0: not given)
  double step_seconds = 0;  // all profiled steps, begin_step to end_step
  std::vector<ProfileRow> rows;  // by total time, longest first

  double attributed_seconds() const;  // Σ rows
  // The step's time no op or phase accounts for: host work between ops (batches, bookkeeping).
  double unattributed_seconds() const { return step_seconds - attributed_seconds(); }
  const ProfileRow* find(const std::string& op) const;  // null when the op never ran
  std::string table() const;  // the printed table: calls, total ms, share of the step, GFLOP/s
  std::string json() const;   // the same as a JSON object (profile.json, docs/cli.md)
};

class Profiler {
 public:
  explicit Profiler(Device device);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Makes this the thread's active profiler and marks the step's start. Throws when a step is open.
  void begin_step();
  // Marks the step's end, deactivates, waits once for the device and adds the step into the totals.
  void end_step();
  // Deactivates and drops the open step (a step that threw); the totals keep the earlier steps.
  void cancel_step();
  bool in_step() const { return in_step_; }
  ProfileReport report() const;

  // For ProfileScope and add_profiled_flops.
  void enter(const char* op, bool backward);
  void leave();
  void add_flops(double flops) {
    if (depth_ > 0) spans_.back().flops += flops;
  }

 private:
  struct Span {
    const char* op;
    bool backward;
    size_t start, end;  // timeline marks
    double flops;
  };
  struct Total {
    int64_t calls = 0;
    double seconds = 0, flops = 0;
  };
  Device device_;
  std::unique_ptr<backend::Timeline> timeline_;
  std::vector<Span> spans_;  // this step's outermost scopes
  int depth_ = 0;            // scopes open now
  bool in_step_ = false;
  int64_t steps_ = 0;
  double step_seconds_ = 0;
  std::map<std::string, Total> totals_;
};

// RAII: the first line of an op (RG_PROFILE_OP) or around any phase worth its own row.
class ProfileScope {
 public:
  explicit ProfileScope(const char* op, bool backward = false) : p_(profiler_detail::active) {
    if (p_) p_->enter(op, backward);
  }
  ~ProfileScope() {
    if (p_) p_->leave();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler* p_;
};
#define RG_PROFILE_OP(op) ::relgrad::ProfileScope rg_profile_scope_(op)

// Adds `flops` to the outermost scope open on this thread (when profiling).
inline void add_profiled_flops(double flops) {
  if (Profiler* p = profiler_detail::active) p->add_flops(flops);
}

// FLOPs of one attention core q (B,H,t2,D) against k, v (B,H,t1,D): 4·B·H·t2·t1·D forward (q·kᵀ
// and p·v, 2 each), halved when causal; the backward is counted as 2.5× the forward (dq, dk, dv,
// dp and the recomputed scores).
double attention_flops(int64_t B, int64_t H, int64_t t2, int64_t t1, int64_t D, bool causal, bool backward);

}  // namespace relgrad
