// relgrad context-bench [--full] [--treatments ...] [--seeds ...] [--steps N] [--text FILE] [--out DIR]
#include "train/command/cli_commands.h"  // UsageError
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/instruments/context_bench.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list

namespace relgrad::cli_detail {
namespace {

class ContextBenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    ContextBenchOptions& o = options_;
    app.add_flag("--full", o.full, "the documented run (about 17 minutes on one idle core); default: the CI form");
    app.add_option("--treatments", treatments_, "comma-separated, e.g. sinusoidal,rope,t5,alibi (default: the form's)");
    app.add_option("--seeds", seeds_, "comma-separated seeds (default: 1,2,3 with --full, else 1,2)");
    app.add_option("--steps", o.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    app.add_option("--text", o.text_path, "the text to train and evaluate on (default: data/kjv.txt)");
    app.add_option("--out,--out-dir", o.out_dir, "folder for the tables, the picture and the checkpoints");
  }

  int run(CommandLine& app, std::ostream& out) override {
    // A list left out keeps the form's (empty); a malformed list, an unknown treatment or a missing text is a
    // usage error (InstrumentOptionError and the bench's own are relgrad::Error).
    refuse_output_over_input("context-bench", {{"--text", options_.text_path}}, {{"--out", options_.out_dir}});
    try {
      if (app.count("--treatments"))
        options_.treatments = parse_name_list(treatments_, "--treatments", "context-bench");
      if (app.count("--seeds")) options_.seeds = parse_seed_list(seeds_, "--seeds", "context-bench");
      check_context_bench_options(options_);  // before any training
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    return run_context_bench(options_, out);
  }

 private:
  ContextBenchOptions options_;
  std::string treatments_, seeds_;
};

}  // namespace

std::unique_ptr<Subcommand> make_context_bench_command() { return std::make_unique<ContextBenchCommand>(); }

}  // namespace relgrad::cli_detail
