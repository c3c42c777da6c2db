// relgrad train [--config FILE] [--resume CHECKPOINT] [--key=value ...] [--device D] [--dry-run] [--help-config]
// Reads and checks the whole config, and refuses outputs that are inputs, before it writes anything.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "core/cpu/gemm_library.h"
#include "core/file_io.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/config/run_options.h"
#include "train/plot/plot.h"
#include "train/trainer/distributed.h"
#include "train/trainer/trainer.h"

namespace relgrad::cli_detail {
namespace {

std::string bytes_text(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  return fixed(bytes, u == 0 ? 0 : 2) + " " + units[u];
}

// The memory this process can still get: MemAvailable + SwapFree (/proc/meminfo), or less under an
// address-space limit (RLIMIT_AS, prlimit --as / ulimit -v) minus what the process maps already.
// `where` says which bound it is. Negative when nothing can be read (then nothing is refused).
double available_memory(std::string* where) {
  auto field = [](const std::string& file, const std::string& key) -> double {
    std::ifstream in(file);  // /proc files report size 0, so read_file (which trusts the size) does not do
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) * 1024.0;  // kB
    return -1.0;
  };
  double available = -1.0;
  {
    const double mem = field("/proc/meminfo", "MemAvailable"), swap = field("/proc/meminfo", "SwapFree");
    if (mem >= 0) available = mem + std::max(0.0, swap), *where = "MemAvailable + SwapFree in /proc/meminfo";
    struct rlimit limit {};
    if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      const double left = double(limit.rlim_cur) - std::max(0.0, field("/proc/self/status", "VmSize"));
      if (available < 0 || left < available)
        available = std::max(0.0, left), *where = "the address-space limit (RLIMIT_AS)";
    }
  }
  return available;
}

// A lower bound of the bytes one training step needs at its peak, from the config alone: the token
// tensors of the step's micro-batches (all are built before the first forward pass), and for one
// micro-batch the activations the backward pass keeps (per block at least q, k, v, the attention
// output and the feed-forward's hidden layer before and after its activation, and the attention
// weights, unless the fused core recomputes them: RunConfig::attention_weights_kept says which
// model.fused_attention counts them, "auto" included), the logits with their gradient, and the
// parameters' gradients. Sequences are counted at their shortest (the data source's shortest_row: a
// synthetic source of data.min_len tokens, a target of 1), so a run refused by it could never have
// fit; what it leaves out (the optimizer state, temporaries) only adds.
double step_bytes_lower_bound(const RunConfig& c, const TransformerConfig& m, int64_t params, int ranks,
                              std::string* shape) {
  const double word = c.train.dtype == kFloat64 ? 8.0 : 4.0;
  const double rows = std::ceil(double(c.data.batch_size) / std::max(1, ranks));
  const double C = double(m.d_model), H = double(m.n_heads), F = double(m.d_ff), V = double(m.vocab_size);
  const ShortestRow shortest = data_source(c).shortest_row(c);
  // The attention weights (H·t·keys per row) are kept unless the fused core recomputes them.
  const double weights = c.attention_weights_kept(int64_t(rows)) ? 1.0 : 0.0;
  auto block = [&](double t, double keys) {
    return rows * t * (4 * C + 2 * F) + weights * rows * H * t * keys;
  };
  double floats = 0.0, ids = 0.0;  // per micro-batch: activations, token ids (int64)
  if (c.model_type == ModelKind::EncoderDecoder) {
    const double ts = shortest.source, tt = shortest.target;
    floats = double(m.n_encoder_layers) * block(ts, ts) +
             double(m.n_decoder_layers) * (block(tt, tt) + rows * tt * 4 * C + weights * rows * H * tt * ts) +
             2 * rows * tt * V;
    ids = rows * (ts + 2 * tt);
    *shape = std::to_string(c.data.batch_size) + " rows of at least " + fixed(ts, 0) + " source and " +
             fixed(tt, 0) + " target tokens";
  } else {
    const double t = shortest.tokens;
    floats = double(m.n_decoder_layers) * block(t, t) + 2 * rows * t * V;
    ids = rows * 2 * t;
    *shape = std::to_string(c.data.batch_size) + " rows of at least " + fixed(t, 0) + " tokens";
  }
  if (ranks > 1) *shape += ", " + fixed(rows, 0) + " of them on each of " + std::to_string(ranks) + " ranks";
  return floats * word + ids * 8.0 * double(c.train.grad_accum) + double(params) * word;
}

