// The study spine (train/instruments/study.h, study_registry.h): exact records, malformed records
// refused, a rerun that keeps what an interrupted run scored, and a study registered from a test file
// run through `relgrad bench`.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "cli_testing.h"
#include "core/file_io.h"
#include "file_testing.h"
#include "testing.h"
#include "train/data/length_tasks.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"
#include "train/instruments/study_registry.h"
#include "train/instruments/task_models.h"
#include "study_testing.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::contains;
using relgrad::testing::run_relgrad;
using relgrad::testing::TempDir;
using relgrad::testing::toy_copy_study;

namespace {

// A model whose "training" counts its calls and returns `value` (throws when `fail` is set).
StudyModel counted_model(const std::string& key, double value, int& calls, const bool& fail) {
  StudyModel m;
  m.key = key;
  m.label = key;
  m.fingerprint = "counted " + key;
  m.run = [key, value, &calls, &fail] {
    if (fail) throw Error("[test] " + key + " was killed");
    ++calls;
    StudyRecord r;
    r.line = key + " scored";
    r.set("value", value);
    r.set_series("curve", {value, value / 3});
    return r;
  };
  return m;
}

std::string read_text(const std::filesystem::path& p) { return read_file(p.string(), "test"); }

}  // namespace

TEST_CASE("study records: every double comes back to the bit, and the record says which study and model") {
  StudyRecord r;
  r.line = "copy none seed 1: exact/token % 1-6:100/100";
  const double values[] = {0.0, -0.0, 1.0 / 3, 1e-310, std::numeric_limits<double>::max(), -2.5e-7,
                           std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (size_t k = 0; k < std::size(values); ++k) r.set("v" + std::to_string(k), values[k]);
  r.set("nan", std::nan(""));
  r.set_series("token", {0.25, 0.5, 0.75});
  const std::string text = study_record_text("length-bench", "fingerprint A", r);
  StudyRecord back;
  REQUIRE(parse_study_record(text, "length-bench", "fingerprint A", back, "record"));
  CHECK(back.line == r.line);
  REQUIRE(back.values.size() == r.values.size());
  for (size_t k = 0; k < std::size(values); ++k) {
    const double v = back.get("v" + std::to_string(k));
    CHECK(std::memcmp(&v, &values[k], sizeof v) == 0);  // -0.0 and 1e-310 included
  }
  CHECK(std::isnan(back.get("nan")));
  CHECK(back.series("token") == std::vector<double>{0.25, 0.5, 0.75});
  // Another study's or another fingerprint's record is out of date, not an error.
  CHECK_FALSE(parse_study_record(text, "cope-bench", "fingerprint A", back, "record"));
  CHECK_FALSE(parse_study_record(text, "length-bench", "fingerprint B", back, "record"));
  check_throws_with([&] { (void)back.get("missing"); }, "has no value 'missing'");
}

TEST_CASE("study records: a malformed record is an error naming the file, never numbers, every truncation swept") {
  StudyRecord r;
  r.line = "a model";
  r.set("x", 0.125);
  r.set("y", 3.0);
  const std::string text = study_record_text("s", "f", r);
  StudyRecord back;
  check_throws_with([&] { parse_study_record("not a record\n", "s", "f", back, "runs/a/study-record.txt"); },
                    "[runs/a/study-record.txt] is not a study record");
  std::string bad = text;
  bad.replace(bad.find("0x1p-3"), 6, "0x1pz3");
  check_throws_with([&] { parse_study_record(bad, "s", "f", back, "rec"); }, "value x '0x1pz3' is not a number");
  check_throws_with([&] { parse_study_record(text + "more\n", "s", "f", back, "rec"); }, "text after its end line");
  // Cut anywhere before its end line, a record is refused (an Error) or out of date (false); never read.
  for (size_t cut = 0; cut + 4 < text.size(); ++cut) {
    bool parsed = false;
    try {
      parsed = parse_study_record(text.substr(0, cut), "s", "f", back, "rec");
    } catch (const Error&) {
    }
    CHECK_MESSAGE(!parsed, "cut at " << cut);
  }
}

TEST_CASE("study runner: a rerun keeps what was scored, retrains what is missing or out of date") {
  TempDir dir;
  const std::string out = dir.file("study");
  int calls_a = 0, calls_b = 0, calls_c = 0;
  bool fail_c = true;  // the run is "killed" while the third model trains
  const bool never = false;
  std::vector<StudyModel> models = {counted_model("a", 1.5, calls_a, never), counted_model("b", 2.5, calls_b, never),
                                    counted_model("c", 3.5, calls_c, fail_c)};
  std::ostringstream progress;
  check_throws_with([&] { run_study_models("unit", models, out, &progress); }, "c was killed");
  CHECK(calls_a == 1);
  CHECK(calls_b == 1);
  CHECK(std::filesystem::exists(study_record_path(out, "a")));
  CHECK(std::filesystem::exists(study_record_path(out, "b")));
  CHECK_FALSE(std::filesystem::exists(study_record_path(out, "c")));
  CHECK(contains(progress.str(), "[1/3] a scored"));
  CHECK(contains(progress.str(), "ETA"));

  // Rerun: the finished models are read back, only the one in flight trains.
  fail_c = false;
  progress.str("");
  std::vector<StudyRecord> records = run_study_models("unit", models, out, &progress);
  CHECK(calls_a == 1);
  CHECK(calls_b == 1);
  CHECK(calls_c == 1);
  CHECK(contains(progress.str(), "[1/3] a scored (kept from an earlier run)"));
  CHECK(contains(progress.str(), "[3/3] c scored ("));
  REQUIRE(records.size() == 3);
  CHECK(records[0].get("value") == 1.5);
  CHECK(records[2].series("curve") == std::vector<double>{3.5, 3.5 / 3});

  // A third run trains nothing; a changed fingerprint (another size, config or version) retrains that one.
  run_study_models("unit", models, out, nullptr);
  CHECK(calls_a + calls_b + calls_c == 3);
  models[1].fingerprint += " at 10 steps";
  run_study_models("unit", models, out, nullptr);
  CHECK(calls_b == 2);
  CHECK(calls_a == 1);

  // A record that is not one stops the study, naming the file (nothing is overwritten unread).
  write_file_atomic(study_record_path(out, "a"), "garbage\n", "test");
  check_throws_with([&] { run_study_models("unit", models, out, nullptr); }, "is not a study record");
  CHECK(read_text(study_record_path(out, "a")) == "garbage\n");
  // Two models of one run directory are refused before anything trains.
  models[1].key = "c";
  check_throws_with([&] { run_study_models("unit", models, out, nullptr); }, "two models share the run directory 'c'");
}

TEST_CASE("study registry: a study registered in a test file runs through `relgrad bench`, CI form, and writes its table") {
  register_study(toy_copy_study());
  struct Unregister {
    ~Unregister() { unregister_study("toy-copy"); }
  } unregister;
  CHECK(contains(study_names_text(), "length-bench"));
  CHECK(contains(study_names_text(), "toy-copy"));
  check_throws_with([] { register_study(toy_copy_study()); }, "a study named 'toy-copy' is registered already");
  StudyEntry nameless = toy_copy_study();
  nameless.name = "";
  check_throws_with([&] { register_study(nameless); }, "[bench] a study needs a name");
  StudyEntry idle = toy_copy_study();
  idle.name = "idle";
  idle.plan = nullptr;
  check_throws_with([&] { register_study(idle); }, "study 'idle' has neither a plan nor a run");
  auto which = run_relgrad({"bench"});
  CHECK_CLI(which, 2);
  CHECK(contains(which.err, "[bench] which study? (music-bench, length-bench"));
  auto empty_out = run_relgrad({"bench", "toy-copy", "--out", ""});
  CHECK_CLI(empty_out, 2);
  CHECK(contains(empty_out.err, "[toy-copy] --out is empty"));
  auto seeds = run_relgrad({"toy-copy", "--seeds", "1,,2"});
  CHECK_CLI(seeds, 2);
  CHECK(contains(seeds.err, "[toy-copy] --seeds '1,,2': an empty item"));

  TempDir dir;
  const std::string out = dir.file("toy");
  auto r = run_relgrad({"bench", "toy-copy", "--treatments", "none,t5,alibi", "--seeds", "1,2", "--out", out});
  CHECK_CLI(r, 0);
  CHECK_MESSAGE(contains(r.out, "toy-copy: 3 treatments"), r.out);
  CHECK_MESSAGE(contains(r.out, "[6/6] copy alibi seed 2"), r.out);
  CHECK_MESSAGE(contains(r.out, "CI checks hold"), r.out);
  const std::string csv = read_text(std::filesystem::path(out) / "results.csv");
  CHECK(contains(csv, "treatment,seed,token_train\nnone,1,"));
  CHECK(contains(csv, "\nalibi,2,"));
  CHECK(contains(read_text(std::filesystem::path(out) / "results.md"), "| t5 |"));
  // Run again: nothing trains, and the table is the same to the byte.
  auto again = run_relgrad({"bench", "toy-copy", "--treatments", "none,t5,alibi", "--seeds", "1,2", "--out", out});
  CHECK_CLI(again, 0);
  CHECK(contains(again.out, "[6/6] copy alibi seed 2: exact/token"));
  CHECK(contains(again.out, "(kept from an earlier run)"));
  CHECK(read_text(std::filesystem::path(out) / "results.csv") == csv);
  // The built-in benches answer to `relgrad bench NAME` with their own flags; an unknown study is a usage error.
  auto unknown = run_relgrad({"bench", "toy-cpy"});
  CHECK_CLI(unknown, 2);
  CHECK(contains(unknown.err, "unknown study 'toy-cpy' (music-bench, length-bench"));
  auto builtin = run_relgrad({"bench", "addition-bench", "--plain-treatments", "abacus"});
  CHECK_CLI(builtin, 2);
  CHECK(contains(builtin.err, "--plain-treatments 'abacus': unknown treatment"));
}
