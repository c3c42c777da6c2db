// The `relgrad` subcommands as one table (train/command/subcommands.cpp): each command is a Subcommand
// in its own file under train/command/subcommands/ plus one line of the table; the studies' commands
// (the benches) come from the study registry, one generic Subcommand declared from each entry (bench.cpp). run_cli (cli.cpp) builds
// the CLI11 parser from the table, so the table also gives `relgrad --help` its synopsis and the
// unknown-command message its list.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "train/command/command_line.h"

namespace relgrad {
struct StudyEntry;  // train/instruments/study_registry.h
}

namespace relgrad::cli_detail {

// One command's options and action. declare() binds the options to the object's members; run() is
// called once the whole command line parsed, with the same CommandLine (for count() and remaining()).
class Subcommand {
 public:
  virtual ~Subcommand() = default;
  virtual void declare(CommandLine& app) = 0;
  // The exit code (cli.h); errors are thrown (UsageError for exit 2) and reported by run_cli.
  virtual int run(CommandLine& app, std::ostream& out) = 0;
};

struct SubcommandEntry {
  std::string name;      // "train": `relgrad train`
  std::string summary;   // the one line `relgrad --help` shows
  std::string synopsis;  // the arguments after "relgrad <name> " (lines joined by '\n')
  std::function<std::unique_ptr<Subcommand>()> make;
};

// Every command, in the order `relgrad --help` lists them: the fixed ones, with one per study of the
// registry (train/instruments/study_registry.h, those registered so far included) after experiments.
std::vector<SubcommandEntry> subcommands();
// "  relgrad train   [--config ...] ...\n  relgrad sample ...\n": every synopsis, aligned.
std::string synopsis_text();
// "  relgrad eval CHECKPOINT [--batches N] ...\n": one command's synopsis, for its own --help.
std::string synopsis_text(const SubcommandEntry& command);
// "train, sample, ..., plot": the names for the unknown-command message.
std::string command_names_text();

// The factories the table lists (one per file under train/command/subcommands/).
std::unique_ptr<Subcommand> make_train_command();
std::unique_ptr<Subcommand> make_sample_command();
std::unique_ptr<Subcommand> make_eval_command();
std::unique_ptr<Subcommand> make_inspect_command();
std::unique_ptr<Subcommand> make_render_command();
std::unique_ptr<Subcommand> make_probe_command();
std::unique_ptr<Subcommand> make_experiments_command();
std::unique_ptr<Subcommand> make_study_command(const StudyEntry& study);  // a study's command (bench.cpp)
std::unique_ptr<Subcommand> make_bench_command();
std::unique_ptr<Subcommand> make_tokenize_command();
std::unique_ptr<Subcommand> make_plot_command();

}  // namespace relgrad::cli_detail
