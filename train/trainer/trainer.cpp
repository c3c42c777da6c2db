// The training loop (see trainer.h for the step, determinism and output contracts) and what its
// checkpoints hold.
#include "train/trainer/trainer.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/profiler.h"
#include "autograd/grad_mode.h"
#include "core/backend/matmul.h"
#include "core/base/error.h"
#include "core/file_io.h"  // fnv1a64
#include "train/trainer/nonfinite.h"

namespace relgrad {

// train.profile = N (docs/cli.md): the op-level profile (autograd/profiler.h) of N training steps.
// The first step a Trainer runs is the warm-up and is never profiled: it pays for first uses (the
// allocator's growth, cuBLAS's loading and plans, the thread policy's first trial); steps 2 to N + 1
// of the process are profiled (after a resume from step S: steps S + 2 to S + N + 1 of the run).
// Once they are done (or the run ends earlier) the table is printed and written as profile.json in
// train.out_dir, atomically.
class StepProfile {
 public:
  StepProfile(int64_t steps, Device device) : steps_(steps), profiler_(device) {}

  // Around one training step; `step` is the 1-based number of the step about to run. A step that
  // throws calls cancel() instead of end().
  void begin(int64_t step) {
    ++seen_;
    if (seen_ == 1 || profiled_ >= steps_) return;  // the warm-up, or done
    if (profiled_ == 0) first_step_ = step;
    profiler_.begin_step();
    open_ = true;
  }
  void end() {
    if (!open_) return;
    open_ = false;
    profiler_.end_step();
    ++profiled_;
  }
  bool recording() const { return open_; }  // inside a profiled step
  void cancel() {
    if (!open_) return;
    open_ = false;
    profiler_.cancel_step();
  }
  // N steps profiled, or (at_end) at least one: prints the table to `out` (may be null) and, when
  // `write`, writes out_dir/profile.json. Once.
  void finish(const std::string& out_dir, std::ostream* out, bool write, bool at_end) {
    if (finished_ || profiled_ == 0 || (profiled_ < steps_ && !at_end)) return;
    finished_ = true;
    ProfileReport report = profiler_.report();
    report.first_step = first_step_;
    const std::string path = out_dir + "/profile.json";
    if (write) write_file_atomic(path, report.json(), "train");
    if (!out) return;
    *out << report.table();
    if (profiled_ < steps_)
      *out << "(the run ended after " << profiled_ << " of the " << steps_ << " steps of train.profile)\n";
    if (write) *out << "profile written to " << path << "\n";
    out->flush();
  }

 private:
  int64_t steps_;          // to profile
  int64_t seen_ = 0;       // steps begun, the warm-up included
  int64_t profiled_ = 0;   // steps profiled
  int64_t first_step_ = 0;
  bool open_ = false, finished_ = false;
  Profiler profiler_;
};

namespace {

// Dropout's stream is keyed apart from the initialisation's (same seed, different key).
constexpr uint64_t kDropoutKey = 0x9E3779B97F4A7C15ULL;

// Input tokens of a batch, padding excluded: what tokens/s counts.
int64_t input_tokens(const Batch& b) {
  auto count = [](const Tensor& ids, const Tensor& pad) {
    return ids.numel() - (pad.defined() ? static_cast<int64_t>(sum(pad.to(kFloat64)).item()) : 0);
  };
  if (b.decoder_only()) return count(b.tokens, b.padding_mask);
  return count(b.src, b.src_padding_mask) + count(b.tgt_in, b.tgt_padding_mask);
}

std::string clock_text(double seconds) {
  auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60), (long long)(s % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

TrainerOptions prepared(TrainerOptions o) {
  RG_CHECK(o.data != nullptr, "train", "TrainerOptions::data is not set");
  return o;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& o, const std::vector<ParamGroup>& groups) {
  switch (o.name) {
    case OptimizerKind::SGD:
      return std::make_unique<SGD>(groups, SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov));
    case OptimizerKind::Adam:
      return std::make_unique<Adam>(groups, AdamOptions(o.lr).betas(o.beta1, o.beta2).eps(o.eps));
    case OptimizerKind::AdamW:
      return std::make_unique<AdamW>(groups, AdamWOptions(o.lr).betas(o.beta1, o.beta2).eps(o.eps));
  }
  return nullptr;  // not reached: the switch names every kind
}

std::atomic<int> g_stop_signal{0};  // request_training_stop

// A number of the saved GradScaler state, the whole text or an error naming the key.
template <class T>
T parse_scaler_number(const std::string& text, const char* key, const std::string& path) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  RG_CHECK(ec == std::errc() && end == text.data() + text.size(), "train", "cannot resume from ", path,
           ": extra.", key, " is '", text, "', not a number");
  return v;
}

}  // namespace