// A vocabulary too large for this machine (--data.num_symbols=1000000000 asks for a billion ids): one
// embedding table of V × d_model values, the least any model of it holds, is compared with the memory
// the process can still get before the config is validated (which builds a synthetic task and its
// names), and the refusal names the key that set V (exit 4, docs/cli.md "Out of memory"), instead of a
// std::bad_alloc from building the vocabulary's names. A source whose size cannot be read yet (a
// missing token file) is left to validation.
void check_vocabulary_fits(const RunConfig& config) {
  int64_t vocab = 0;
  try {
    vocab = data_source(config).vocab_size(config);  // a token file's header at most, no data
  } catch (const Error&) {
    return;
  }
  const double V = double(vocab), C = double(config.model.d_model);
  const double bytes = V * C * (config.train.dtype == kFloat64 ? 8.0 : 4.0);
  std::string where;
  const double available = available_memory(&where);
  if (available < 0 || bytes <= available) return;
  const DataSource& source = data_source(config);
  const std::string origin = source.name() == "synthetic"
                                 ? "data.num_symbols = " + std::to_string(config.data.num_symbols)
                                 : "the vocabulary of " + source.data_path(config).first + " = " +
                                       source.data_path(config).second;
  throw OutOfMemoryError("[memory] out of memory: the vocabulary of " + std::to_string(vocab) + " ids (" + origin +
                         ") needs at least " + fixed(bytes, 0) + " bytes (" + bytes_text(bytes) +
                         ") for one embedding table of " + std::to_string(vocab) + " x " +
                         std::to_string(config.model.d_model) + " values, more than the " + fixed(available, 0) +
                         " bytes (" + bytes_text(available) + ") available (" + where +
                         "); config key: " + (source.name() == "synthetic" ? "data.num_symbols" : "data.source"));
}

// The last override of `key` ("--KEY=...", the one that holds), or "" when none sets it.
std::string override_of(const std::vector<std::string>& overrides, const std::string& key) {
  for (auto o = overrides.rbegin(); o != overrides.rend(); ++o)
    if (o->rfind("--" + key + "=", 0) == 0) return *o;
  return "";
}

// A run shortened below the warmup it inherits (--train.steps=60 under the default's 100 warmup
// steps, or a config file's) warms up over all of its steps, with a warning, instead of failing on a
// key the user did not type. A warmup given on the command line is the user's own: validate() refuses
// it, naming optim.warmup_steps. Returns the warning, printed once the config has validated (a config
// refused for another key gets no warning about its warmup).
std::string shorten_warmup(RunConfig& c, const std::vector<std::string>& overrides) {
  if (c.train.steps < 1 || c.optim.warmup_steps <= c.train.steps) return "";  // train.steps < 1: validate
  if (!override_of(overrides, "optim.warmup_steps").empty()) return "";
  const std::string steps = override_of(overrides, "train.steps");
  const std::string steps_typed = steps.empty() ? "" : " (" + steps + ")";
  const std::string warning = "relgrad train: warning: [config] optim.warmup_steps = " +
                              std::to_string(c.optim.warmup_steps) + " is more than train.steps = " +
                              std::to_string(c.train.steps) + steps_typed + ": warming up over all " +
                              std::to_string(c.train.steps) + " steps instead (--optim.warmup_steps=N with N <= " +
                              std::to_string(c.train.steps) + " chooses another)\n";
  c.optim.warmup_steps = c.train.steps;
  return warning;
}

