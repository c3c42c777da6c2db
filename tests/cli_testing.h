// The `relgrad` command run in-process (train/command/cli.h run_cli), for the tests of its exit codes and
// messages: one definition shared by every test file that drives the CLI.
#pragma once
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "train/command/cli.h"

namespace relgrad::testing {

struct CliResult {
  int code;             // the exit code run_cli returns (0 ok, 1 runtime error, 2 usage/config error, ...)
  std::string out, err;
};

// relgrad <args...>: argv[0] is "relgrad".
inline CliResult run_relgrad(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"relgrad"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Captures what is written to std::cerr (warnings the library prints there) while alive.
struct CerrCapture {
  std::ostringstream text;
  std::streambuf* old = std::cerr.rdbuf(text.rdbuf());
  ~CerrCapture() { std::cerr.rdbuf(old); }
};

}  // namespace relgrad::testing

// CHECK_CLI(run_relgrad({...}), 0): the exit code, with the command's whole output when it differs.
#define CHECK_CLI(result, expected_code)                                                    \
  CHECK_MESSAGE((result).code == (expected_code), "exit " << (result).code << "\nstdout:\n" \
                                                          << (result).out << "\nstderr:\n"  \
                                                          << (result).err)