// ---- interruption ------------------------------------------------------------------------------
void request_training_stop(int signal) { g_stop_signal.store(signal == 0 ? -1 : signal); }
void clear_training_stop() { g_stop_signal.store(0); }
int training_stop_requested() { return g_stop_signal.load(); }

// ---- Trainer -------------------------------------------------------------------------------------
Trainer::Trainer(TrainerOptions options, std::ostream* out, Communicator* comm)
    : options_(prepared(std::move(options))),
      out_(out),
      comm_(comm ? comm : &world()),
      run_dir_(options_.train.out_dir, options_.train.log_format, out_) {
  const Device device = resolve_device(options_.train.device, "train.device");
  RG_CHECK(device.is_cpu() || comm_->size() == 1, "train", "train.device = ", options_.train.device, " with ",
           comm_->size(), " ranks: data-parallel training runs on the CPU only (train/trainer/distributed.h); use "
           "train.device = \"cpu\" or a single process");
  Generator init(options_.train.seed);
  model_ = build_model(options_.model, &init);
  model_->to(device);  // before the optimizer: its state is allocated beside the weights
  params_ = model_->module->parameters();
  // train.tf32: cuBLAS's float32 GEMMs in TF32 for this Trainer's life (a GPU setting; no effect on the CPU).
  tf32_before_ = backend::allow_tf32();
  backend::set_allow_tf32(options_.train.tf32);
  if (options_.train.precision == kFloat16) scaler_ = std::make_unique<GradScaler>();
  if (options_.train.profile > 0) profile_ = std::make_unique<StepProfile>(options_.train.profile, device);
  // On a GPU the host threads only feed the device: the count is fixed (train.threads, capped).
  const int64_t requested = device.is_cpu() || options_.train.threads > 0 ? options_.train.threads
                                                                          : int64_t(omp_get_max_threads());
  threads_ = std::make_unique<ThreadPolicy>(requested, omp_get_num_procs(), omp_get_max_threads());
  threads_->set_for_next_step();
  default_generator().set_state(options_.train.seed ^ kDropoutKey, 0);
  const OptimConfig& o = options_.optim;
  ScaledGroups scaled = scaled_positional_groups(model_->module->named_parameters(), o.lr, o.weight_decay,
                                                 o.positional_lr_scale);
  group_lr_scale_ = scaled.lr_scale;
  optimizer_ = make_optimizer(o, scaled.groups);
  schedule_ = LrSchedule(o.lr, o.warmup_steps, o.decay_steps > 0 ? o.decay_steps : options_.train.steps, o.min_lr,
                         o.decay);
  if (comm_->size() > 1) start_data_parallel();
  // At most one shard per row: a batch smaller than train.batch_shards (or a rank's share of it) is
  // cut into single rows, the same cut every step.
  const int64_t rows = reducer_ ? rows_.rows() : options_.data->batch_size();
  if (std::min(options_.train.batch_shards, rows) > 1) {
    shards_ = std::make_unique<BatchShards>(*model_, options_.model, std::min(options_.train.batch_shards, rows),
                                            options_.train.shard_by_length);
    shards_side_by_side_ = BatchShards::side_by_side_allowed();
  }
}

// Several ranks (train/trainer/distributed.h): the same config everywhere, rank 0's weights, this rank's rows.
void Trainer::start_data_parallel() {
  comm_->set_timeout(options_.train.collective_timeout_s);
  const std::string& json = options_.config_json;
  check_same(*comm_, fnv1a64(json.data(), json.size()), "the config");
  rows_ = shard_rows(options_.data->batch_size(), comm_->rank(), comm_->size());
  const TensorList params = model_->module->parameters();
  for (const Tensor& p : params) broadcast(*comm_, p, 0);
  reducer_ = std::make_unique<GradientReducer>(*comm_, params);
  if (out_)
    *out_ << "data parallel: " << comm_->size() << " ranks (" << comm_->backend() << "), rank 0 trains rows ["
          << rows_.begin << ", " << rows_.end << ") of " << options_.data->batch_size() << "; all-reduce of "
          << reducer_->bytes_per_reduce() << " bytes per step (" << reducer_->buckets()
          << (reducer_->buckets() == 1 ? " bucket)\n" : " buckets)\n");
}