int train(const std::string& config_path, const std::string& resume, const std::vector<std::string>& overrides,
          bool dry_run, std::ostream& out) {
  RunConfig config = RunConfig::defaults();
  Checkpoint resume_from;
  if (!resume.empty()) resume_from = load_checkpoint(resume);  // verified (checksums), nothing applied yet
  if (!resume.empty() && config_path.empty()) {
    // Continue with the checkpoint's own config (overrides may still change e.g. train.steps).
    load_config_json_text(config, resume_from.meta.config_json, resume + " (config)");
  }
  // A config file that cannot be read is a missing file (exit 1, as a missing checkpoint); what it
  // says is checked below, where a bad key or value is a usage error (exit 2).
  const std::string config_text = config_path.empty() ? std::string() : read_config_file(config_path);
  try {
    if (!config_path.empty()) load_config_text(config, config_text, config_path);
    apply_overrides(config, overrides);
    // A resume writes beside the checkpoint it resumed from (a copied run continues in the copy), not
    // into the out_dir stored in it, unless --train.out_dir says where.
    if (!resume.empty() && override_of(overrides, "train.out_dir").empty()) config.train.out_dir = directory_of(resume);
  } catch (const Error& e) {
    throw UsageError(e.what());  // a config problem is a usage error (exit 2)
  }
  check_vocabulary_fits(config);  // before validation builds a synthetic task's vocabulary
  try {
    const std::string warmup_warning = shorten_warmup(config, overrides);
    config.validate();
    resolve_device(config.train.device, "train.device");  // CUDA asked for but absent: before any work
    if (world().is_root()) std::cerr << warmup_warning;
  } catch (const Error& e) {
    throw UsageError(e.what());  // a config problem is a usage error (exit 2)
  }
  {
    // What the run writes (train.out_dir and its files) is none of what it reads; resuming in place
    // rewrites the checkpoint resumed from by design.
    const std::string dir = config.train.out_dir;
    const std::string log = dir + "/log." + log_format_name(config.train.log_format);
    const std::string plot = dir + "/loss." + kPlotFormatNames.name(config.train.plot_format);
    const std::pair<std::string, std::string> data = data_source(config).data_path(config);
    std::vector<NamedPath> inputs = {{"--config", config_path}, {"--" + data.first, data.second}};
    refuse_output_over_input("train", inputs, {{"the checkpoint", dir + "/checkpoint.safetensors"}});
    inputs.push_back({"--resume", resume});
    refuse_output_over_input("train", inputs,
                             {{"--train.out_dir", dir}, {"the log", log}, {"the plot", plot},
                              {"the lock", dir + "/.lock"}});
  }
  std::string schedule_change;
  if (!resume.empty()) {
    // The model is built from this config before the checkpoint's tensors are restored into it: a
    // config that names another model (--model.d_model=32, a --config of another model.type) is
    // refused naming the key that differs, and one that does not describe the tensors (model.d_model
    // = 8192 in an edited checkpoint) before it allocates anything, as load_run does for eval, sample
    // and probe.
    RunConfig derived = config;
    derived.derive_from_data();
    check_resume(derived, resume_from.meta.config_json, resume);
    check_config_fits_checkpoint(derived, resume_from, resume);
    RunConfig saved = RunConfig::defaults();
    load_config_json_text(saved, resume_from.meta.config_json, resume + " (config)");
    schedule_change = resume_schedule_note(saved, config, resume_from.meta.step);
  }
  out << "# effective config\n" << config_to_toml(config) << "\n";
  if (dry_run) return 0;
  Trainer trainer(trainer_options(config), world().is_root() ? &out : nullptr, &world());  // mpirun: rank 0 prints
  const size_t params = [&] {
    size_t n = 0;
    for (const Tensor& p : trainer.model().module->parameters()) n += static_cast<size_t>(p.numel());
    return n;
  }();
  const ThreadPolicy& threads = trainer.thread_policy();
  out << kModelKindNames.name(trainer.options().model.type) << " model, " << params << " parameters, "
      << (!trainer.model().device.is_cpu() ? "on " + trainer.model().device.str()
          : threads.adaptive() ? "up to " + std::to_string(threads.most()) + " threads (picked by timing steps)"
                               : std::to_string(threads.most()) + (threads.most() == 1 ? " thread" : " threads"))
      << (trainer.model().device.is_cpu() ? std::string(", GEMM: ") + cpu::gemm_library_name(cpu::gemm_library()) : std::string())
      << (trainer.model().device.is_cpu() ? "" : config.train.tf32 ? ", TF32 matmuls on" : ", TF32 matmuls off")
      << (config.train.precision == kFloat32 ? ""  // train.precision (autograd/autocast.h)
          : config.train.precision == kBFloat16 ? ", bf16 products (float32 accumulation)"
                                                : ", fp16 products (float32 accumulation, loss scaling)")
      << "\n";
  if (trainer.model().device.is_cpu() && config.train.tf32)  // as PyTorch's allow_tf32: a CUDA-only switch
    out << "note: train.tf32 = true has no effect on the CPU (its float32 products are always full float32)\n";
  // More OpenMP threads than cores make every parallel region wait on descheduled threads (1000 threads
  // on 2 cores: 90 s per step): the Trainer caps train.threads at the cores, and says so.
  if (!threads.capped_warning().empty() && world().is_root())
    std::cerr << "relgrad train: warning: [config] " << threads.capped_warning() << "\n";
  // A batch far too large for the machine would be killed by the kernel's OOM killer (SIGKILL, no
  // message) while it is being built: refused here instead, exit 4 (docs/cli.md "Out of memory").
  {
    std::string where, shape;
    const double available = available_memory(&where);
    const double needed = step_bytes_lower_bound(config, trainer.options().model.config, int64_t(params),
                                                 world().size(), &shape);
    // On a GPU the activations live on the device, whose allocator reports its own exit 4.
    if (trainer.model().device.is_cpu() && available >= 0 && needed > available)
      throw OutOfMemoryError("[memory] out of memory: a training step needs at least " + fixed(needed, 0) +
                             " bytes (" + bytes_text(needed) + ": " + shape +
                             ", before any is allocated), more than the " + fixed(available, 0) + " bytes (" +
                             bytes_text(available) + ") available (" + where +
                             "); reduce the batch size, the sequence length or the model size");
  }
  // One run at a time in train.out_dir: a second is refused here, before any work (docs/cli.md).
  trainer.lock_out_dir();
  if (!resume.empty()) {
    trainer.resume(resume_from, resume);  // loaded and verified above
    resume_from = Checkpoint();           // its tensors are in the model now: not held for the whole run
    out << "resumed from " << resume << " at step " << trainer.step() << "\n" << schedule_change;
  }
  const int64_t first_step = trainer.step();
  out << "run directory " << trainer.options().train.out_dir << "\n";
  // Ctrl-C / SIGTERM: finish the step, save a checkpoint, exit 128 + signal (train/trainer/trainer.h).
  clear_training_stop();
  struct sigaction stop {}, old_int {}, old_term {};
  stop.sa_handler = [](int signal) { request_training_stop(signal); };
  sigemptyset(&stop.sa_mask);
  sigaction(SIGINT, &stop, &old_int);
  sigaction(SIGTERM, &stop, &old_term);
  TrainResult r;
  try {
    r = trainer.train();
  } catch (...) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  clear_training_stop();
  if (r.interrupted_by != 0) {
    out << "stopped by signal " << r.interrupted_by << " at step " << r.steps << "; continue with: relgrad train --resume "
        << trainer.checkpoint_path() << "\n";
    return 128 + (r.interrupted_by > 0 ? r.interrupted_by : 0);
  }
  const TrainLoopConfig& loop = trainer.options().train;
  const std::string plot_path = loop.out_dir + "/loss." + kPlotFormatNames.name(loop.plot_format);
  // A finished run resumed in place trained nothing: its plot stays as it was, like its log.
  const bool trained = r.steps > first_step;
  if (world().is_root() && trained) plot_training_log(trainer.log_path(), plot_path);  // the log is rank 0's
  out << "done: " << r.steps << " steps, held-out token accuracy " << fixed(100 * r.eval.accuracy, 2) << "%, ";
  if (r.eval.rows_are_examples)  // a language model's windows are cut anywhere: no sequence accuracy
    out << "sequence accuracy " << fixed(100 * r.eval.sequence_accuracy, 2) << "%, ";
  out << fixed(r.seconds, 1) << " s, " << fixed(r.tokens_per_s, 0) << " tokens/s\n"
      << "checkpoint " << trainer.checkpoint_path() << "\nlog        " << trainer.log_path() << "\nplot       "
      << plot_path << (trained ? "" : " (nothing trained: nothing written)") << "\n";
  return 0;
}

class TrainCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("-c,--config", config_path_, "TOML or JSON config (default: the built-in default run)");
    app.add_option("--resume", resume_, "checkpoint to continue from (its config, unless --config is given)");
    app.add_flag("--dry-run", dry_run_, "print the effective config and stop");
    app.add_flag("--help-config", help_config_, "list every config key with type and default");
    app.add_option("--device", device_, "cpu or cuda: shorthand for --train.device=...");
    app.allow_extras();  // the --key=value overrides
  }

  int run(CommandLine& app, std::ostream& out) override {
    if (help_config_) {
      out << config_help();
      return 0;
    }
    std::vector<std::string> overrides = app.remaining();
    for (size_t i = 0; i < overrides.size(); ++i) {
      const std::string& o = overrides[i];
      if (o.rfind("--", 0) == 0 && o.find('=') != std::string::npos) continue;
      std::string hint;
      // "--train.steps 5": a config key with its value after a blank, which CLI11 cannot know.
      if (o.rfind("--", 0) == 0 && is_config_key(o.substr(2)))
        hint = i + 1 < overrides.size() && overrides[i + 1].rfind("--", 0) != 0
                   ? ": write " + o + "=" + overrides[i + 1] + " (a config override takes '=', not a blank)"
                   : ": write " + o + "=VALUE (a config override takes '=')";
      throw UsageError("[config] '" + o + "' is neither an option of relgrad train nor a --key=value override" +
                       hint);
    }
    // After the --key=value overrides, so that it wins over a --train.device given too.
    if (!device_.empty()) overrides.push_back("--train.device=" + device_);
    return train(config_path_, resume_, overrides, dry_run_, out);
  }

 private:
  std::string config_path_, resume_, device_;
  bool dry_run_ = false, help_config_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace relgrad::cli_detail
