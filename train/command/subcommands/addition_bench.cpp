// relgrad addition-bench [--full] [--treatments ...] [--plain-treatments ...] [--no-plain] [--seeds ...] [--steps N]
// [--out DIR]
#include "train/command/cli_commands.h"  // UsageError
#include "train/command/subcommand.h"
#include "train/instruments/addition_bench.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list
#include "train/instruments/probe.h"        // InstrumentOptionError

namespace relgrad::cli_detail {
namespace {

class AdditionBenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    AdditionBenchOptions& o = options_;
    app.add_flag("--full", o.full, "the documented run (docs/addition.md); default: the CI form");
    app.add_option("--treatments", treatments_,
                   "with index hints, comma-separated, e.g. fire,fire-random,rope (default: the form's)");
    app.add_option("--plain-treatments", plain_treatments_,
                   "without index hints, comma-separated (default: the form's; full: fire,fire-random,rope)");
    app.add_flag("--no-plain", no_plain_, "no model without index hints");
    app.add_option("--seeds", seeds_, "comma-separated seeds (default: 1,2,3)");
    app.add_option("--steps", o.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    app.add_option("--out", o.out_dir, "folder for the tables, pictures and checkpoints");
  }

  int run(CommandLine& app, std::ostream& out) override {
    try {  // a list left out keeps the form's (empty); every malformed option is a usage error
      if (app.count("--plain-treatments"))
        options_.plain_treatments = parse_name_list(plain_treatments_, "--plain-treatments", "addition-bench");
      options_.plain = !no_plain_;
      if (app.count("--treatments"))
        options_.treatments = parse_name_list(treatments_, "--treatments", "addition-bench");
      if (app.count("--seeds")) options_.seeds = parse_seed_list(seeds_, "--seeds", "addition-bench");
      return run_addition_bench(options_, out);
    } catch (const InstrumentOptionError& e) {
      throw UsageError(e.what());
    }
  }

 private:
  AdditionBenchOptions options_;
  std::string treatments_, plain_treatments_, seeds_;
  bool no_plain_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_addition_bench_command() { return std::make_unique<AdditionBenchCommand>(); }

}  // namespace relgrad::cli_detail