Trainer::~Trainer() { backend::set_allow_tf32(tf32_before_); }

double Trainer::train_step() {
  threads_->set_for_next_step();
  if (profile_) profile_->begin(step_ + 1);
  const auto start = std::chrono::steady_clock::now();
  double loss = 0;
  try {
    loss = run_step();
  } catch (...) {
    if (profile_) profile_->cancel();
    throw;
  }
  if (profile_) {
    profile_->end();
    profile_->finish(options_.train.out_dir, out_, comm_->is_root() && out_dir_locked_, /*at_end=*/false);
  }
  threads_->record(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), last_tokens_);
  std::string change = threads_->take_change();
  if (out_ && !change.empty()) *out_ << "step " << step_ << ": " << change << "\n" << std::flush;
  return loss;
}

double Trainer::run_step() {
  const double lr = schedule_.lr_at(step_);
  set_scheduled_lr(*optimizer_, lr, group_lr_scale_);
  optimizer_->zero_grad();
  model_->module->train();
  if (shards_) shards_->start_step();
  // All micro-batches first, so every one is scaled by the step's total count of loss tokens.
  std::vector<Batch> micro;
  int64_t total_targets = 0;
  last_tokens_ = 0;
  for (int64_t m = 0; m < options_.train.grad_accum; ++m) {
    micro.push_back(options_.data->batch(data_position_ + m, Split::Train));
    total_targets += micro.back().num_targets;
    last_tokens_ += input_tokens(micro.back());
    if (reducer_) micro.back() = shard_batch(micro.back(), rows_);  // counts above: the global batch's
  }
  RG_CHECK(total_targets > 0, "train", "step ", step_, ": the batch has no loss tokens");
  // Forward and backward of one micro-batch (or of one shard of it, on a replica: batch_shards.h).
  auto forward_backward = [&](RunModel& model, const Batch& host) {
    const Batch b = host.to(model.device);  // one micro-batch on the device at a time
    Tensor logits;
    {  // train.precision: the forward's products in bf16/fp16 (autograd/autocast.h), the rest float32
      AutocastGuard autocast(options_.train.precision);
      logits = model.logits(b);  // (B, T, V)
    }
    const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
    Tensor loss = cross_entropy(logits.reshape({B * T, V}), RunModel::targets(b).reshape({B * T}),
                                CrossEntropyOptions().set_reduction(Reduction::Sum)) /
                  static_cast<double>(total_targets);
    (scaler_ ? scaler_->scale(loss) : loss).backward();
    return loss.item();
  };
  double loss_value = 0.0;
  // This rank's rows draw as in the whole batch (batch shards set each shard's rows themselves).
  RowShardGuard dropout_rows(reducer_ && !shards_ ? rows_ : RowRange{});
  try {
    DetectAnomalyGuard anomaly(options_.train.detect_anomaly || AnomalyMode::is_enabled());
    // A profiled step runs its shards one after another: the profiler records the ops of its own thread.
    const int shard_threads = profile_ && profile_->recording() ? 1 : shard_threads_now();
    for (const Batch& host : micro)
      loss_value += shards_ ? shards_->forward_backward(host, reducer_ ? rows_.begin : 0, shard_threads, forward_backward)
                            : forward_backward(*model_, host);
  } catch (const NonFiniteError& e) {  // anomaly detection named the op; add the step
    throw NonFiniteError(detail::concat("[train] step ", step_, " at lr ", lr, ": ", e.what()));
  }
  if (shards_) shards_->sum_gradients(shard_threads_now());
  if (reducer_) {  // several ranks: the step's gradient and loss are sums over every rank's rows
    reducer_->reduce();
    loss_value = comm_->all_reduce_sum(loss_value);
  }
  if (after_backward_) after_backward_(*this);
  const TensorList& params = params_;
  if (scaler_) {  // fp16: the true gradients back; an overflow (finite loss, inf/NaN grads) skips the step
    scaler_->unscale_(params);
    if (scaler_->found_inf() && std::isfinite(loss_value)) return skip_for_scaler(lr, loss_value);
  }
  last_grad_norm_ = std::isfinite(loss_value)
                        ? clip_grad_norm_(params, options_.optim.clip > 0 ? options_.optim.clip : INFINITY)
                        : NAN;
  if (!std::isfinite(loss_value) || !std::isfinite(last_grad_norm_)) {
    const NonFiniteDiagnosis bad = diagnose_step(loss_value, last_grad_norm_, model_->module->named_parameters());
    const std::string warning =
        nonfinite_.on_nonfinite(options_.train.nonfinite, options_.train.max_skipped_steps, step_, lr, bad,
                                run_dir_.failure_note());  // or throws
    skip_step(lr, loss_value, last_grad_norm_, bad.tensor.name);
    if (out_) *out_ << "warning: " << warning << "\n" << std::flush;
    return loss_value;
  }
  optimizer_->step();
  // One read of the weights: an update that went non-finite (a NaN optimizer state, an overflow)
  // is caught at the step that did it. It cannot be undone, so it stops even in "skip" mode.
  if (!all_finite(params))
    throw update_went_nonfinite(step_, lr, last_grad_norm_,
                                first_nonfinite(model_->module->named_parameters(), /*grads=*/false),
                                run_dir_.failure_note());
  nonfinite_.on_applied();
  if (scaler_) scaler_->update();  // a finite step: towards growth
  data_position_ += options_.train.grad_accum;
  ++step_;
  return loss_value;
}

