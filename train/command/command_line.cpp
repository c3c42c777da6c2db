#include "train/command/command_line.h"

#include <CLI/CLI.hpp>

namespace relgrad::cli_detail {

CommandOption& CommandOption::required() {
  option_->required();
  return *this;
}

CommandOption& CommandOption::range(int min, int max) {
  option_->check(CLI::Range(min, max));
  return *this;
}

CommandOption& CommandOption::range(int64_t min, int64_t max) {
  option_->check(CLI::Range(min, max));
  return *this;
}

CommandOption& CommandOption::range(double min, double max) {
  option_->check(CLI::Range(min, max));
  return *this;
}

CommandOption& CommandOption::one_of(const std::vector<std::string>& values) {
  option_->check(CLI::IsMember(values));
  return *this;
}

CommandOption& CommandOption::allow_extra_args(bool allow) {
  option_->allow_extra_args(allow);
  return *this;
}

template <class T>
CommandOption CommandLine::add_option(const std::string& name, T& value, const std::string& description) {
  return CommandOption(app_.add_option(name, value, description));
}

// Every type a subcommand binds an option to.
template CommandOption CommandLine::add_option(const std::string&, std::string&, const std::string&);
template CommandOption CommandLine::add_option(const std::string&, std::vector<std::string>&, const std::string&);
template CommandOption CommandLine::add_option(const std::string&, int64_t&, const std::string&);
template CommandOption CommandLine::add_option(const std::string&, double&, const std::string&);

void CommandLine::add_flag(const std::string& name, bool& value, const std::string& description) {
  app_.add_flag(name, value, description);
}

size_t CommandLine::count(const std::string& name) const { return app_.count(name); }

std::vector<std::string> CommandLine::remaining() const { return app_.remaining(); }

void CommandLine::allow_extras() { app_.allow_extras(); }

void CommandLine::footer(const std::string& text) { app_.footer(text); }

}  // namespace relgrad::cli_detail
