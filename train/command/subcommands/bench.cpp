// relgrad bench NAME [--full] [--tasks ...] [--treatments ...] [--seeds ...] [--steps N] [--out DIR]: any
// registered study (train/instruments/study_registry.h). `relgrad bench length-bench ...` and the other
// built-in benches are their own commands with their own flags (run_cli, train/command/cli.cpp, hands
// the rest of the line to them).
#include "train/command/cli_commands.h"  // UsageError
#include "train/command/subcommand.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list
#include "train/instruments/probe.h"        // InstrumentOptionError
#include "train/instruments/study_registry.h"

namespace relgrad::cli_detail {
namespace {

class BenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("name", name_, "the study: " + study_names_text()).required();
    app.add_flag("--full", options_.full, "the documented run; default: the CI form");
    app.add_option("--tasks", tasks_, "comma-separated (default: the form's)");
    app.add_option("--treatments", treatments_, "comma-separated, e.g. none,t5,rope (default: the form's)");
    app.add_option("--seeds", seeds_, "comma-separated seeds (default: the form's)");
    app.add_option("--steps", options_.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    app.add_option("--out", options_.out_dir, "folder for the tables, pictures and run directories (default: runs/NAME)");
  }

  int run(CommandLine& app, std::ostream& out) override {
    const StudyEntry* entry = find_study(name_);
    if (!entry) throw UsageError("[bench] unknown study '" + name_ + "' (" + study_names_text() + ")");
    try {  // the lists' syntax and the plan's checks of them are usage errors
      if (app.count("--tasks")) options_.tasks = parse_name_list(tasks_, "--tasks", "bench");
      if (app.count("--treatments")) options_.treatments = parse_name_list(treatments_, "--treatments", "bench");
      if (app.count("--seeds")) options_.seeds = parse_seed_list(seeds_, "--seeds", "bench");
      return run_study(*entry, options_, out);
    } catch (const InstrumentOptionError& e) {
      throw UsageError(e.what());
    }
  }

 private:
  StudyOptions options_;
  std::string name_, tasks_, treatments_, seeds_;
};

}  // namespace

std::unique_ptr<Subcommand> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace relgrad::cli_detail