// GradScaler's skip (train/optim/grad_scaler.h): the scale was too large for float16, not the model
// diverging, so train.nonfinite is not consulted: the scale is halved and the step skipped.
double Trainer::skip_for_scaler(double lr, double loss_value) {
  const double scale = scaler_->get_scale();
  scaler_->update();
  ++scaler_skips_;
  return skip_step(lr, loss_value, INFINITY, detail::concat("fp16 gradients at loss scale ", scale));
}

// A skipped step (Trainer::train_step, trainer.h): the step number and the data position advance, the
// weights do not, and a "skip" record names `what` was not finite.
double Trainer::skip_step(double lr, double loss_value, double grad_norm, const std::string& what) {
  data_position_ += options_.train.grad_accum;
  ++step_;  // the log counts steps done, as for "train" records
  using C = LogColumn;
  run_dir_.append(LogEntry(LogEvent::Skip, {{C::Step, double(step_)}, {C::Loss, loss_value}, {C::Lr, lr},
                                            {C::GradNorm, grad_norm}})
                      .set(C::Tensor, what));
  return loss_value;
}

void Trainer::lock_out_dir() {
  if (out_dir_locked_) return;
  root_does(*comm_, "lock train.out_dir " + options_.train.out_dir, [&] { run_dir_.lock(); });
  out_dir_locked_ = true;
}

TrainResult Trainer::train() {
  const bool own_lock = !out_dir_locked_;  // taken here, released at the end (lock_out_dir() keeps it)
  lock_out_dir();
  try {
    root_does(*comm_, "prepare train.out_dir " + options_.train.out_dir, [&] {
      if (run_dir_.resumed()) run_dir_.start_resumed(step_, options_.train.steps, options_.check_resume);
      else run_dir_.start_fresh();
    });
    TrainResult result = train_loop();
    if (own_lock) run_dir_.unlock(), out_dir_locked_ = false;
    return result;
  } catch (...) {
    run_dir_.abandon();  // a fresh run's own log is not kept, a resume's left as it was
    if (own_lock) run_dir_.unlock(), out_dir_locked_ = false;
    throw;
  }
}

