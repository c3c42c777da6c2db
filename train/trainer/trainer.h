// The training loop behind `relgrad train`, usable from C++ too:
//
//   TrainerOptions options = trainer_options(config);  // a RunConfig's (train/config/run_options.h),
//                                                      // or filled by hand (train/trainer/options.h)
//   Trainer trainer(options, &std::cout);              // builds model, optimizer, schedule
//   trainer.resume("runs/default/checkpoint.safetensors");   // optional
//   TrainResult result = trainer.train();              // logs, evaluates, checkpoints
//
// One optimizer step (train_step):
//   lr = schedule(step); zero grads
//   for each of grad_accum micro-batches (data positions p, p+1, ...):
//       loss_m = Σ token losses of the micro-batch / Σ loss tokens of ALL micro-batches of the step
//       backward(loss_m)                       → the gradient of the step's token-mean loss
//   clip the global gradient norm to optim.clip; optimizer step; step += 1
// So a step with grad_accum = k sees exactly the gradient of one batch k times as large.
//
// Device (train.device): the model is built on the host and moved to the device before the optimizer
// allocates its state there; batches are built on the host and copied to the device one micro-batch
// at a time; the loss, gradient norm and finiteness checks come back as one scalar each (item()).
// Checkpoints always hold host tensors, so a run saved on a GPU resumes on the CPU and the reverse.
// Several ranks (data parallel) train on the CPU only.
//
// Determinism: the model is initialised from a Generator seeded with train.seed, dropout draws from
// the default generator (seeded with train.seed, offset 0), batch n is a pure function of
// (data.seed, n), and every CPU kernel reduces in an order fixed by the shapes, whatever the thread
// count. So the same config on the same machine gives bit-identical losses and weights, and a resumed
// run continues exactly as if it had never stopped (the checkpoint holds step, data position and the
// generator's state).
//
// Threads (CPU): train.threads, or by default a count the Trainer picks and revisits by timing steps
// (train/trainer/thread_policy.h); never more than the cores the process may use. With
// train.batch_shards = S > 1 each micro-batch's rows are cut into S shards that run forward and
// backward side by side on replicas sharing the weights, one thread each (train/trainer/batch_shards.h):
// the same bits at any thread count, and a small model's step on two cores in about 0.6x the time.
//
// Output in train.out_dir, a RunDirectory (train/trainer/run_directory.h: the lock, the *.prev rotation,
// the resume-target checks; docs/cli.md "Run directories"): checkpoint.safetensors
// (train/trainer/checkpoint.h, written atomically every save_every steps and at the end) and log.jsonl
// or log.csv (train/trainer/training_log.h: the columns of each event), one "train" record per
// log_every steps, one "eval" record per evaluation and one "skip" record per step skipped under
// train.nonfinite = "skip".
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "train/data/dataset.h"
#include "train/optim/grad_scaler.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"
#include "train/trainer/batch_shards.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/distributed.h"
#include "train/trainer/nonfinite.h"
#include "train/trainer/options.h"
#include "train/trainer/run.h"
#include "train/trainer/run_directory.h"
#include "train/trainer/sampler.h"
#include "train/trainer/thread_policy.h"

namespace relgrad {

class StepProfile;

struct TrainResult {
  int64_t steps = 0;             // optimizer steps done in total (including before a resume)
  double last_loss = 0.0;
  EvalResult eval;               // the last evaluation
  double seconds = 0.0;          // wall time of this call
  double tokens_per_s = 0.0;     // input tokens (padding excluded) per second, this call
  bool reached_target = false;   // stopped early at train.target_accuracy
  int interrupted_by = 0;        // the signal that stopped the run (a checkpoint was saved), or 0
  int64_t skipped_steps = 0;     // train.nonfinite = "skip": steps whose update was skipped, this call
};

// Interruption (SIGINT / SIGTERM): `relgrad train` installs handlers that call
// request_training_stop(signal); Trainer::train() checks the flag after every step, saves a
// checkpoint and returns with TrainResult::interrupted_by set, so `--resume` continues exactly.
// Async-signal-safe (one atomic store); the flag stays set until clear_training_stop().
void request_training_stop(int signal);
void clear_training_stop();
int training_stop_requested();

class Trainer {
 public:
  // Checks the device (nothing is written before that), seeds, builds the model, optimizer and
  // schedule; `options` come validated, vocab sizes filled in (trainer_options does both). Progress lines go to `out` (null: silent). `comm` (null: world(), train/trainer/distributed.h)
  // with several ranks makes the training data-parallel: this rank trains on its rows of every
  // batch, gradients and losses are summed over the ranks, weights start as rank 0's, and only rank
  // 0 writes the log and checkpoints (pass out = null on the other ranks). Every rank must make
  // the same calls (resume, train) in the same order.
  explicit Trainer(TrainerOptions options, std::ostream* out = nullptr, Communicator* comm = nullptr);
  ~Trainer();

