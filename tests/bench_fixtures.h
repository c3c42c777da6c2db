// Shared by the bench tests (test_length_bench.cpp, test_addition_bench.cpp, test_cope_bench.cpp,
// test_context_bench.cpp): made-up runs for the CI checks and the tables, and reading back what a bench
// wrote.
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train/instruments/length_bench.h"

namespace relgrad::testing {

// A made-up model of `task`: per-token accuracy `token` per bucket, exact match 0 in each.
inline TaskModelRun made_up_run(const std::string& task, const std::string& treatment, uint64_t seed,
                                  std::vector<double> token) {
  TaskModelRun r;
  r.task = task;
  r.treatment = treatment;
  r.seed = seed;
  r.token = token;
  r.exact = std::vector<double>(token.size(), 0.0);
  return r;
}

// The lines of `text`, without their newlines.
inline std::vector<std::string> split_lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The lines of the file at `path` (none when it cannot be read).
inline std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The UTF-8 code points of `s`: the columns a terminal gives it ("–" is one, in three bytes).
inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace relgrad::testing
