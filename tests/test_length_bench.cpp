// `relgrad length-bench` (train/instruments/length_bench.h) in its CI form: copy and reverse, trained
// on input lengths 1–6 and tested on 1–6, 7–9 and 10–12, models without a positional term (NoPE),
// with learned absolute positions, T5's bias and randomised RoPE, three seeds each. What is asserted
// held with a wide margin on every seed measured (docs/length-generalisation.md has the figures):
// per-token accuracy in the training lengths >= 70% for every model, and beyond them NoPE at least 15
// points above learned absolute positions on every task and seed. Exact match beyond the training
// lengths is 0–17% for every treatment at this budget, so nothing is asserted about it. The checks
// themselves are tested on made-up results first, and so is what `--steps` does to every bench's form.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <utility>

#include "bench_fixtures.h"
#include "file_testing.h"
#include "testing.h"
#include "train/instruments/addition_bench.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/context_bench.h"
#include "train/instruments/cope_bench.h"
#include "train/instruments/length_bench.h"
#include "train/instruments/music_bench.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::code_points;
using relgrad::testing::lines_of;
using relgrad::testing::made_up_run;
using relgrad::testing::read_bytes;
using relgrad::testing::split_lines;
using relgrad::testing::TempDir;

namespace {

LengthBenchResult made_up_result() {
  LengthBenchResult r;
  r.size.buckets = {{1, 6}, {7, 9}, {10, 12}};
  r.tasks = {"copy"};
  r.treatments = {"none", "learned"};
  r.seeds = {1, 2};
  r.runs = {made_up_run("copy", "none", 1, {0.9, 0.6, 0.45}), made_up_run("copy", "none", 2, {0.88, 0.62, 0.44}),
            made_up_run("copy", "learned", 1, {1.0, 0.2, 0.15}), made_up_run("copy", "learned", 2, {1.0, 0.22, 0.2})};
  return r;
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

// A cell's width is its characters, not its bytes: "–" (U+2013) is one character in three bytes, and
// a cell too wide for its column widens the column (one space at least between two).
TEST_CASE("length bench: text table columns holding an en dash line up") {
  const LengthBenchResult r = made_up_result();
  CHECK(length_bench_task_table(r, "copy", false, false) ==
        "  treatment                  1-6 (train)              7-9            10-12\n"
        "  none                  89.0 (88.0–90.0) 61.0 (60.0–62.0) 44.5 (44.0–45.0)\n"
        "  learned            100.0 (100.0–100.0) 21.0 (20.0–22.0) 17.5 (15.0–20.0)\n");
  CHECK(length_bench_task_table(r, "copy", true, false) ==
        "  treatment              1-6 (train)             7-9           10-12\n"
        "  none                 0.0 (0.0–0.0)   0.0 (0.0–0.0)   0.0 (0.0–0.0)\n"
        "  learned              0.0 (0.0–0.0)   0.0 (0.0–0.0)   0.0 (0.0–0.0)\n");
  // Every line of the whole text output's tables as wide as its header, in characters.
  size_t header = 0;
  for (const std::string& line : split_lines(length_bench_table(r))) {
    if (line.rfind("  treatment", 0) == 0) header = code_points(line);
    else if (line.rfind("  ", 0) == 0) CHECK(code_points(line) == header);
  }
  CHECK(header > 0);
  // A column of lone dashes, and one whose header is its widest cell, in the shared writer.
  bench::Table t;
  t.columns = {"a", "bbbbbb"};
  t.rows = {{"x", {"–", "1.0"}}, {"yy", {"2.0 (1.0–3.0)", "–"}}};
  bench::TableFormat text;
  text.label_width = 4;
  text.cell_width = 5;
  CHECK(bench::render_table(t, text) ==
        "  treatment              a bbbbbb\n"
        "  x                      –    1.0\n"
        "  yy         2.0 (1.0–3.0)      –\n");
  text.markdown = true;
  CHECK(bench::render_table(t, text) ==
        "| treatment | a | bbbbbb |\n|---|---:|---:|\n| x | – | 1.0 |\n| yy | 2.0 (1.0–3.0) | – |\n");
  t.rows[1].cells.pop_back();
  check_throws_with([&] { bench::render_table(t, text); }, "row 'yy' has 1 cells for 2 columns");
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
  check_throws_with([&] { run_length_bench(o, out); }, "unknown treatment 'fourier' (none, sinusoidal, learned");
  o.treatments = {"none"};
  o.out_dir = "";
  check_throws_with([&] { run_length_bench(o, out); }, "out_dir is empty");
}

TEST_CASE("length bench: --steps replaces every bench form's steps and caps its warm-up at a tenth") {
  int64_t steps = 600, warmup = 60;
  for (int64_t none : {-1, 0}) {
    bench::override_steps(none, steps, warmup);
    CHECK(steps == 600);
    CHECK(warmup == 60);
  }
  bench::override_steps(2000, steps, warmup);
  CHECK(steps == 2000);
  CHECK(warmup == 60);  // a tenth would be more than the form's warm-up
  bench::override_steps(40, steps, warmup);
  CHECK(steps == 40);
  CHECK(warmup == 4);
  bench::override_steps(5, steps, warmup);
  CHECK(steps == 5);
  CHECK(warmup == 1);  // one step at least
  // every bench's form goes through it (the CI forms' warm-ups are all above 4)
  LengthBenchOptions length;
  AdditionBenchOptions addition;
  CopeBenchOptions cope;
  ContextBenchOptions context;
  MusicBenchOptions music;
  length.steps = addition.steps = cope.steps = context.steps = music.steps = 40;
  const std::vector<std::pair<int64_t, int64_t>> forms{
      {length_bench_size(length).steps, length_bench_size(length).warmup},
      {addition_bench_size(addition).steps, addition_bench_size(addition).warmup},
      {cope_bench_size(cope).model.steps, cope_bench_size(cope).model.warmup},
      {context_bench_size(context).steps, context_bench_size(context).warmup},
      {music_bench_size(music).steps, music_bench_size(music).warmup}};
  for (const auto& [form_steps, form_warmup] : forms) {
    CHECK(form_steps == 40);
    CHECK(form_warmup == 4);
  }
}
