// relgrad cope-bench [--full] [--tasks ...] [--treatments ...] [--seeds ...] [--steps N] [--out DIR]
#include "train/command/cli_commands.h"  // UsageError
#include "train/command/subcommand.h"
#include "train/instruments/cope_bench.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list
#include "train/instruments/probe.h"        // InstrumentOptionError

namespace relgrad::cli_detail {
namespace {

class CopeBenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    CopeBenchOptions& o = options_;
    app.add_flag("--full", o.full, "the documented run (docs/cope-tasks.md); default: the CI form");
    app.add_option("--tasks", tasks_,
                   "comma-separated: selective_copy, counting, flip_flop, indirect_indexing (default: the form's)");
    app.add_option("--treatments", treatments_, "comma-separated, e.g. cope,rope,learned (default: the form's)");
    app.add_option("--seeds", seeds_, "comma-separated seeds (default: 1,2,3)");
    app.add_option("--steps", o.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    app.add_option("--out", o.out_dir, "folder for the tables and checkpoints");
  }

  int run(CommandLine& app, std::ostream& out) override {
    try {  // a list left out keeps the form's (empty); bad options are usage errors (exit 2)
      if (app.count("--tasks")) options_.tasks = parse_name_list(tasks_, "--tasks", "cope-bench");
      if (app.count("--treatments")) options_.treatments = parse_name_list(treatments_, "--treatments", "cope-bench");
      if (app.count("--seeds")) options_.seeds = parse_seed_list(seeds_, "--seeds", "cope-bench");
      check_cope_bench_options(options_);
    } catch (const InstrumentOptionError& e) {
      throw UsageError(e.what());
    } catch (const Error& e) {  // an unknown task or treatment, an empty --out: the options, not the run
      throw UsageError(e.what());
    }
    return run_cope_bench(options_, out);
  }

 private:
  CopeBenchOptions options_;
  std::string tasks_, treatments_, seeds_;
};

}  // namespace

std::unique_ptr<Subcommand> make_cope_bench_command() { return std::make_unique<CopeBenchCommand>(); }

}  // namespace relgrad::cli_detail