  // Continues the run saved in `checkpoint_path`: model, optimizer, RNG, step, data position. The
  // checkpoint's config must agree with this one in everything that shapes the model, the data or
  // the optimizer state (TrainerOptions::check_resume; other keys, such as train.steps or log_every,
  // may change on resume), and its data checksum with the Dataset's.
  void resume(const std::string& checkpoint_path);
  // The same from a checkpoint already loaded (and verified) from `checkpoint_path`.
  void resume(const Checkpoint& checkpoint, const std::string& checkpoint_path);

  // Takes the lock on train.out_dir (creating the directory) now, and keeps it until the Trainer is
  // destroyed: `relgrad train` calls it first, so that a second run is refused before any work and the
  // lock also covers the plot written after train(). Without it train() takes the lock for its own
  // duration. Throws relgrad::Error naming the directory and the holder's pid when another process
  // holds it. Several ranks: rank 0 locks, and every rank throws when it cannot.
  void lock_out_dir();

  TrainResult train();          // steps until train.steps (or the target accuracy), with logging
  // One optimizer step; returns the step's token-mean loss. A NaN/Inf loss or gradient throws
  // NonFiniteError ("[train] step S: the loss is nan at lr L; first non-finite tensor: ...", the
  // model and optimizer untouched) or, with train.nonfinite = "skip", skips the update: weights and
  // optimizer state (moments, step counts) stay bit for bit, while the step number (so the lr
  // schedule) and the data position advance, as a PyTorch loop with GradScaler does. More than
  // train.max_skipped_steps skips in a row throw. An update that makes a parameter non-finite
  // always throws (it cannot be undone). See train/trainer/nonfinite.h.
  double train_step();
  bool last_step_skipped() const { return nonfinite_.in_a_row() > 0; }
  int64_t skipped_steps() const { return nonfinite_.total(); }  // by this Trainer (not kept in checkpoints)
  // Called in train_step after the backward pass(es), before the checks, clipping and the update:
  // for gradient logging, or for tests that inject a fault.
  void set_after_backward(std::function<void(Trainer&)> hook) { after_backward_ = std::move(hook); }
  // Held-out evaluation (train.eval_batches batches; side by side on the batch shards' replicas).
  EvalResult evaluate();
  void save(const std::string& path) const;

  const TrainerOptions& options() const { return options_; }
  RunModel& model() { return *model_; }
  const Dataset& data() const { return *options_.data; }
  Optimizer& optimizer() { return *optimizer_; }
  int64_t step() const { return step_; }
  int64_t data_position() const { return data_position_; }
  double last_grad_norm() const { return last_grad_norm_; }
  const ThreadPolicy& thread_policy() const { return *threads_; }
  Communicator& communicator() const { return *comm_; }
  const GradientReducer* gradient_reducer() const { return reducer_.get(); }  // null with one rank
  const GradScaler* grad_scaler() const { return scaler_.get(); }  // train.precision = fp16 only
  std::string checkpoint_path() const { return run_dir_.checkpoint_path(); }
  std::string log_path() const { return run_dir_.log_path(); }

 private:
  TrainResult train_loop();
  double run_step();  // train_step without the thread policy's timing
  int shard_threads_now() const;  // threads the batch shards may use this step
  double skip_for_scaler(double lr, double loss_value);  // fp16 overflow: GradScaler's skip
  double skip_step(double lr, double loss_value, double grad_norm, const std::string& what);
  EvalResult run_eval(std::chrono::steady_clock::time_point start, bool record);
  void start_data_parallel();
  void print_samples();

  TrainerOptions options_;
  std::ostream* out_;
  Communicator* comm_;
  RunDirectory run_dir_;                      // train.out_dir: files written by rank 0 only
  std::unique_ptr<ThreadPolicy> threads_;     // OpenMP threads per step (CPU runs)
  std::unique_ptr<GradientReducer> reducer_;  // several ranks only
  RowRange rows_;                             // this rank's rows of every batch
  std::unique_ptr<BatchShards> shards_;       // train.batch_shards > 1 only
  bool shards_side_by_side_ = true;           // BatchShards::side_by_side_allowed()
  std::shared_ptr<RunModel> model_;
  TensorList params_;  // model_'s parameters, listed once: Module::parameters() walks the tree by name
  std::unique_ptr<Optimizer> optimizer_;
  LrSchedule schedule_;
  std::vector<double> group_lr_scale_;  // per optimizer group: its lr = the schedule's × this
  int64_t step_ = 0, data_position_ = 0;
  int64_t last_tokens_ = 0;
  int64_t tokens_seen_ = 0;  // input tokens trained on since step 0 (kept across resumes)
  double last_grad_norm_ = 0.0;
  NonFiniteSteps nonfinite_;  // train.nonfinite = "skip": skips counted (not checkpointed)
  std::function<void(Trainer&)> after_backward_;
  std::unique_ptr<StepProfile> profile_;  // train.profile > 0 (train/trainer/trainer.cpp)
  bool tf32_before_ = false;              // the process's TF32 setting, restored by ~Trainer
  std::unique_ptr<GradScaler> scaler_;    // train.precision = fp16 only (its state is checkpointed)
  int64_t scaler_skips_ = 0;              // steps the scaler skipped (counted as skipped steps)
  bool out_dir_locked_ = false;           // lock_out_dir() was called (on every rank)
};

}  // namespace relgrad
