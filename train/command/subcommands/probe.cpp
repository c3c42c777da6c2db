// relgrad probe CHECKPOINT [--reach R] [--out DIR] [--delta D ...] [--queries RANGE] [--compare CHECKPOINT] ...
//               [--data.KEY=VALUE ...]
#include "train/command/checkpoint_overrides.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/instruments/probe.h"

namespace relgrad::cli_detail {
namespace {

class ProbeCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    ProbeOptions& o = options_;  // every flag of relgrad probe (train/instruments/probe.h, run_probe)
    app.add_option("checkpoint", o.checkpoint, "checkpoint file").required();
    app.add_option("--reach", o.reach, "largest |δ| shown (default: the batch's longest offset)")
        .range(int64_t(0), int64_t(1) << 20);
    app.add_option("--out", o.out_dir, "folder for the pictures (default: probe/ next to the checkpoint)");
    app.add_option("--delta", o.deltas, "mass per head at δ (-5) or a range (-7:-5); repeatable")
        .allow_extra_args(false);
    app.add_option("--queries", o.queries, "which queries the masses count: an index range (5:, :10, 3:8) or \"needed\"");
    app.add_option("--compare", o.compare_checkpoint, "a second checkpoint probed on the same batch");
    app.add_option("--csv", o.csv, "the curves as CSV (default: curves.csv beside the pictures)");
    app.add_option("--json", o.json, "the curves as JSON (default: curves.json beside the pictures)");
    app.add_option("--compare-csv", o.compare_csv, "--compare's table as CSV (default: compare.csv)");
    app.add_option("--batch", o.batch, "held-out batch N (default 0)").range(int64_t(0), INT64_MAX);
    app.allow_extras();  // --data.KEY=VALUE: the held-out data, as relgrad eval takes it (kEvalDataKeys)
    app.footer("--data.KEY=VALUE probes on other held-out data, e.g. --data.text_path=other.txt (" +
               eval_data_keys_text() + ")");
  }

  int run(CommandLine& app, std::ostream& out) override {
    const std::vector<std::string> data = app.remaining();
    for (const std::string& o : data)
      if (o.rfind("--data.", 0) != 0 || o.find('=') == std::string::npos)
        throw UsageError("[probe] '" + o + "' is neither an option of relgrad probe nor a --data.KEY=VALUE " +
                         "override (" + eval_data_keys_text() + ")");
    if (!data.empty())
      options_.change_data = [data, &out](RunConfig& config) { apply_eval_data_overrides(config, data, out, "probe"); };
    const ProbeOutputs where = probe_outputs(options_);
    refuse_output_over_input("probe", {{"the checkpoint", options_.checkpoint}, {"--compare", options_.compare_checkpoint}},
                             {{"--out", where.out_dir},
                              {"--csv", where.csv},
                              {"--json", where.json},
                              {"--compare-csv", where.compare_csv}});
    try {
      return run_probe(options_, out);
    } catch (const InstrumentOptionError& e) {
      throw UsageError(e.what());
    }
  }

 private:
  ProbeOptions options_;
};

}  // namespace

std::unique_ptr<Subcommand> make_probe_command() { return std::make_unique<ProbeCommand>(); }

}  // namespace relgrad::cli_detail
