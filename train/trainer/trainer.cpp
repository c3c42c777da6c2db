// The training loop (see trainer.h for the step, determinism and output contracts).
#include "train/trainer/trainer.h"

#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/backend/matmul.h"
#include "core/base/error.h"
#include "core/file_io.h"
#include "train/optim/clip.h"
#include "train/optim/param_groups.h"
#include "train/trainer/nonfinite.h"
#include "train/trainer/profiler.h"
#include "train/trainer/sampler.h"

namespace relgrad {
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

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void make_directories(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && !file_exists(partial))
        RG_CHECK(::mkdir(partial.c_str(), 0755) == 0 || errno == EEXIST, "train", "cannot create directory '",
                 partial, "': ", std::strerror(errno));
    }
    if (i < dir.size()) partial += dir[i];
  }
  struct stat st {};
  RG_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "train", "train.out_dir '", dir, "' is not a directory");
}

// The end of a NonFiniteError: a failed step writes nothing, so the last checkpoint is intact.
std::string checkpoint_note(const std::string& path) {
  return file_exists(path) ? "The last checkpoint, " + path + ", is left as it was"
                           : "No checkpoint was written before this step";
}

}  // namespace

// ---- interruption ------------------------------------------------------------------------------
namespace {
std::atomic<int> g_stop_signal{0};
}  // namespace
void request_training_stop(int signal) { g_stop_signal.store(signal == 0 ? -1 : signal); }
void clear_training_stop() { g_stop_signal.store(0); }
int training_stop_requested() { return g_stop_signal.load(); }

// ---- Trainer -------------------------------------------------------------------------------------
namespace {
TrainerOptions prepared(TrainerOptions o) {
  RG_CHECK(o.data != nullptr, "train", "TrainerOptions::data is not set");
  return o;
}
}  // namespace

Trainer::Trainer(TrainerOptions options, std::ostream* out, Communicator* comm)
    : options_(prepared(std::move(options))), out_(out), comm_(comm ? comm : &world()) {
  const Device device = resolve_device(options_.train.device, "train.device");
  RG_CHECK(device.is_cpu() || comm_->size() == 1, "train", "train.device = ", options_.train.device, " with ",
           comm_->size(), " ranks: data-parallel training runs on the CPU only (train/trainer/distributed.h); use "
           "train.device = \"cpu\" or a single process");
  Generator init(options_.train.seed);
  model_ = build_model(options_.model, &init);
  model_.to(device);  // before the optimizer: its state is allocated beside the weights
  // train.tf32: cuBLAS's float32 GEMMs in TF32 for this Trainer's life (a GPU setting; no effect on the CPU).
  tf32_before_ = backend::allow_tf32();
  backend::set_allow_tf32(options_.train.tf32);
  if (options_.train.profile > 0) profile_ = std::make_unique<StepProfile>(options_.train.profile, device);
  // On a GPU the host threads only feed the device: the count is fixed (train.threads, capped).
  const int64_t requested = device.is_cpu() || options_.train.threads > 0 ? options_.train.threads
                                                                          : int64_t(omp_get_max_threads());
  threads_ = std::make_unique<ThreadPolicy>(requested, omp_get_num_procs(), omp_get_max_threads());
  threads_->set_for_next_step();
  default_generator().set_state(options_.train.seed ^ kDropoutKey, 0);
  const OptimConfig& o = options_.optim;
  ScaledGroups scaled = scaled_positional_groups(model_.module->named_parameters(), o.lr, o.weight_decay,
                                                 o.positional_lr_scale);
  group_lr_scale_ = scaled.lr_scale;
  const std::vector<ParamGroup>& groups = scaled.groups;
  if (o.name == "sgd")
    optimizer_ = std::make_unique<SGD>(groups, SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov));
  else if (o.name == "adam")
    optimizer_ = std::make_unique<Adam>(groups, AdamOptions(o.lr).betas(o.beta1, o.beta2).eps(o.eps));
  else
    optimizer_ = std::make_unique<AdamW>(groups, AdamWOptions(o.lr).betas(o.beta1, o.beta2).eps(o.eps));
  auto decay = o.decay == "cosine" ? LrSchedule::Decay::Cosine
               : o.decay == "linear" ? LrSchedule::Decay::Linear : LrSchedule::Decay::Constant;
  schedule_ = LrSchedule(o.lr, o.warmup_steps, options_.train.steps, o.min_lr, decay);
  if (comm_->size() > 1) start_data_parallel();
}

