// `relgrad length-bench` (train/instruments/length_bench.h) in its CI form: copy and reverse, trained
// on input lengths 1–6 and tested on 1–6, 7–9 and 10–12, models without a positional term (NoPE),
// with learned absolute positions, T5's bias and randomised RoPE, three seeds each. What is asserted
// held with a wide margin on every seed measured (docs/length-generalisation.md has the figures):
// per-token accuracy in the training lengths >= 70% for every model, and beyond them NoPE at least 15
// points above learned absolute positions on every task and seed. Exact match beyond the training
// lengths is 0–17% for every treatment at this budget, so nothing is asserted about it. The checks
// themselves are tested on made-up results first.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "train/instruments/length_bench.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::read_bytes;
using relgrad::testing::TempDir;

namespace {

LengthBenchRun made_up_run(const std::string& treatment, uint64_t seed, std::vector<double> token) {
  LengthBenchRun r;
  r.task = "copy";
  r.treatment = treatment;
  r.seed = seed;
  r.token = token;
  r.exact = std::vector<double>(token.size(), 0.0);
  return r;
}

LengthBenchResult made_up_result() {
  LengthBenchResult r;
  r.size.buckets = {{1, 6}, {7, 9}, {10, 12}};
  r.tasks = {"copy"};
  r.treatments = {"none", "learned"};
  r.seeds = {1, 2};
  r.runs = {made_up_run("none", 1, {0.9, 0.6, 0.45}), made_up_run("none", 2, {0.88, 0.62, 0.44}),
            made_up_run("learned", 1, {1.0, 0.2, 0.15}), made_up_run("learned", 2, {1.0, 0.22, 0.2})};
  return r;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("length bench: the CI checks on made-up results") {
  LengthBenchResult r = made_up_result();
  CHECK(length_bench_failures(r).empty());
  // A model that did not learn the training lengths.
  r.runs[1].token[0] = 0.5;
  std::vector<std::string> f = length_bench_failures(r);
  REQUIRE(f.size() == 1);
  CHECK(f[0].find("copy none seed 2: per-token accuracy in the training lengths 50.0%") != std::string::npos);
  // NoPE not ahead beyond training on one seed: (0.3 + 0.3) / 2 against learned's 0.175.
  r = made_up_result();
  r.runs[0].token = {0.9, 0.3, 0.3};
  f = length_bench_failures(r);
  REQUIRE(f.size() == 1);
  CHECK(f[0].find("copy seed 1: none's per-token accuracy beyond training 30.0%") != std::string::npos);
  // Without both treatments the comparison is not made.
  r.treatments = {"none"};
  CHECK(length_bench_failures(r).empty());
  // The tables name every treatment and bucket.
  r = made_up_result();
  const std::string table = length_bench_table(r);
  CHECK(table.find("7-9") != std::string::npos);
  CHECK(table.find("learned") != std::string::npos);
  CHECK(length_bench_csv(r).find("copy,none,1,7,9,0.0000,0.6000") != std::string::npos);
}

// The CI form end to end, as `relgrad length-bench` runs it (about a minute and a half on 2 busy cores).
TEST_CASE(
    "length bench: CI form, every model learns the training lengths and NoPE beats learned APE beyond") {
  TempDir dir;
  LengthBenchOptions o;
  o.out_dir = dir.file("bench");
  std::ostringstream out;
  const int status = run_length_bench(o, out);
  INFO(out.str());
  CHECK(status == 0);
  const std::vector<std::string> rows = lines_of(dir.file("bench/results.csv"));
  REQUIRE(rows.size() == 1 + 2 * 4 * 3 * 3);  // header; tasks × treatments × seeds × buckets
  CHECK(rows[0] == "task,treatment,seed,bucket_lo,bucket_hi,exact,token,train_loss,seconds");
  const std::string md = read_bytes(dir.file("bench/results.md"));
  CHECK(md.find("## reverse") != std::string::npos);
  CHECK(md.find("| rope-random |") != std::string::npos);
  CHECK(std::filesystem::file_size(dir.file("bench/length-copy.svg")) > 1000);
  CHECK(std::filesystem::file_size(dir.file("bench/length-reverse.svg")) > 1000);
  CHECK(out.str().find("CI checks hold") != std::string::npos);
}

TEST_CASE("length bench: unknown tasks and treatments are errors naming the valid ones") {
  LengthBenchOptions o;
  TempDir dir;
  o.out_dir = dir.file("bench");
  o.tasks = {"multiply"};
  std::ostringstream out;
  check_throws_with([&] { run_length_bench(o, out); }, "unknown task 'multiply' (copy, reverse, addition");
  o.tasks = {"copy"};
  o.treatments = {"fourier"};
  check_throws_with([&] { run_length_bench(o, out); }, "unknown treatment 'fourier' (none, learned, sinusoidal");
  o.treatments = {"none"};
  o.out_dir = "";
  check_throws_with([&] { run_length_bench(o, out); }, "out_dir is empty");
}
