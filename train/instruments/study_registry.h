// The studies `relgrad bench NAME` runs: every published comparison is one file and one line of the
// table in study_registry.cpp, or one register_study call from outside the library. A study says what
// its models are (its plan, on the spine of train/instruments/study.h) and how their records become its
// tables and its CI form's checks; run_study does the rest the same way for every study: progress with
// an ETA, a rerun that keeps the models already scored, the ranks of `mpirun`, results.csv and
// results.md, the verdict.
//
//   StudyEntry e;
//   e.name = "my-bench";  e.summary = "what it compares";
//   e.plan = [](const StudyOptions& o) { StudyPlan p;  ...;  return p; };
//   register_study(e);                  // relgrad bench my-bench [--full] [--seeds 1,2] ...
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/study.h"

namespace relgrad {

// What `relgrad bench NAME` takes: the form, the lists (empty: the form's), the steps (-1: the form's)
// and the output folder (empty: runs/NAME).
struct StudyOptions {
  bool full = false;
  std::vector<std::string> tasks, treatments;
  std::vector<uint64_t> seeds;
  int64_t steps = -1;
  std::string out_dir;
};

// What a study's records became.
struct StudyReport {
  std::string text;      // the tables for the terminal
  std::string markdown;  // results.md
  std::string csv;       // results.csv
  std::vector<std::string> pictures;  // files it wrote under out_dir (relative to it)
  std::vector<std::string> failures;  // the CI form's checks that failed (empty: all held)
};

struct StudyPlan {
  std::string heading;             // the first progress line: the form, its models, their budget
  std::vector<StudyModel> models;  // what to train, in order
  // The records (the models' order) as tables; may write pictures into `out_dir`.
  std::function<StudyReport(const std::vector<StudyRecord>& records, const std::string& out_dir)> report;
  // The full form asserts nothing; a CI form whose steps --steps changed says that it checked nothing
  // (bench::form_verdict); else the report's failures decide the exit code.
  bool full = false, resized = false;
};

struct StudyEntry {
  std::string name;     // `relgrad bench NAME`
  std::string summary;  // the line `relgrad bench --help` shows
  // The built-in benches have a command of their own with their own flags (`relgrad length-bench`);
  // `relgrad bench NAME ...` is that command. Empty for a study run by run_study.
  std::string command;
  // The models and the report for `options` (bad options: InstrumentOptionError naming the flag).
  std::function<StudyPlan(const StudyOptions& options)> plan = nullptr;
};

// Every study: the built-ins in the order of study_registry.cpp, then register_study's.
const std::vector<StudyEntry>& studies();
const StudyEntry* find_study(const std::string& name);  // null: none of that name
std::string study_names_text();                          // "music-bench, length-bench, ..."
// Adds a study (an Error for an empty or taken name, or one with neither plan nor command).
void register_study(StudyEntry entry);
void unregister_study(const std::string& name);  // tests; the built-ins stay

// Plans `entry` for `options` (out_dir empty: runs/NAME), trains what is not yet scored
// (run_study_models), and on the job's first rank writes results.csv and results.md atomically and
// prints the progress, the tables and the verdict to `out`. Returns 0 when every model trained and
// (where the checks apply) they held, else 1.
int run_study(const StudyEntry& entry, const StudyOptions& options, std::ostream& out);

}  // namespace relgrad