// Several ranks (train/trainer/distributed.h): the same config everywhere, rank 0's weights, this rank's rows.
void Trainer::start_data_parallel() {
  comm_->set_timeout(options_.train.collective_timeout_s);
  const std::string& json = options_.config_json;
  check_same(*comm_, fnv1a64(json.data(), json.size()), "the config");
  rows_ = shard_rows(options_.data->batch_size(), comm_->rank(), comm_->size());
  const TensorList params = model_.module->parameters();
  for (const Tensor& p : params) broadcast(*comm_, p, 0);
  reducer_ = std::make_unique<GradientReducer>(*comm_, params);
  if (out_)
    *out_ << "data parallel: " << comm_->size() << " ranks (" << comm_->backend() << "), rank 0 trains rows ["
          << rows_.begin << ", " << rows_.end << ") of " << options_.data->batch_size() << "; all-reduce of "
          << reducer_->bytes_per_reduce() << " bytes per step (" << reducer_->buckets()
          << (reducer_->buckets() == 1 ? " bucket)\n" : " buckets)\n");
}

Trainer::~Trainer() { backend::set_allow_tf32(tf32_before_); }

std::string Trainer::checkpoint_path() const { return options_.train.out_dir + "/checkpoint.safetensors"; }
std::string Trainer::log_path() const { return options_.train.out_dir + "/log." + options_.train.log_format; }

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
  restore(ck, *model_.module, optimizer_.get(), &default_generator());
  resumed_from_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    resumed_device_ = uint64_t(st.st_dev), resumed_inode_ = uint64_t(st.st_ino);
  step_ = ck.meta.step;
  data_position_ = ck.meta.data_position;
  auto seen = ck.meta.extra.find("tokens_seen");
  tokens_seen_ = seen == ck.meta.extra.end() ? 0 : std::atoll(seen->second.c_str());
  resumed_ = true;
  if (reducer_)  // every rank read its own copy of the file: they must agree
    check_same(*comm_, parameters_checksum(model_.module->parameters()) ^ uint64_t(step_) ^ (uint64_t(data_position_) << 32),
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
  save_checkpoint(path, *model_.module, optimizer_.get(), meta);
}

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
  model_.module->train();
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
  double loss_value = 0.0;
  RowShardGuard dropout_rows(reducer_ ? rows_ : RowRange{});  // this rank's rows draw as in the whole batch
  try {
    DetectAnomalyGuard anomaly(options_.train.detect_anomaly || AnomalyMode::is_enabled());
    for (const Batch& host : micro) {
      const Batch b = host.to(model_.device);  // one micro-batch on the device at a time
      Tensor logits = model_.logits(b);  // (B, T, V)
      const int64_t B = logits.size(0), T = logits.size(1), V = logits.size(2);
      Tensor loss = cross_entropy(logits.reshape({B * T, V}), RunModel::targets(b).reshape({B * T}),
                                  CrossEntropyOptions().set_reduction(Reduction::Sum)) /
                    static_cast<double>(total_targets);
      loss.backward();
      loss_value += loss.item();
    }
  } catch (const NonFiniteError& e) {  // anomaly detection named the op; add the step
    throw NonFiniteError(detail::concat("[train] step ", step_, " at lr ", lr, ": ", e.what()));
  }
  if (reducer_) {  // several ranks: the step's gradient and loss are sums over every rank's rows
    reducer_->reduce();
    loss_value = comm_->all_reduce_sum(loss_value);
  }
  if (after_backward_) after_backward_(*this);
  const TensorList params = model_.module->parameters();
  last_grad_norm_ = std::isfinite(loss_value)
                        ? clip_grad_norm_(params, options_.optim.clip > 0 ? options_.optim.clip : INFINITY)
                        : NAN;
  if (!std::isfinite(loss_value) || !std::isfinite(last_grad_norm_)) {
    const NonFiniteDiagnosis bad = diagnose_step(loss_value, last_grad_norm_, model_.module->named_parameters());
    const std::string warning =
        nonfinite_.on_nonfinite(options_.train.nonfinite, options_.train.max_skipped_steps, step_, lr, bad,
                                failure_note());  // or throws
    // Skipped (PyTorch's GradScaler): weights and optimizer state (moments, step counts) stay bit for
    // bit; the step number (so the lr schedule) and the data position advance.
    data_position_ += options_.train.grad_accum;
    ++step_;  // the log counts steps done, as for "train" records
    write_record("skip", {{"step", double(step_)}, {"loss", loss_value}, {"lr", lr}, {"grad_norm", last_grad_norm_}},
                 {{"tensor", bad.tensor.name}});
    if (out_) *out_ << "warning: " << warning << "\n" << std::flush;
    return loss_value;
  }
  optimizer_->step();
  // One read of the weights: an update that went non-finite (a NaN optimizer state, an overflow)
  // is caught at the step that did it. It cannot be undone, so it stops even in "skip" mode.
  if (!all_finite(params))
    throw update_went_nonfinite(step_, lr, last_grad_norm_,
                                first_nonfinite(model_.module->named_parameters(), /*grads=*/false),
                                failure_note());
  nonfinite_.on_applied();
  data_position_ += options_.train.grad_accum;
  ++step_;
  return loss_value;
}