TrainResult Trainer::train_loop() {
  const bool writer = comm_->is_root();  // several ranks: only rank 0 writes files
  const TrainLoopConfig& tc = options_.train;
  TrainResult result;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  const int64_t first_step = step_;
  int64_t tokens = 0, window_tokens = 0;
  double window_start = 0.0;
  while (step_ < tc.steps) {
    const double lr = schedule_.lr_at(step_);
    const int64_t skipped_before = nonfinite_.total() + scaler_skips_;
    const double loss = train_step();
    const bool skipped = nonfinite_.total() + scaler_skips_ > skipped_before;  // logged by train_step as a "skip" record
    result.skipped_steps += skipped;
    if (!skipped) result.last_loss = loss;
    tokens += last_tokens_;
    tokens_seen_ += last_tokens_;
    window_tokens += last_tokens_;
    const bool last = step_ == tc.steps;
    if ((step_ % tc.log_every == 0 || last) && !skipped) {
      const double now = seconds();
      const double rate = window_tokens / std::max(1e-9, now - window_start);
      using C = LogColumn;
      run_dir_.append(LogEntry(LogEvent::Train, {{C::Step, double(step_)}, {C::Loss, result.last_loss}, {C::Lr, lr},
                                                 {C::GradNorm, last_grad_norm_}, {C::Tokens, double(tokens_seen_)},
                                                 {C::TokensPerS, rate}, {C::ElapsedS, now}}));
      if (out_) {
        const double eta = now / double(step_ - first_step) * double(tc.steps - step_);
        char buf[200];
        std::snprintf(buf, sizeof buf, "step %*lld/%lld | loss %.4f | lr %.2e | %6.1fk tok/s | %s elapsed | ETA %s\n",
                      (int)std::to_string(tc.steps).size(), (long long)step_, (long long)tc.steps, result.last_loss, lr,
                      rate / 1000.0, clock_text(now).c_str(), clock_text(eta).c_str());
        *out_ << buf << std::flush;
      }
      window_tokens = 0;
      window_start = now;
    }
    bool stop = false;
    if ((tc.eval_every > 0 && step_ % tc.eval_every == 0) || last) {
      const EvalResult e = result.eval = run_eval(start, /*record=*/true);
      if (tc.target_accuracy > 0 && e.accuracy >= tc.target_accuracy) {
        result.reached_target = true;
        stop = true;
        if (out_) *out_ << "reached train.target_accuracy = " << tc.target_accuracy << " at step " << step_ << "\n";
      }
    }
    const int signal = agree_on_stop(*comm_, training_stop_requested());  // all ranks stop at the same step
    if ((tc.save_every > 0 && step_ % tc.save_every == 0) || last || stop || signal != 0) {
      if (reducer_) check_same(*comm_, parameters_checksum(model_->module->parameters()), "the weights (the replicas have diverged)");
      if (writer) run_dir_.save([&](const std::string& path) { save(path); });
    }
    if (signal != 0 && !last) {
      result.interrupted_by = signal;
      if (out_) *out_ << "interrupted at step " << step_ << ": checkpoint saved to " << checkpoint_path() << "\n";
      break;
    }
    if (stop) break;
  }
  // Nothing to train (resumed in place at or past train.steps): the evaluation is reported, but not
  // logged again, since the log already ends at this step (check_resume_target refuses another directory).
  if (step_ == first_step && result.interrupted_by == 0) result.eval = run_eval(start, /*record=*/false);
  if (profile_) profile_->finish(tc.out_dir, out_, writer, /*at_end=*/true);  // a run shorter than train.profile
  result.steps = step_;
  result.seconds = seconds();
  result.tokens_per_s = tokens / std::max(1e-9, result.seconds);
  if (out_ && tc.samples > 0 && result.interrupted_by == 0) print_samples();
  run_dir_.close_log();
  return result;
}

EvalResult Trainer::evaluate() {
  if (!shards_) return relgrad::evaluate(*model_, *options_.data, options_.train.eval_batches, comm_);
  return shards_->evaluate(*options_.data, options_.train.eval_batches, comm_, shard_threads_now());
}

// Shards run side by side on the CPU, at the thread policy's count; on a GPU one after another (the
// host threads only feed it), and under an address-space limit (BatchShards::side_by_side_allowed).
int Trainer::shard_threads_now() const {
  return model_->device.is_cpu() && shards_side_by_side_ ? threads_->threads_for_next_step() : 1;
}

// A held-out evaluation: printed, and logged as an "eval" record when `record`.
EvalResult Trainer::run_eval(std::chrono::steady_clock::time_point start, bool record) {
  const EvalResult e = evaluate();
  if (record) {
    using C = LogColumn;
    LogEntry entry(LogEvent::Eval, {{C::Step, double(step_)}, {C::Loss, e.loss}, {C::Accuracy, e.accuracy}});
    if (e.rows_are_examples) entry.set(C::SequenceAccuracy, e.sequence_accuracy);
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run_dir_.append(entry.set(C::ElapsedS, elapsed_s));
  }
  if (out_) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "eval  step %lld | held-out loss %.4f | token accuracy %.2f%%", (long long)step_,
                  e.loss, 100 * e.accuracy);
    *out_ << buf;
    if (e.rows_are_examples) {
      std::snprintf(buf, sizeof buf, " | sequence accuracy %.2f%%", 100 * e.sequence_accuracy);
      *out_ << buf;
    }
    *out_ << "\n" << std::flush;
  }
  return e;
}

