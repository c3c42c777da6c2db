// relgrad experiments [--full] [--only D1|D2|D3|D6] [--sweep] [--out FILE.md] [per-run overrides]
#include "core/file_io.h"
#include "train/command/cli_commands.h"
#include "train/command/subcommand.h"
#include "train/instruments/experiment_limits.h"
#include "train/instruments/experiments.h"
#include "train/instruments/probe.h"

namespace relgrad::cli_detail {
namespace {

class ExperimentsCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    ExperimentOptions& o = options_;
    app.add_flag("--full", o.full, "the full forms (minutes each); default: the small CI forms");
    app.add_option("--only", o.only, "one experiment: D1, D2, D3 or D6");
    app.add_option("--out", markdown_,
                   "the markdown report (pictures go to its folder's experiments/; --sweep: "
                   "default docs/experiment-limits.md)");
    // Per-run overrides (train/instruments/experiments.h, ExperimentOptions): lists are parsed in run().
    app.add_option("--lag", o.lag, "D1's lag k (δ* = −k)");
    app.add_option("--period", o.period, "D2's period P (δ* = 1 − P)");
    app.add_option("--train-length", o.train_length, "D3's training length");
    app.add_option("--eval-lengths", eval_lengths_, "D3's evaluation lengths, e.g. 64,128,256");
    app.add_option("--offset", o.offset, "D6's lag c (δ* = +c)");
    app.add_option("--scheme", schemes_, "only these schemes' runs, e.g. t5,seed");
    app.add_option("--buckets", o.buckets, "t5: num_buckets");
    app.add_option("--max-distance", o.max_distance, "t5: max_distance");
    app.add_option("--clip", o.clip, "shaw: one run at this clip instead of the form's");
    app.add_option("--table", o.table, "seed/huang: table size t3 (|δ| ≤ t3 − 1)");
    app.add_option("--heads", o.heads, "attention heads");
    app.add_option("--width", o.width, "d_model (d_ff = 2 · width)");
    app.add_option("--steps", o.steps, "training steps of every run");
    app.add_option("--seeds", seeds_, "every run repeated per seed, e.g. 1,2,3");
    app.add_flag("--sweep", o.sweep, "the claims' limits (train/instruments/experiment_limits.h) instead of the report");
  }

  int run(CommandLine& app, std::ostream& out) override {
    ExperimentOptions& o = options_;
    try {
      if (app.count("--eval-lengths")) o.eval_lengths = parse_int_list(eval_lengths_, "--eval-lengths");
      if (app.count("--scheme")) o.schemes = parse_name_list(schemes_, "--scheme");
      if (app.count("--seeds")) o.seeds = parse_seed_list(seeds_, "--seeds");
      check_experiment_options(o);
    } catch (const InstrumentOptionError& e) {
      throw UsageError(e.what());
    }
    if (o.sweep && !app.count("--out")) markdown_ = "docs/experiment-limits.md";
    o.out_dir = directory_of(markdown_) + "/experiments";
    const std::string markdown = o.sweep ? run_experiment_limits(o, &out) : run_experiments(o, &out);
    write_file_atomic(markdown_, markdown, "experiments");
    out << "wrote " << markdown_ << " and the pictures in " << o.out_dir << "\n";
    return 0;
  }

 private:
  ExperimentOptions options_;
  std::string markdown_ = "docs/experiments.md";
  std::string eval_lengths_, schemes_, seeds_;
};

}  // namespace

std::unique_ptr<Subcommand> make_experiments_command() { return std::make_unique<ExperimentsCommand>(); }

}  // namespace relgrad::cli_detail