void Trainer::open_log(bool fresh) {
  // A fresh run in a directory that holds an earlier run logs to log.new.* until its first checkpoint.
  const std::string path = fresh && rotate_pending_ ? pending_log_path() : log_path();
  const bool csv = options_.train.log_format == "csv";
  // The log is appended to, not replaced atomically: like AtomicFile, never write through a symlink or
  // into a FIFO or device.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0)
    RG_CHECK(S_ISREG(st.st_mode), "train", path, ": exists and is ",
             S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file",
             ": refusing to write the log into it");
  if (fresh) {
    if (file_exists(path))
      RG_CHECK(::unlink(path.c_str()) == 0, "train", path, ": cannot remove the leftover log of a run that ",
               "ended before its first checkpoint: ", std::strerror(errno));
  } else if (file_exists(path)) {
    // Keep the records up to the resumed step: the ones after it describe steps that are redone.
    const std::string before = read_file(path, "train");
    std::istringstream in(before);
    std::string line, kept;
    bool header = csv;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      if (header) { kept += line + "\n"; header = false; continue; }
      int64_t step = -1;
      // A torn line (the run was killed mid-write) is dropped: appending after it would bury it mid-file.
      const bool complete = csv ? std::count(line.begin(), line.end(), ',') == 9 : line.back() == '}';
      if (!complete) continue;
      if (csv) {
        size_t comma = line.find(',');
        if (comma != std::string::npos) step = std::atoll(line.c_str() + comma + 1);
      } else {
        size_t at = line.find("\"step\":");
        if (at != std::string::npos) step = std::atoll(line.c_str() + at + 7);
      }
      if (step >= 0 && step <= step_) kept += line + "\n";
    }
    // Rewritten only once this run writes its first record or checkpoint (open_pending_log): a resume
    // that fails before (a NaN at its first step) leaves the log as it was.
    if (kept != before) log_rewrite_ = std::make_unique<std::string>(std::move(kept));
  }
  if (!fresh) {
    log_open_pending_ = true;
    return;
  }
  open_log_file(path);
}

void Trainer::open_pending_log() {
  if (!log_open_pending_) return;
  log_open_pending_ = false;
  if (log_rewrite_) write_file_atomic(log_path(), *log_rewrite_, "train");
  log_rewrite_.reset();
  open_log_file(log_path());
}

void Trainer::open_log_file(const std::string& path) {
  const bool csv = options_.train.log_format == "csv";
  const bool new_file = !file_exists(path);
  log_ = std::make_unique<std::ofstream>(path, std::ios::app);
  RG_CHECK(log_->good(), "train", "cannot open the log ", path, " for writing");
  if (csv && new_file) *log_ << "event,step,loss,accuracy,sequence_accuracy,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n";
}