// The samples printed at the end of training.
void Trainer::print_samples() {
  NoGradGuard no_grad;
  std::unique_ptr<SampleModel> model = sample_model(*model_, options_.sample, options_.target_positions);
  options_.data->print_samples(*model, options_.train.samples, options_.train.out_dir, *out_);
}

// ---- checkpoints: what a Trainer's checkpoint holds and what a resume checks ---------------------
void Trainer::resume(const std::string& path) { resume(load_checkpoint(path), path); }

void Trainer::resume(const Checkpoint& ck, const std::string& path) {
  if (options_.check_resume) options_.check_resume(ck.meta.config_json, path);
  RG_CHECK(ck.optimizer_name == optimizer_->name(), "train", "cannot resume from ", path, ": it holds '",
           ck.optimizer_name, "' state, this run uses ", optimizer_->name());
  RG_CHECK(ck.meta.step <= options_.train.steps, "train", "cannot resume from ", path, ": it is at step ",
           ck.meta.step, ", beyond train.steps = ", options_.train.steps);
  if (std::optional<uint64_t> sum = options_.data->checksum()) {
    auto it = ck.meta.extra.find("data_checksum");
    std::string here = std::to_string(*sum);
    RG_CHECK(it == ck.meta.extra.end() || it->second == here, "train", "cannot resume from ", path,
             ": it was trained on a different ", options_.data->path(), " (checksum ", it->second, " vs ", here, ")");
  }
  if (scaler_) {  // fp16: the loss scale where the saved run left it (absent: a run saved before it had one)
    auto scale = ck.meta.extra.find("grad_scale"), tracker = ck.meta.extra.find("grad_scale_growth_tracker");
    if (scale != ck.meta.extra.end() && tracker != ck.meta.extra.end())
      scaler_->load_state(parse_scaler_number<double>(scale->second, "grad_scale", path),
                          parse_scaler_number<int64_t>(tracker->second, "grad_scale_growth_tracker", path));
  }
  restore(ck, *model_->module, optimizer_.get(), &default_generator());
  run_dir_.set_resumed_from(path);
  step_ = ck.meta.step;
  data_position_ = ck.meta.data_position;
  auto seen = ck.meta.extra.find("tokens_seen");
  tokens_seen_ = seen == ck.meta.extra.end() ? 0 : std::atoll(seen->second.c_str());
  if (reducer_)  // every rank read its own copy of the file: they must agree
    check_same(*comm_, parameters_checksum(model_->module->parameters()) ^ uint64_t(step_) ^ (uint64_t(data_position_) << 32),
               "the checkpoint " + path + " (weights, step, data position)");
}

void Trainer::save(const std::string& path) const {
  CheckpointMeta meta;
  meta.step = step_;
  meta.config_json = options_.config_json;
  meta.rng_seed = default_generator().seed();
  meta.rng_offset = default_generator().offset();
  meta.data_position = data_position_;
  meta.num_threads = threads_->threads_for_next_step();  // for the record: results do not depend on it
  if (std::optional<uint64_t> sum = options_.data->checksum()) meta.extra["data_checksum"] = std::to_string(*sum);
  meta.extra["tokens_seen"] = std::to_string(tokens_seen_);
  if (!options_.vocab_json.empty()) meta.extra["vocab"] = options_.vocab_json;
  if (scaler_) {  // the shortest text that reads back as the same double: a resume continues bit for bit
    char buf[32];
    auto end = std::to_chars(buf, buf + sizeof buf, scaler_->get_scale()).ptr;
    meta.extra["grad_scale"] = std::string(buf, end);
    meta.extra["grad_scale_growth_tracker"] = std::to_string(scaler_->growth_tracker());
  }
  save_checkpoint(path, *model_->module, optimizer_.get(), meta);
}

}  // namespace relgrad
