// What a subcommand (train/command/subcommand.h) declares and reads of its command line: options,
// flags, which were given and what was left over. A thin layer over CLI11's App, so that only
// train/command/command_line.cpp and train/command/cli.cpp include CLI/CLI.hpp: every file that
// includes it compiles CLI11's validators, objects it defines in each such file (a subcommand's file
// took 17.6 s in a gcc Release build with it and 2.6 s without, on the AVX2 EPYC of
// docs/benchmarks.md). The names and behaviour are CLI11's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace relgrad::cli_detail {

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

}  // namespace relgrad::cli_detail
