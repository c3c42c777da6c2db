// The studies: every published comparison is one file and one line of the table in
// study.cpp (its command, `relgrad NAME`, comes from the table: train/command/subcommands.cpp),
// or one register_study call from outside the library (`relgrad bench NAME`). A study says what
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
#include <map>
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
  // (bench::finish); else the report's failures decide the exit code.
  bool full = false, resized = false;
};

// A flag of a study's own command line beyond the common ones (--full, --tasks, --treatments, --seeds,
// --steps, --out), e.g. addition-bench's --no-plain. The command declares it and hands what was given
// to the study by name (StudyArgs).
enum class StudyFlagKind { Switch, Text, List };
struct StudyFlag {
  std::string name;  // "--no-plain"
  StudyFlagKind kind;
  std::string help;
  bool input_file = false;  // Text: a file the study reads, which its --out must not be (exit 2)
};

// What the command line gave a study: the common options and its own flags by name.
struct StudyArgs {
  StudyOptions options;
  std::map<std::string, std::vector<std::string>> given;  // each flag given: no value, its text, its list
  bool has(const std::string& flag) const { return given.count(flag) > 0; }
  std::string text(const std::string& flag, const std::string& fallback) const;
  std::vector<std::string> list(const std::string& flag) const;  // empty when not given
};

struct StudyEntry {
  std::string name;      // its command, `relgrad NAME` (built-ins), and `relgrad bench NAME`
  std::string summary;   // the line `relgrad --help` shows
  std::string synopsis;  // the arguments after `relgrad NAME` ("" = the common ones)
  // The common options' help where the study says more than the default (its forms' lengths, its
  // treatments); and whether it takes --tasks.
  std::string full_help = "the documented run; default: the CI form";
  std::string treatments_help = "comma-separated, e.g. none,t5,rope (default: the form's)";
  std::string seeds_help = "comma-separated seeds (default: the form's)";
  std::string tasks_help = "comma-separated (default: the form's)";
  bool takes_tasks = true;
  std::string out_help = "folder for the tables, pictures and run directories (default: runs/NAME)";
  std::vector<std::string> out_aliases;  // further names of --out ("--out-dir")
  std::vector<StudyFlag> flags;          // its own
  // Checks what it was given before anything trains: an Error here is a usage error (exit 2).
  std::function<void(const StudyArgs& args)> check = nullptr;
  // Either a plan (run_study trains it on the spine and writes its tables) ...
  std::function<StudyPlan(const StudyOptions& options)> plan = nullptr;
  // ... or a run of its own that does all of it (the built-in benches; each trains its models on the
  // spine, train/instruments/task_models.h). Returns the exit code.
  std::function<int(const StudyArgs& args, std::ostream& out)> run = nullptr;
};

// The built-in benches' entries, each in its own file (the table in study.cpp lists them).
StudyEntry music_bench_study();
StudyEntry length_bench_study();
StudyEntry addition_bench_study();
StudyEntry cope_bench_study();
StudyEntry context_bench_study();

// Every study: the built-ins in the order of study.cpp, then register_study's.
const std::vector<StudyEntry>& studies();
const StudyEntry* find_study(const std::string& name);  // null: none of that name
std::string study_names_text();                          // "music-bench, length-bench, ..."
// Adds a study (an Error for an empty or taken name, or one with neither a plan nor a run).
void register_study(StudyEntry entry);
void unregister_study(const std::string& name);  // tests; the built-ins stay

// Runs `entry` for `args`: its own run, or its plan (out_dir empty: runs/NAME): trains what is not yet
// scored (run_study_models), and on the job's first rank writes results.csv and results.md atomically
// and prints the progress, the tables and the verdict to `out`. Returns 0 when every model trained and
// (where the checks apply) they held, else 1.
int run_study(const StudyEntry& entry, const StudyArgs& args, std::ostream& out);

}  // namespace relgrad
