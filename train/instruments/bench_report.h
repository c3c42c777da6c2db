// What the five benches share: their options' and results' common fields, the checks of an option's
// list, what `--steps` does to a form's size, the table of treatments × lengths (or splits) as markdown
// or as aligned text, a cell's spread over seeds, and the end of a run (the results files, the CI
// verdict). Each bench's own file keeps its titles, notes, CSV columns and CI checks.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/instruments/study_registry.h"
#include "train/instruments/task_models.h"

namespace relgrad {

// What every bench's result holds beside its own numbers.
struct BenchResult {
  bool full = false;
  bool resized = false;  // --steps changed the form's steps (bench::form_name)
  std::vector<std::string> tasks, treatments;
  std::vector<uint64_t> seeds;
  std::vector<std::string> pictures;  // written under out_dir (relative to it)
  double seconds = 0;
};

}  // namespace relgrad

namespace relgrad::bench {

bool known(const std::vector<std::string>& names, const std::string& name);  // whether names holds name
std::string joined(const std::vector<std::string>& names);                   // "a, b, c"
std::string fixed(double v, int digits);                                      // printf's "%.*f"
// An Error "[op] PREFIXunknown WHAT 'name' (the accepted ones)" for the first of `given` not accepted.
void check_known(const std::string& op, const std::string& prefix, const std::string& what,
                 const std::vector<std::string>& given, const std::vector<std::string>& accepted);
// A bench's own options struct (derived from StudyOptions) with the common options the command line gave.
template <class BenchOptions>
BenchOptions options_of(const StudyArgs& a) {
  BenchOptions o;
  static_cast<StudyOptions&>(o) = a.options;
  return o;
}

// `--steps N` (N > 0; the options' -1 keeps the form's): the form's `steps` become N and its `warmup` at
// most a tenth of N (at least 1), so that a short run is not all warm-up.
void override_steps(int64_t steps, int64_t& form_steps, int64_t& form_warmup);

// The characters (UTF-8 code points) of `s`, the columns it takes in a terminal: "–" is one, in 3 bytes.
size_t text_width(const std::string& s);

// A table of labelled rows.
struct Table {
  struct Row {
    std::string label;
    std::vector<std::string> cells;  // one per column
  };
  std::string corner = "treatment";  // the header's first cell
  std::vector<std::string> columns;  // the header's other cells
  std::vector<Row> rows;
};
// Markdown: a pipe table, the first column left-aligned and the others right-aligned. Text: every line
// indented two spaces, the labels left-aligned in `label_width` characters and the cells right-aligned
// in `cell_width`, a column wider where a cell needs it (one space at least between columns); widths
// are counted by text_width, so that a cell holding "–" lines up.
struct TableFormat {
  bool markdown = false;
  size_t label_width = 18, cell_width = 16;
};
std::string render_table(const Table& table, const TableFormat& format);

// What a cell shows of a run's value v at a column: v (an accuracy) or the error rate 1 − v.
enum class Score { Accuracy, Error };
// The mean, min and max over seeds of the score of every run of (task, treatment) at column `k` of its
// exact match (exact) or per-token accuracy; n = 0 and NaNs when no run matched.
struct Spread {
  double mean = NAN, lo = NAN, hi = NAN;
  int n = 0;
};
Spread seed_spread(const std::vector<TaskModelRun>& runs, const std::string& task, const std::string& treatment,
                   size_t k, bool exact, Score score);
// The mean and sample standard deviation of `v`: NaNs and n = 0 for none, sd NaN for one value.
struct MeanSd {
  double mean = NAN, sd = NAN;
  size_t n = 0;
};
MeanSd mean_sd(const std::vector<double>& v);
// The run of (task, treatment, seed); null when there is none.
const TaskModelRun* find_run(const std::vector<TaskModelRun>& runs, const std::string& task,
                             const std::string& treatment, uint64_t seed);
// One task's table: a row per treatment, a cell per column (seed_spread at that column's index).
std::string spread_table(const std::vector<TaskModelRun>& runs, const std::string& task,
                         const std::vector<std::string>& treatments, const std::vector<std::string>& columns,
                         bool exact, Score score, const TableFormat& format);

// What a run was, for its titles: "full form", "CI form", or, when --steps changed the form's steps
// (`resized`), "CI form's models at 5 steps", which is no longer the form the checks were measured at.
std::string form_name(bool full, bool resized, int64_t steps);
// "1 task", "3 tasks": n and the noun, plural unless n is 1.
std::string counted(size_t n, const std::string& noun);
// Writes results.csv and results.md into `dir` atomically (`who` names the bench in errors); under
// mpirun, on the first rank only.
void write_results(const std::string& dir, const std::string& csv, const std::string& markdown, const std::string& who);
// The end of a bench's run: write_results, the tables and "wrote DIR/results.csv, DIR/results.md,
// DIR/PICTURE…" (then `after`) to `out`; returns the exit code: in the CI form, 0 when no check failed
// ("CI checks hold"), else 1 ("CI check failed: …" per failure); with its steps changed the CI form says
// that it checked nothing, and returns 0, as the full form does.
int finish(const std::string& who, const std::string& dir, const StudyReport& report, bool full, bool resized,
           std::ostream& out, const std::string& after = "");

}  // namespace relgrad::bench
