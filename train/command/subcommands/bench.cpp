// relgrad NAME [--full] [--tasks ...] [--treatments ...] [--seeds ...] [--steps N] [--out DIR] [its own flags]
// for every study of the registry (train/instruments/study_registry.h): the benches' commands are this
// one file, each declared from its registry entry. `relgrad bench NAME ...` is `relgrad NAME ...`
// (run_cli, train/command/cli.cpp); `relgrad bench` alone, or with a name no study has, is a usage error
// listing the studies.
#include <deque>

#include "train/command/cli_commands.h"  // UsageError
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/instruments/experiments.h"  // parse_name_list, parse_seed_list
#include "train/instruments/probe.h"        // InstrumentOptionError
#include "train/instruments/study_registry.h"

namespace relgrad::cli_detail {
namespace {

class StudyCommand final : public Subcommand {
 public:
  explicit StudyCommand(StudyEntry entry) : entry_(std::move(entry)) {}

  void declare(CommandLine& app) override {
    const StudyEntry& e = entry_;
    app.add_flag("--full", args_.options.full, e.full_help);
    if (e.takes_tasks) app.add_option("--tasks", tasks_, e.tasks_help);
    app.add_option("--treatments", treatments_, e.treatments_help);
    app.add_option("--seeds", seeds_, e.seeds_help);
    app.add_option("--steps", args_.options.steps, "training steps per model (default: the form's)")
        .range(int64_t(1), int64_t(1) << 30);
    std::string out_names = "--out";
    for (const std::string& alias : e.out_aliases) out_names += "," + alias;
    app.add_option(out_names, out_, e.out_help);
    values_.resize(e.flags.size());
    switches_.assign(e.flags.size(), false);
    for (size_t k = 0; k < e.flags.size(); ++k) {
      const StudyFlag& f = e.flags[k];
      if (f.kind == StudyFlagKind::Switch) app.add_flag(f.name, switches_[k], f.help);
      else app.add_option(f.name, values_[k], f.help);
    }
  }

  int run(CommandLine& app, std::ostream& out) override {
    const StudyEntry& e = entry_;
    const std::string& op = e.name;
    StudyOptions& o = args_.options;
    o.out_dir = app.count("--out") ? out_ : "runs/" + e.name;  // given empty: the study's check refuses it
    std::vector<NamedPath> inputs;
    for (size_t k = 0; k < e.flags.size(); ++k)
      if (e.flags[k].input_file && app.count(e.flags[k].name)) inputs.push_back({e.flags[k].name, values_[k]});
    if (!inputs.empty()) refuse_output_over_input(op, inputs, {{"--out", o.out_dir}});
    try {  // the lists' syntax and the study's checks: the options, not the run (exit 2)
      if (e.takes_tasks && app.count("--tasks")) o.tasks = parse_name_list(tasks_, "--tasks", op.c_str());
      if (app.count("--treatments")) o.treatments = parse_name_list(treatments_, "--treatments", op.c_str());
      if (app.count("--seeds")) o.seeds = parse_seed_list(seeds_, "--seeds", op.c_str());
      for (size_t k = 0; k < e.flags.size(); ++k) {
        const StudyFlag& f = e.flags[k];
        if (f.kind == StudyFlagKind::Switch && switches_[k]) args_.given[f.name];
        if (f.kind == StudyFlagKind::Text && app.count(f.name)) args_.given[f.name] = {values_[k]};
        if (f.kind == StudyFlagKind::List && app.count(f.name))
          args_.given[f.name] = parse_name_list(values_[k], f.name, op.c_str());
      }
      if (e.check) e.check(args_);
      if (e.plan && o.out_dir.empty()) throw UsageError("[" + op + "] --out is empty");
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    try {
      return run_study(e, args_, out);
    } catch (const InstrumentOptionError& error) {  // a study that checks its options as it starts
      throw UsageError(error.what());
    }
  }

 private:
  StudyEntry entry_;
  StudyArgs args_;
  std::string tasks_, treatments_, seeds_, out_;
  std::vector<std::string> values_;  // each Text or List flag's text, in entry_.flags' order
  std::deque<bool> switches_;        // each Switch flag (a deque: CLI11 binds a bool& to each)
};

class BenchCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("name", name_, "the study: " + study_names_text());
    app.allow_extras();
  }
  int run(CommandLine&, std::ostream&) override {
    throw UsageError("[bench] " + (name_.empty() ? std::string("which study?") : "unknown study '" + name_ + "'") +
                     " (" + study_names_text() + ")");
  }

 private:
  std::string name_;
};

}  // namespace

std::unique_ptr<Subcommand> make_study_command(const StudyEntry& entry) {
  return std::make_unique<StudyCommand>(entry);
}
std::unique_ptr<Subcommand> make_bench_command() { return std::make_unique<BenchCommand>(); }

}  // namespace relgrad::cli_detail