void Trainer::write_record(const std::string& event, const std::vector<std::pair<std::string, double>>& values,
                           const std::vector<std::pair<std::string, std::string>>& texts) {
  open_pending_log();
  if (!log_) return;
  std::ostringstream line;
  line.precision(9);
  if (options_.train.log_format == "csv") {
    static const char* columns[] = {"step", "loss", "accuracy", "sequence_accuracy", "lr", "grad_norm", "tokens",
                                    "tokens_per_s", "elapsed_s"};
    line << event;
    for (const char* col : columns) {
      line << ',';
      for (const auto& [k, v] : values)
        if (k == col) line << v;
    }
  } else {
    line << "{\"event\":\"" << event << "\"";
    for (const auto& [k, v] : values) {
      line << ",\"" << k << "\":";
      if (std::isfinite(v)) line << v;
      else line << "\"" << (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") << "\"";
    }
    for (const auto& [k, v] : texts) {  // e.g. "encoder.embed.weight grad"; control characters become spaces
      line << ",\"" << k << "\":\"";
      for (char ch : v) line << (ch == '"' || ch == '\\' ? "\\" : "") << (static_cast<unsigned char>(ch) < 32 ? ' ' : ch);
      line << "\"";
    }
    line << "}";
  }
  *log_ << line.str() << "\n";
  log_->flush();
}

// ---- the run directory -------------------------------------------------------------------------------
std::string Trainer::pending_log_path() const {
  return options_.train.out_dir + "/log.new." + options_.train.log_format;
}

// The end of a NonFiniteError: a failed step writes nothing, so the last checkpoint is intact.
std::string Trainer::failure_note() const {
  if (rotate_pending_)
    return "No checkpoint of this run was written before this step; the earlier run's files in " +
           options_.train.out_dir + " are left as they were";
  return checkpoint_note(checkpoint_path());
}

// Rank 0 does `action` (the others write nothing); with several ranks every rank learns whether it
// failed, so that the others stop at once instead of waiting for rank 0 until the collective timeout.
void Trainer::writer_does(const std::string& what, const std::function<void()>& action) {
  std::exception_ptr failed;
  if (comm_->is_root()) {
    try {
      action();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (comm_->size() > 1 && comm_->all_reduce_sum(failed ? 1.0 : 0.0) > 0 && !failed)
    throw Error("[train] rank 0 could not " + what + " (rank 0's error says why)");
  if (failed) std::rethrow_exception(failed);
}

void Trainer::lock_out_dir() {
  if (out_dir_locked_) return;
  writer_does("lock train.out_dir " + options_.train.out_dir, [&] {
    make_directories(options_.train.out_dir);
    lock_ = std::make_unique<DirectoryLock>(options_.train.out_dir, "train", "train.out_dir");
    if (!lock_->warning().empty() && out_) *out_ << "warning: " << lock_->warning() << "\n";
  });
  out_dir_locked_ = true;
}

// Resuming writes out_dir/checkpoint.safetensors and rewrites the log: refused when that checkpoint is
// not the file resumed from and is another run's or further on (it would be lost), and when a log is
// there without a checkpoint (it cannot be told whose it is, and its records would be spliced in).
void Trainer::check_resume_target() const {
  const std::string target = checkpoint_path(), dir = options_.train.out_dir;
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && uint64_t(st.st_dev) == resumed_device_ &&
      uint64_t(st.st_ino) == resumed_inode_)
    return;  // resuming in place: the usual case
  const std::string refused = "cannot resume from " + resumed_from_ + " into train.out_dir " + dir + ": ";
  // A finished checkpoint has nothing to train: another directory would get no training record (and
  // no plot). In place it is evaluated and reported, writing nothing (train_loop).
  RG_CHECK(step_ < options_.train.steps, "train", refused, "it is at step ", step_, " and train.steps = ",
           options_.train.steps, ", so there is nothing to train; give --train.steps=N with N > ", step_,
           " to continue there, or evaluate it with relgrad eval ", resumed_from_);
  const std::string way_out =
      "; continue in another directory (--train.out_dir=DIR), or move that file away first";
  if (file_exists(target)) {
    std::string why;
    Checkpoint there;
    try {
      there = load_checkpoint(target);
    } catch (const Error& e) {
      why = "cannot be read (" + std::string(e.what()) + "), so it cannot be told whether it is this run's";
    }
    if (why.empty() && options_.check_resume) {
      try {
        options_.check_resume(there.meta.config_json, target);
      } catch (const Error& e) {
        // "[train] cannot resume from <target>: train.seed is 2 there and 1 here (keys ...)" → what differs
        std::string differs = e.what();
        const size_t at = differs.find(target + ": ");
        if (at != std::string::npos) differs = differs.substr(at + target.size() + 2);
        differs = differs.substr(0, differs.find(" (keys"));
        why = "is another run's (" + differs + ")";
      }
    }
    if (why.empty() && there.meta.step > step_)
      why = "is at step " + std::to_string(there.meta.step) + ", later than the resumed step " +
            std::to_string(step_);
    RG_CHECK(why.empty(), "train", refused, target, " ", why, ", and resuming would overwrite it", way_out);
  } else if (file_exists(log_path())) {
    RG_CHECK(false, "train", refused, log_path(),
             " is there without a checkpoint, so it may be another run's log, ",
             "and resuming would rewrite it", way_out);
  }
}

void Trainer::prepare_out_dir() {
  if (resumed_) {
    check_resume_target();
    open_log(/*fresh=*/false);
    return;
  }
  // Nothing is renamed yet: a run that fails before its first checkpoint leaves the earlier run as it was.
  rotate_pending_ = file_exists(checkpoint_path()) || file_exists(log_path());
  open_log(/*fresh=*/true);
}

void Trainer::save_in_out_dir() {
  if (!rotate_pending_) {
    save(checkpoint_path());
    open_pending_log();  // a resume's log is rewritten now at the latest, to match the checkpoint
    return;
  }
  // The first checkpoint of a fresh run in a directory that held an earlier run: only now, with
  // something of its own to keep, does this run move the earlier run's files to *.prev. The checkpoint
  // is written first under another name, so a failed save (a full disk) still renames nothing.
  const std::string dir = options_.train.out_dir;
  const std::string next = dir + "/checkpoint.new.safetensors";
  save(next);
  auto move = [&](const std::string& from, const std::string& to) {
    if (file_exists(from))
      RG_CHECK(::rename(from.c_str(), to.c_str()) == 0, "train", "cannot rename ", from, " to ", to, ": ",
               std::strerror(errno));
  };
  const std::string prev = dir + "/checkpoint.prev.safetensors";
  const bool had_checkpoint = file_exists(checkpoint_path());
  move(checkpoint_path(), prev);
  move(log_path(), dir + "/log.prev." + options_.train.log_format);
  move(pending_log_path(), log_path());  // the open log follows its file: appending goes on
  move(next, checkpoint_path());
  fsync_directory(dir, "train");
  rotate_pending_ = false;
  if (out_)
    *out_ << "note: " << dir << " held an earlier run; its "
          << (had_checkpoint ? "checkpoint is now " + prev + " and its " : "") << "log is now log.prev."
          << options_.train.log_format << "\n";
}

TrainResult Trainer::train() {
  const bool own_lock = !out_dir_locked_;  // taken here, released at the end (lock_out_dir() keeps it)
  lock_out_dir();
  try {
    writer_does("prepare train.out_dir " + options_.train.out_dir, [&] { prepare_out_dir(); });
    TrainResult result = train_loop();
    if (own_lock) lock_.reset(), out_dir_locked_ = false;
    return result;
  } catch (...) {
    log_.reset();
    // The failed run's own log, when it had not reached its first checkpoint, is not kept.
    if (rotate_pending_ && comm_->is_root()) ::unlink(pending_log_path().c_str());
    rotate_pending_ = false;
    log_open_pending_ = false;  // a resume's log is left as it was
    log_rewrite_.reset();
    if (own_lock) lock_.reset(), out_dir_locked_ = false;
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
  auto run_eval = [&](bool record = true) {
    EvalResult e = evaluate();
    result.eval = e;
    if (record) {
      std::vector<std::pair<std::string, double>> values{{"step", double(step_)}, {"loss", e.loss},
                                                         {"accuracy", e.accuracy}};
      if (e.rows_are_examples) values.emplace_back("sequence_accuracy", e.sequence_accuracy);
      values.emplace_back("elapsed_s", seconds());
      write_record("eval", values);
    }
    if (out_) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "eval  step %lld | held-out loss %.4f | token accuracy %.2f%%",
                    (long long)step_, e.loss, 100 * e.accuracy);
      *out_ << buf;
      if (e.rows_are_examples) {
        std::snprintf(buf, sizeof buf, " | sequence accuracy %.2f%%", 100 * e.sequence_accuracy);
        *out_ << buf;
      }
      *out_ << "\n" << std::flush;
    }
    return e;
  };
  while (step_ < tc.steps) {
    const double lr = schedule_.lr_at(step_);
    const int64_t skipped_before = nonfinite_.total();
    const double loss = train_step();
    const bool skipped = nonfinite_.total() > skipped_before;  // logged by train_step as a "skip" record
    result.skipped_steps += skipped;
    if (!skipped) result.last_loss = loss;
    tokens += last_tokens_;
    tokens_seen_ += last_tokens_;
    window_tokens += last_tokens_;
    const bool last = step_ == tc.steps;
    if ((step_ % tc.log_every == 0 || last) && !skipped) {
      const double now = seconds();
      const double rate = window_tokens / std::max(1e-9, now - window_start);
      write_record("train", {{"step", double(step_)}, {"loss", result.last_loss}, {"lr", lr},
                             {"grad_norm", last_grad_norm_}, {"tokens", double(tokens_seen_)}, {"tokens_per_s", rate},
                             {"elapsed_s", now}});
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
      EvalResult e = run_eval();
      if (tc.target_accuracy > 0 && e.accuracy >= tc.target_accuracy) {
        result.reached_target = true;
        stop = true;
        if (out_) *out_ << "reached train.target_accuracy = " << tc.target_accuracy << " at step " << step_ << "\n";
      }
    }
    const int signal = agree_on_stop(*comm_, training_stop_requested());  // all ranks stop at the same step
    if ((tc.save_every > 0 && step_ % tc.save_every == 0) || last || stop || signal != 0) {
      if (reducer_) check_same(*comm_, parameters_checksum(model_.module->parameters()), "the weights (the replicas have diverged)");
      if (writer) save_in_out_dir();
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
  if (step_ == first_step && result.interrupted_by == 0) run_eval(/*record=*/false);
  if (profile_) profile_->finish(tc.out_dir, out_, writer, /*at_end=*/true);  // a run shorter than train.profile
  result.steps = step_;
  result.seconds = seconds();
  result.tokens_per_s = tokens / std::max(1e-9, result.seconds);
  if (out_ && tc.samples > 0 && result.interrupted_by == 0) print_samples();
  log_.reset();
  return result;
}

// ---- the samples printed at the end of training ---------------------------------------------------
namespace {
// The trained model lent to Dataset::print_samples (train/data/dataset.h).
class TrainedSampleModel : public SampleModel {
 public:
  TrainedSampleModel(RunModel& model, const SamplingOptions& options,
                     const std::function<Tensor(int64_t)>& target_positions)
      : model_(model), options_(options), target_positions_(target_positions) {}
  std::vector<int64_t> answer(const std::vector<int64_t>& source, int64_t max_new_tokens) override {
    SamplingOptions greedy;
    greedy.temperature = 0.0;
    greedy.max_new_tokens = max_new_tokens;
    if (model_.encoder_decoder) {
      Tensor src = from_vector<int64_t>(source, {1, (int64_t)source.size()});
      // An explicitly aligned model gets its queries' places from the run (TrainerOptions::target_positions).
      Tensor positions;
      if (model_.encoder_decoder->config.cross_explicit) {
        RG_CHECK(static_cast<bool>(target_positions_), "train",
                 "the model places cross-attention queries explicitly, but the run gives no target_positions");
        positions = target_positions_(1 + max_new_tokens);
      }
      std::vector<int64_t> seq =
          generate(*model_.encoder_decoder, src, Tensor(), greedy, true, positions).to_vector<int64_t>();
      return {seq.begin() + 1, seq.end()};  // after the BOS the decoder starts from
    }
    std::vector<int64_t> prompt = source;
    prompt.push_back(kBos);
    Tensor p = from_vector<int64_t>(prompt, {1, (int64_t)prompt.size()});
    std::vector<int64_t> seq = generate(*model_.decoder_lm, p, greedy).to_vector<int64_t>();
    return {seq.begin() + prompt.size(), seq.end()};
  }
  std::vector<int64_t> continue_prompt(const std::vector<int64_t>& prompt, bool stop_at_eos) override {
    RG_CHECK(model_.decoder_lm != nullptr, "train", "samples from a prompt need a decoder-only model");
    SamplingOptions o = options_;
    if (!stop_at_eos) o.eos = -1;
    Tensor p = from_vector<int64_t>(prompt, {1, (int64_t)prompt.size()});
    return generate(*model_.decoder_lm, p, o).to_vector<int64_t>();
  }

 private:
  RunModel& model_;
  SamplingOptions options_;
  std::function<Tensor(int64_t)> target_positions_;
};
}  // namespace

void Trainer::print_samples() {
  NoGradGuard no_grad;
  TrainedSampleModel model(model_, options_.sample, options_.target_positions);
  options_.data->print_samples(model, options_.train.samples, options_.train.out_dir, *out_);
}

}  // namespace relgrad
