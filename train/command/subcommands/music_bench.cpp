// relgrad music-bench [--full | --pope-size] [--treatments ...] [--seeds ...] [--steps N] [--no-harmony]
//                     [--chorales F] [--out DIR] [--device D]
#include "train/command/cli_commands.h"  // UsageError
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list
#include "train/instruments/music_bench.h"
#include "train/instruments/probe.h"  // InstrumentOptionError

namespace relgrad::cli_detail {
namespace {

class MusicBenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    MusicBenchOptions& o = options_;
    app.add_flag("--full", o.full, "the documented run (about an hour); default: the small CI form");
    app.add_option("--treatments", treatments_,
                   "comma-separated, e.g. none,huang,t5 (default: all with --full, else none,huang)");
    app.add_option("--seeds", seeds_, "comma-separated seeds (default: 1,2,3 with --full, else 1,2)");
    app.add_option("--steps", o.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    app.add_flag("--no-harmony", no_harmony_, "skip the harmonisation comparison");
    app.add_option("--chorales", o.chorales_path, "the chorale file (default: the shipped one)");
    app.add_option("--out", o.out_dir, "folder for the tables, pictures and checkpoints");
    app.add_flag("--pope-size", o.pope_size,
                 "the PoPE paper's JSB size (6 layers, d 256, 8 heads, RMSNorm, dropout 0.2, batch 4, windows "
                 "of 2048, 3000 steps, lr 6e-4): for a GPU");
    app.add_option("--device", o.device, "where every model trains: cpu (default), cuda, cuda:N");
  }

  int run(CommandLine& app, std::ostream& out) override {
    refuse_output_over_input("music-bench", {{"--chorales", options_.chorales_path}}, {{"--out", options_.out_dir}});
    options_.harmony = !no_harmony_;
    try {  // a list left out keeps the form's (empty); the instruments' list syntax, a usage error
      if (app.count("--treatments")) options_.treatments = parse_name_list(treatments_, "--treatments", "music-bench");
      if (app.count("--seeds")) options_.seeds = parse_seed_list(seeds_, "--seeds", "music-bench");
    } catch (const InstrumentOptionError& e) {
      throw UsageError(e.what());
    }
    return run_music_bench(options_, out);
  }

 private:
  MusicBenchOptions options_;
  std::string treatments_, seeds_;
  bool no_harmony_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_music_bench_command() { return std::make_unique<MusicBenchCommand>(); }

}  // namespace relgrad::cli_detail
