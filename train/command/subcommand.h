// The `relgrad` subcommands as one table (train/command/subcommands.cpp): each command is a Subcommand
// in its own file under train/command/subcommands/ plus one line of the table; the studies' commands
// (the benches) come from the study registry, one generic Subcommand declared from each entry (bench.cpp). run_cli (cli.cpp) builds
// the CLI11 parser from the table, so the table also gives `relgrad --help` its synopsis and the
// unknown-command message its list.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace relgrad {
struct StudyEntry;  // train/instruments/study_registry.h
}

namespace relgrad::cli_detail {

// What a subcommand declares and reads of its command line (CommandLine: options, flags, which were
// given and what was left over) is a thin layer over CLI11's App, train/command/command_line.cpp, so
// that only that file and train/command/cli.cpp include CLI/CLI.hpp: every file that includes it
// compiles CLI11's validators, objects it defines in each such file (a subcommand's file took 17.6 s
// in a gcc Release build with it and 2.6 s without, on the AVX2 EPYC of docs/benchmarks.md). The
// names and behaviour are CLI11's.

// Whether a range of reals holds its lower bound: [min, max] or (min, max] (--top-p: (0, 1]).
enum class Lower { Closed, Open };

// One declared option, for chaining: app.add_option("--steps", steps, "...").range(1, 100).
class CommandOption {
 public:
  explicit CommandOption(CLI::Option* option) : option_(option) {}
  CommandOption& required();                                   // CLI11's required()
  // Ranges, bounds included unless `lower` says otherwise; a value that is no number of the kind (a
  // word, NaN for reals) is refused, naming what was given ("--top-p: nan is not a number (FLOAT in
  // (0, 1])"), as is one outside ("--num: 0 is not in [1, 1000]").
  CommandOption& range(int min, int max);
  CommandOption& range(int64_t min, int64_t max);
  CommandOption& range(double min, double max, Lower lower = Lower::Closed);
  CommandOption& one_of(const std::vector<std::string>& values);  // CLI::IsMember
  CommandOption& allow_extra_args(bool allow);                 // CLI11's allow_extra_args()

 private:
  CLI::Option* option_;
};

class CommandLine {
 public:
  explicit CommandLine(CLI::App& app) : app_(app) {}
  // T: the option's type; command_line.cpp instantiates every type a subcommand binds.
  template <class T>
  CommandOption add_option(const std::string& name, T& value, const std::string& description);
  void add_flag(const std::string& name, bool& value, const std::string& description);
  // How often the option was given (0: not at all).
  size_t count(const std::string& name) const;
  // The arguments no option took (with allow_extras): the --key=value overrides.
  std::vector<std::string> remaining() const;
  void allow_extras();
  void footer(const std::string& text);

 private:
  CLI::App& app_;
};

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
