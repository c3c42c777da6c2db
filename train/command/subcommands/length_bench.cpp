// relgrad length-bench [--full] [--tasks ...] [--treatments ...] [--seeds ...] [--steps N] [--out DIR]
#include "train/command/cli_commands.h"  // UsageError
#include "train/command/subcommand.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list
#include "train/instruments/length_bench.h"
#include "train/instruments/probe.h"  // InstrumentOptionError

namespace relgrad::cli_detail {
namespace {

class LengthBenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    LengthBenchOptions& o = options_;
    app.add_flag("--full", o.full, "the documented run (about an hour on 2 cores); default: the CI form");
    app.add_option("--tasks", tasks_, "comma-separated: copy, reverse, addition, sorting, parity (default: the form's)");
    app.add_option("--treatments", treatments_, "comma-separated, e.g. none,t5,rope,seed (default: the form's)");
    app.add_option("--seeds", seeds_, "comma-separated seeds (default: 1,2,3 with --full, else 1,2)");
    app.add_option("--steps", o.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    app.add_option("--out", o.out_dir, "folder for the tables, pictures and checkpoints");
  }

  int run(CommandLine& app, std::ostream& out) override {
    try {  // a list left out keeps the form's (empty); the instruments' list syntax, a usage error
      if (app.count("--tasks")) options_.tasks = parse_name_list(tasks_, "--tasks", "length-bench");
      if (app.count("--treatments")) options_.treatments = parse_name_list(treatments_, "--treatments", "length-bench");
      if (app.count("--seeds")) options_.seeds = parse_seed_list(seeds_, "--seeds", "length-bench");
      check_length_bench_options(options_);  // an unknown task or treatment: before any training
    } catch (const Error& e) {  // InstrumentOptionError included: the options, not the run
      throw UsageError(e.what());
    }
    return run_length_bench(options_, out);
  }

 private:
  LengthBenchOptions options_;
  std::string tasks_, treatments_, seeds_;
};

}  // namespace

std::unique_ptr<Subcommand> make_length_bench_command() { return std::make_unique<LengthBenchCommand>(); }

}  // namespace relgrad::cli_detail
