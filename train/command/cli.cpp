// The `relgrad` command: argument parsing (CLI11), dispatch to the subcommands (cli_commands.cpp) and
// the one-line error report with its exit code (see cli.h for the contract).
#include "train/command/cli.h"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <sstream>

#include "core/allocator.h"
#include "core/backend/matmul.h"
#include "core/device.h"
#include "core/base/error.h"
#include "core/file_io.h"
#include "train/command/cli_commands.h"
#include "train/config/config.h"
#include "train/trainer/distributed.h"
#include "train/instruments/experiment_limits.h"
#include "train/instruments/experiments.h"
#include "train/instruments/length_bench.h"
#include "train/instruments/music_bench.h"
#include "train/instruments/probe.h"
#include "train/trainer/nonfinite.h"
#include "train/plot/plot.h"
#include "train/data/token_file.h"

namespace relgrad {
using namespace cli_detail;  // UsageError, SampleArgs, cmd_*

namespace {

// `relgrad --version`: the project's version (CMakeLists.txt) and what this binary was built with.
std::string version_text() {
#ifndef RELGRAD_VERSION
#define RELGRAD_VERSION "unknown"
#endif
#ifndef RELGRAD_BUILD_TYPE
#define RELGRAD_BUILD_TYPE "unknown"
#endif
  auto yes = [](bool built) { return built ? "yes" : "no"; };
  return std::string("relgrad ") + RELGRAD_VERSION + "\nbuild type: " + RELGRAD_BUILD_TYPE +
         "\nCUDA: " + yes(cuda_built()) + "\nMPI: " + yes(mpi_built()) + "\nNCCL: " + yes(nccl_built());
}

bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

// "a,b,c" → {"a", "b", "c"}; empty → {}; an empty item ("a,,b", a trailing comma) is a usage error.
std::vector<std::string> comma_list(const std::string& text, const std::string& option,
                                    const std::string& command = "music-bench") {
  std::vector<std::string> items;
  if (text.empty()) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty())
      throw UsageError("[" + command + "] " + option + " " + text + ": an empty item between commas");
    items.push_back(item);
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

// "1,2,3" → {1, 2, 3}: non-negative integers, a usage error otherwise.
std::vector<uint64_t> seed_list(const std::string& text, const std::string& command) {
  std::vector<uint64_t> seeds;
  for (const std::string& seed : comma_list(text, "--seeds", command)) {
    if (seed.find_first_not_of("0123456789") != std::string::npos || seed.size() > 19)
      throw UsageError("[" + command + "] --seeds " + text + ": '" + seed +
                       "' is not a non-negative integer");
    seeds.push_back(std::stoull(seed));
  }
  return seeds;
}

int run_command(int argc, const char* const* argv, std::ostream& out_all, std::ostream& err,
                std::string& command);

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out_all, std::ostream& err) {
  std::string command = "relgrad";
  int code = run_command(argc, argv, out_all, err, command);
  // What a command printed must have reached stdout: `relgrad sample > /dev/full` is an error (exit 1,
  // or the command's own code when it failed already), not a success whose output went nowhere.
  if (world().is_root()) {
    errno = 0;
    out_all.flush();
    if (!out_all) {
      const int why = errno;
      err << command << ": error: [output] could not write to standard output"
          << (why != 0 ? std::string(": ") + std::strerror(why) : std::string()) << "\n";
      if (code == 0) code = 1;
    }
  }
  return code;
}

namespace {

// sample / eval --tf32: TF32 GEMMs for the command (backend::set_allow_tf32), the process's setting after.
struct Tf32Scope {
  explicit Tf32Scope(bool on) : before(backend::allow_tf32()) { backend::set_allow_tf32(on); }
  ~Tf32Scope() { backend::set_allow_tf32(before); }
  bool before;
};

int run_command(int argc, const char* const* argv, std::ostream& out_all, std::ostream& err,
                std::string& command) {
  // Under mpirun only rank 0 prints; errors come from every rank, naming it (docs/distributed.md).
  std::ostream silent(nullptr);
  std::ostream& out = world().is_root() ? out_all : silent;
  const std::string rank_note = world().size() > 1 ? " (" + world().where() + ")" : "";
  CLI::App app{"relgrad: train, sample, evaluate, inspect and plot relative-attention transformers", "relgrad"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");
  app.set_version_flag("--version", version_text(),
                       "the version, build type and whether CUDA, MPI and NCCL are built in");

  auto* train = app.add_subcommand("train", "train a model; --key=value overrides any config key");
  std::string config_path, resume;
  bool dry_run = false, help_config = false;
  train->add_option("-c,--config", config_path, "TOML or JSON config (default: the built-in default run)");
  train->add_option("--resume", resume, "checkpoint to continue from (its config, unless --config is given)");
  train->add_flag("--dry-run", dry_run, "print the effective config and stop");
  train->add_flag("--help-config", help_config, "list every config key with type and default");
  std::string train_device;
  train->add_option("--device", train_device, "cpu or cuda: shorthand for --train.device=...");
  train->allow_extras();

  auto* sample = app.add_subcommand("sample", "generate from a checkpoint");
  SampleArgs sa;
  sample->add_option("checkpoint", sa.checkpoint, "checkpoint file")->required();
  sample->add_option("--input", sa.input, "synthetic-task models: source tokens by name, e.g. \"4 1 7\"");
  sample->add_option("--prompt", sa.prompt, "text models: the prompt");
  sample->add_option("-n,--num", sa.num, "samples (default: 4 held-out inputs for a synthetic task, 1 otherwise)")->check(CLI::Range(1, 1000));
  sample->add_option("--max-new-tokens", sa.max_new_tokens, "default: the config's sample.max_new_tokens")->check(CLI::Range(1, 1 << 20));
  sample->add_option("--temperature", sa.temperature, "0 = greedy")->check(CLI::Range(0.0, 1e6));
  sample->add_option("--top-k", sa.top_k, "0 = off")->check(CLI::Range(0, 1 << 30));
  sample->add_option("--top-p", sa.top_p, "1 = off")->check(CLI::Range(0.0, 1.0));
  sample->add_option("--seed", sa.seed, "sampling seed")->check(CLI::Range(int64_t(0), INT64_MAX));
  sample->add_option("--format", sa.format,
                     "text (print) or midi (music and chorale models: write .mid files)")
      ->check(CLI::IsMember({"text", "midi"}));
  sample->add_option("-o,--output", sa.output, "--format midi: output file (default sample.mid; _N added for -n > 1)");
  sample->add_option("--prompt-midi", sa.prompt_midi,
                     "music models and chorale continuations: continue this .mid file");
  sample->add_option("--chorale", sa.chorale,
                     "chorale models: the valid chorale to continue or harmonise (default 0)")
      ->check(CLI::Range(int64_t(0), INT64_MAX));
  sample->add_option("--melody", sa.melody, "chorale harmonisers: harmonise this .mid file's melody");
  sample->add_option("--device", sa.device, "cpu (default), cuda or cuda:N: where the model runs");
  bool sample_tf32 = false, eval_tf32 = false;
  sample->add_flag("--tf32", sample_tf32, "TF32 for float32 GEMMs on the GPU, as train.tf32 (no effect on the CPU)");

  auto* eval = app.add_subcommand("eval", "held-out loss and accuracy of a checkpoint, or dump logits");
  std::string eval_ckpt, dump_path, eval_input, eval_target;
  int64_t eval_batches = 8;
  eval->add_option("checkpoint", eval_ckpt, "checkpoint file")->required();
  eval->add_option("--batches", eval_batches, "held-out batches");
  eval->add_option("--dump-logits", dump_path, "write logits (and their inputs) to this safetensors file");
  eval->add_option("--input", eval_input, "tokens to dump logits for (default: held-out batch 0)");
  eval->add_option("--target", eval_target, "encoder-decoder: target tokens fed after <bos>");
  std::string eval_device = "cpu";
  eval->add_option("--device", eval_device, "cpu (default), cuda or cuda:N: where the model runs");
  eval->add_flag("--tf32", eval_tf32, "TF32 for float32 GEMMs on the GPU, as train.tf32 (no effect on the CPU)");
  eval->allow_extras();  // --data.KEY=VALUE: the held-out data at other lengths (kEvalDataKeys)
  eval->footer("--data.KEY=VALUE evaluates on other held-out data, e.g. --data.max_len=256 (" +
               eval_data_keys_text() + ")");

  auto* inspect = app.add_subcommand("inspect", "header, config, step, tensor table and checksum verdict");
  std::string inspect_path;
  inspect->add_option("checkpoint", inspect_path, "checkpoint file")->required();

  auto* render = app.add_subcommand("render", "render a .mid file to .wav with FluidSynth (when installed)");
  std::string render_in, render_out, soundfont = "/usr/share/sounds/sf2/FluidR3_GM.sf2";
  render->add_option("midi", render_in, "the .mid file")->required();
  render->add_option("-o,--output", render_out, "the .wav file (default: next to the .mid)");
  render->add_option("--soundfont", soundfont, "SoundFont file");

  auto* probe_cmd = app.add_subcommand("probe", "what each layer and head does with relative position");
  std::string probe_ckpt, probe_out;
  int64_t probe_reach = 0;
  probe_cmd->add_option("checkpoint", probe_ckpt, "checkpoint file")->required();
  probe_cmd->add_option("--reach", probe_reach, "largest |δ| shown (default: the batch's longest offset)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));
  probe_cmd->add_option("--out", probe_out, "folder for the pictures (default: probe/ next to the checkpoint)");
  ProbeOptions probe_options;  // every flag of relgrad probe (train/instruments/probe.h, run_probe)
  probe_cmd
      ->add_option("--delta", probe_options.deltas, "mass per head at δ (-5) or a range (-7:-5); repeatable")
      ->allow_extra_args(false);
  probe_cmd->add_option("--queries", probe_options.queries,
                        "which queries the masses count: an index range (5:, :10, 3:8) or \"needed\"");
  probe_cmd->add_option("--compare", probe_options.compare_checkpoint,
                        "a second checkpoint probed on the same batch");
  probe_cmd->add_option("--csv", probe_options.csv,
                        "the curves as CSV (default: curves.csv beside the pictures)");
  probe_cmd->add_option("--json", probe_options.json,
                        "the curves as JSON (default: curves.json beside the pictures)");
  probe_cmd->add_option("--compare-csv", probe_options.compare_csv,
                        "--compare's table as CSV (default: compare.csv)");
  probe_cmd->add_option("--batch", probe_options.batch, "held-out batch N (default 0)")
      ->check(CLI::Range(int64_t(0), INT64_MAX));

  auto* experiments = app.add_subcommand("experiments", "the verification experiments (D1 D2 D3 D6): train, probe, report");
  ExperimentOptions exp_options;
  std::string exp_markdown = "docs/experiments.md";
  experiments->add_flag("--full", exp_options.full, "the full forms (minutes each); default: the small CI forms");
  experiments->add_option("--only", exp_options.only, "one experiment: D1, D2, D3 or D6");
  experiments->add_option("--out", exp_markdown,
                          "the markdown report (pictures go to its folder's experiments/; --sweep: "
                          "default docs/experiment-limits.md)");
  // Per-run overrides (train/instruments/experiments.h, ExperimentOptions): lists are parsed below.
  std::string exp_eval_lengths, exp_schemes, exp_seeds;
  experiments->add_option("--lag", exp_options.lag, "D1's lag k (δ* = −k)");
  experiments->add_option("--period", exp_options.period, "D2's period P (δ* = 1 − P)");
  experiments->add_option("--train-length", exp_options.train_length, "D3's training length");
  experiments->add_option("--eval-lengths", exp_eval_lengths, "D3's evaluation lengths, e.g. 64,128,256");
  experiments->add_option("--offset", exp_options.offset, "D6's lag c (δ* = +c)");
  experiments->add_option("--scheme", exp_schemes, "only these schemes' runs, e.g. t5,seed");
  experiments->add_option("--buckets", exp_options.buckets, "t5: num_buckets");
  experiments->add_option("--max-distance", exp_options.max_distance, "t5: max_distance");
  experiments->add_option("--clip", exp_options.clip, "shaw: one run at this clip instead of the form's");
  experiments->add_option("--table", exp_options.table, "seed/huang: table size t3 (|δ| ≤ t3 − 1)");
  experiments->add_option("--heads", exp_options.heads, "attention heads");
  experiments->add_option("--width", exp_options.width, "d_model (d_ff = 2 · width)");
  experiments->add_option("--steps", exp_options.steps, "training steps of every run");
  experiments->add_option("--seeds", exp_seeds, "every run repeated per seed, e.g. 1,2,3");
  experiments->add_flag("--sweep", exp_options.sweep,
                        "the claims' limits (train/instruments/experiment_limits.h) instead of the report");

  auto* music_bench = app.add_subcommand(
      "music-bench", "the JSB chorales comparison of positional treatments, and harmonisation by alignment");
  MusicBenchOptions bench;
  std::string bench_treatments, bench_seeds;
  bool bench_no_harmony = false;
  music_bench->add_flag("--full", bench.full,
                        "the documented run (about an hour); default: the small CI form");
  music_bench->add_option("--treatments", bench_treatments,
                          "comma-separated, e.g. none,huang,t5 (default: all with --full, else none,huang)");
  music_bench->add_option("--seeds", bench_seeds, "comma-separated seeds (default: 1,2,3 with --full, else 1,2)");
  music_bench->add_option("--steps", bench.steps, "training steps per model (default: the form's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  music_bench->add_flag("--no-harmony", bench_no_harmony, "skip the harmonisation comparison");
  music_bench->add_option("--chorales", bench.chorales_path, "the chorale file (default: the shipped one)");
  music_bench->add_option("--out", bench.out_dir, "folder for the tables, pictures and checkpoints");

  auto* length_bench = app.add_subcommand(
      "length-bench", "length generalisation of positional treatments on synthetic algorithmic tasks");
  LengthBenchOptions length;
  std::string length_tasks, length_treatments, length_seeds;
  length_bench->add_flag("--full", length.full,
                         "the documented run (about an hour on 2 cores); default: the CI form");
  length_bench->add_option("--tasks", length_tasks,
                           "comma-separated: copy, reverse, addition, sorting, parity (default: the form's)");
  length_bench->add_option("--treatments", length_treatments,
                           "comma-separated, e.g. none,t5,rope,seed (default: the form's)");
  length_bench->add_option("--seeds", length_seeds, "comma-separated seeds (default: 1,2,3 with --full, else 1,2)");
  length_bench->add_option("--steps", length.steps, "training steps per model (default: the form's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  length_bench->add_option("--out", length.out_dir, "folder for the tables, pictures and checkpoints");

  auto* tokenize = app.add_subcommand("tokenize", "a file's bytes as a token data file (vocab 256) for data.source = \"tokens\"");
  std::string tokenize_in, tokenize_out;
  tokenize->add_option("input", tokenize_in, "any file")->required();
  tokenize->add_option("output", tokenize_out, "the token file to write (atomically)")->required();

  auto* plot = app.add_subcommand("plot", "loss curves from a training log, as SVG or PNG");
  std::string log_path, plot_out;
  plot->add_option("log", log_path, "log.jsonl or log.csv")->required();
  plot->add_option("-o,--output", plot_out, "output .svg or .png (default: loss.svg next to the log)");

  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      out << app.help();
      return 0;
    } catch (const CLI::CallForAllHelp&) {
      out << app.help("", CLI::AppFormatMode::All);
      return 0;
    } catch (const CLI::CallForVersion&) {
      out << version_text() << "\n";
      return 0;
    } catch (const CLI::ParseError& e) {
      for (const CLI::App* sub : app.get_subcommands()) command = "relgrad " + sub->get_name();
      if (command == "relgrad" && argc > 1 && argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
        err << "relgrad: error: unknown command '" << argv[1]
            << "' (commands: train, sample, eval, inspect, plot, probe, render, experiments, music-bench, "
               "length-bench, tokenize)\n";
        return 2;
      }
      err << command << ": error: " << e.what() << "\n(run `" << command << " --help`)\n";
      return 2;
    }
    if (train->parsed()) {
      command = "relgrad train";
      if (help_config) {
        out << config_help();
        return 0;
      }
      std::vector<std::string> overrides = train->remaining();
      for (size_t i = 0; i < overrides.size(); ++i) {
        const std::string& o = overrides[i];
        if (o.rfind("--", 0) == 0 && o.find('=') != std::string::npos) continue;
        std::string hint;
        // "--train.steps 5": a config key with its value after a blank, which CLI11 cannot know.
        if (o.rfind("--", 0) == 0 && is_config_key(o.substr(2)))
          hint = i + 1 < overrides.size() && overrides[i + 1].rfind("--", 0) != 0
                     ? ": write " + o + "=" + overrides[i + 1] + " (a config override takes '=', not a blank)"
                     : ": write " + o + "=VALUE (a config override takes '=')";
        throw UsageError("[config] '" + o +
                         "' is neither an option of relgrad train nor a --key=value override" + hint);
      }
      // After the --key=value overrides, so that it wins over a --train.device given too.
      if (!train_device.empty()) overrides.push_back("--train.device=" + train_device);
      return cmd_train(config_path, resume, overrides, dry_run, out);
    }
    if (sample->parsed()) {
      command = "relgrad sample";
      // Options given but meaningless are refused rather than ignored without a word.
      if (sample->count("--input") && blank(sa.input))
        throw UsageError("[sample] --input is empty: give tokens (\"4 1 7\"), or leave --input out");
      if (sample->count("--prompt") && sa.prompt.empty())
        throw UsageError("[sample] --prompt is empty: give some text, or leave --prompt out");
      if (sample->count("--output") && sa.format != "midi")
        throw UsageError("[sample] -o " + sa.output +
                         " only goes with --format midi (music models write .mid "
                         "files); samples are otherwise printed on stdout (redirect it: > FILE)");
      Tf32Scope tf32(sample_tf32);
      return cmd_sample(sa, out);
    }
    if (eval->parsed()) {
      command = "relgrad eval";
      if (eval->count("--input") && blank(eval_input))
        throw UsageError("[eval] --input is empty: give tokens, or leave --input out (held-out batch 0)");
      if (eval->count("--target") && !eval->count("--input"))
        throw UsageError(
            "[eval] --target goes with --input (the source it follows); without --input the logits "
            "are those of held-out batch 0, targets included");
      std::vector<std::string> data_overrides = eval->remaining();
      for (const std::string& o : data_overrides)
        if (o.rfind("--data.", 0) != 0 || o.find('=') == std::string::npos)
          throw UsageError("[eval] '" + o + "' is neither an option of relgrad eval nor a --data.KEY=VALUE " +
                           "override (" + eval_data_keys_text() + ")");
      Tf32Scope tf32(eval_tf32);
      return cmd_eval(eval_ckpt, eval_batches, dump_path, eval_input, eval_target, eval_device, out,
                      data_overrides);
    }
    if (inspect->parsed()) return command = "relgrad inspect", cmd_inspect(inspect_path, out);
    if (render->parsed()) return command = "relgrad render", cmd_render(render_in, render_out, soundfont, out);
    if (probe_cmd->parsed()) {
      command = "relgrad probe";
      probe_options.checkpoint = probe_ckpt;
      probe_options.reach = probe_reach;
      probe_options.out_dir = probe_out;
      try {
        return run_probe(probe_options, out);
      } catch (const InstrumentOptionError& e) {
        throw UsageError(e.what());
      }
    }
    if (experiments->parsed()) {
      command = "relgrad experiments";
      std::string only = exp_options.only;
      for (char& ch : only) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      if (!only.empty() && only != "D1" && only != "D2" && only != "D3" && only != "D6")
        throw UsageError("[experiments] --only " + exp_options.only + ": expected D1, D2, D3 or D6");
      try {
        if (experiments->count("--eval-lengths"))
          exp_options.eval_lengths = parse_int_list(exp_eval_lengths, "--eval-lengths");
        if (experiments->count("--scheme")) exp_options.schemes = parse_name_list(exp_schemes, "--scheme");
        if (experiments->count("--seeds")) exp_options.seeds = parse_seed_list(exp_seeds, "--seeds");
        check_experiment_options(exp_options);
      } catch (const InstrumentOptionError& e) {
        throw UsageError(e.what());
      }
      if (exp_options.sweep && !experiments->count("--out")) exp_markdown = "docs/experiment-limits.md";
      exp_options.out_dir = directory_of(exp_markdown) + "/experiments";
      std::string markdown =
          exp_options.sweep ? run_experiment_limits(exp_options, &out) : run_experiments(exp_options, &out);
      write_file_atomic(exp_markdown, markdown, "experiments");
      out << "wrote " << exp_markdown << " and the pictures in " << exp_options.out_dir << "\n";
      return 0;
    }
    if (music_bench->parsed()) {
      command = "relgrad music-bench";
      bench.harmony = !bench_no_harmony;
      bench.treatments = comma_list(bench_treatments, "--treatments");
      bench.seeds = seed_list(bench_seeds, "music-bench");
      return run_music_bench(bench, out);
    }
    if (length_bench->parsed()) {
      command = "relgrad length-bench";
      length.tasks = comma_list(length_tasks, "--tasks", "length-bench");
      length.treatments = comma_list(length_treatments, "--treatments", "length-bench");
      length.seeds = seed_list(length_seeds, "length-bench");
      return run_length_bench(length, out);
    }
    if (tokenize->parsed()) {
      command = "relgrad tokenize";
      const std::string bytes = read_file(tokenize_in, "tokenize", uint64_t(1) << 31);  // ids are int32 counts
      std::vector<int32_t> ids(bytes.begin(), bytes.end());
      for (int32_t& id : ids) id &= 0xFF;  // char may be signed: the id is the byte's unsigned value
      write_token_file(tokenize_out, ids, 256);
      out << "wrote " << tokenize_out << ": " << ids.size() << " tokens, vocab_size 256\n";
      return 0;
    }
    if (plot->parsed()) {
      command = "relgrad plot";
      if (plot_out.empty()) plot_out = directory_of(log_path) + "/loss.svg";
      plot_training_log(log_path, plot_out);
      out << "wrote " << plot_out << "\n";
      return 0;
    }
  } catch (...) {
    std::ostringstream message;  // written at once, so that the lines of several ranks do not interleave
    const int code = report_error(command + rank_note, std::current_exception(), message);
    err << message.str() << std::flush;
    return code;
  }
  return 2;
}

}  // namespace

int report_error(const std::string& command, std::exception_ptr error, std::ostream& err) {
  // What to make smaller, in config keys, when `relgrad train` runs out of memory.
  const std::string oom_hint =
      command.rfind("relgrad train", 0) == 0
          ? " (config keys: data.batch_size, raising train.grad_accum to keep the effective batch; data.context "
            "for text and music; model.d_model, model.d_ff, model.n_encoder_layers, model.n_decoder_layers)"
          : "";
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& e) {
    err << command << ": error: " << e.what() << "\n";
    return 2;
  } catch (const NonFiniteError& e) {
    err << command << ": error: " << e.what() << "\n";
    return 3;
  } catch (const OutOfMemoryError& e) {
    err << command << ": error: " << e.what() << oom_hint << "\n";
    return 4;
  } catch (const std::bad_alloc& e) {
    // From a std container or Eigen's temporaries rather than the tensor allocator: the same report.
    const CpuMemoryStats m = cpu_allocator::stats();
    // Tensors freed while the exception unwound, so the peak is what tells how much the run used.
    err << command << ": error: [memory] out of memory: an allocation outside the tensor allocator failed ("
        << e.what() << "); tensors held at most " << m.peak_allocated_bytes
        << " bytes; reduce the batch size, the sequence length or the model size" << oom_hint << "\n";
    return 4;
  } catch (const std::exception& e) {
    err << command << ": error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    err << command << ": error: an exception that is not a std::exception\n";
    return 1;
  }
}

}  // namespace relgrad