// CommandLine and CommandOption (train/command/subcommand.h) over CLI11.
#include "train/command/subcommand.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <iomanip>
#include <sstream>
#include <type_traits>

namespace relgrad::cli_detail {

CommandOption& CommandOption::required() {
  option_->required();
  return *this;
}

namespace {

std::string number_text(double v) {  // 1000000, not 1e+06 or 1000000.000000
  std::ostringstream s;
  s << std::setprecision(15) << v;
  return s.str();
}

// A range check with messages that say what is wrong with the value ("'abc' is not a number", "nan is
// not a number", "0 is not in (0, 1]"); CLI11 puts the option's name in front. CLI::Range passes NaN
// (every comparison with it is false) and calls a word "Value abc not in range 0.000000 to 1.000000".
// The value is read with CLI11's own conversion, so the check and the option agree on what it is.
template <class T>
CLI::Validator range_check(T min, T max, Lower lower) {
  constexpr bool real = std::is_floating_point_v<T>;
  const std::string interval = std::string(lower == Lower::Open ? "(" : "[") + number_text(double(min)) + ", " +
                               number_text(double(max)) + "]";
  const std::string kind = real ? "FLOAT" : "INT";
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        T value{};
        if (!CLI::detail::lexical_cast(input, value))
          return "'" + input + "' is not " + (real ? "a number" : "an integer") + " (" + kind + " in " + interval + ")";
        if constexpr (real)
          if (std::isnan(value)) return input + " is not a number (" + kind + " in " + interval + ")";
        if (value < min || value > max || (lower == Lower::Open && value == min))
          return input + " is not in " + interval;
        return std::string();
      },
      kind + " in " + interval);
}

}  // namespace

CommandOption& CommandOption::range(int min, int max) {
  option_->check(range_check<int64_t>(min, max, Lower::Closed));
  return *this;
}

CommandOption& CommandOption::range(int64_t min, int64_t max) {
  option_->check(range_check<int64_t>(min, max, Lower::Closed));
  return *this;
}

CommandOption& CommandOption::range(double min, double max, Lower lower) {
  option_->check(range_check<double>(min, max, lower));
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
