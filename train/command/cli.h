// The `relgrad` command (train/command/main.cpp is only `return run_cli(argc, argv, std::cout, std::cerr)`),
// here so that tests run it in-process and check exit codes and messages.
//
//   relgrad <command> [options]: the commands, their options and the synopsis `relgrad --help` prints
//   are one table, train/command/subcommands.cpp (one file per command in train/command/subcommands/).
//
// Exit codes: 0 success, 1 an error while running (bad file, output that could not be written to
// `out`, ...), 2 a usage error (unknown option or key, bad value, missing argument, an option that
// would be ignored), 3 a NaN/Inf stopped training (NonFiniteError), 4 out of
// memory (OutOfMemoryError or std::bad_alloc), 128 + N stopped by signal N. Every error is one line on stderr,
// "relgrad <command>: error: [<where>] <what>", and nothing that existed is overwritten by a failing
// command: configs are validated and inputs read before any output file is touched, and every
// output file is written atomically. docs/cli.md is the user's guide.
#pragma once
#include <exception>
#include <iosfwd>
#include <string>

namespace relgrad {

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// The one-line report of an exception that `command` ("relgrad train", ...) threw, written to
// `err`; returns its exit code (above; an unknown exception gives 1).
int report_error(const std::string& command, std::exception_ptr error, std::ostream& err);

}  // namespace relgrad
