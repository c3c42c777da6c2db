// The benches' shared report pieces (train/instruments/bench_report.h).
#include "train/instruments/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/trainer/distributed.h"

namespace relgrad::bench {

bool known(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void check_known(const std::string& op, const std::string& prefix, const std::string& what,
                 const std::vector<std::string>& given, const std::vector<std::string>& accepted) {
  for (const std::string& t : given)
    RG_CHECK(known(accepted, t), op, prefix, "unknown ", what, " '", t, "' (", joined(accepted), ")");
}

void override_steps(int64_t steps, int64_t& form_steps, int64_t& form_warmup) {
  if (steps <= 0) return;
  form_steps = steps;
  form_warmup = std::min(form_warmup, std::max<int64_t>(1, steps / 10));
}

size_t text_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // every byte but a continuation byte starts a code point
  return n;
}

namespace {

std::string spaces(size_t width, const std::string& s) {
  const size_t used = text_width(s);
  return std::string(width > used ? width - used : 0, ' ');
}

}  // namespace

std::string render_table(const Table& t, const TableFormat& f) {
  for (const Table::Row& row : t.rows)
    RG_CHECK(row.cells.size() == t.columns.size(), "bench table", "row '", row.label, "' has ", row.cells.size(),
             " cells for ", t.columns.size(), " columns");
  std::ostringstream out;
  if (f.markdown) {
    out << "| " << t.corner << " |";
    for (const std::string& c : t.columns) out << " " << c << " |";
    out << "\n|---|";
    for (size_t k = 0; k < t.columns.size(); ++k) out << "---:|";
    out << "\n";
    for (const Table::Row& row : t.rows) {
      out << "| " << row.label << " |";
      for (const std::string& c : row.cells) out << " " << c << " |";
      out << "\n";
    }
    return out.str();
  }
  // Each column as wide as the format says, or wider where a cell (or the header) needs it, so that one
  // space at least parts every two columns.
  size_t label_width = f.label_width;
  std::vector<size_t> width(t.columns.size(), f.cell_width);
  const auto widen = [&](const std::string& label, const std::vector<std::string>& cells) {
    label_width = std::max(label_width, text_width(label) + 1);
    for (size_t k = 0; k < cells.size(); ++k) width[k] = std::max(width[k], text_width(cells[k]) + 1);
  };
  widen(t.corner, t.columns);
  for (const Table::Row& row : t.rows) widen(row.label, row.cells);
  const auto put = [&](const std::string& label, const std::vector<std::string>& cells) {
    out << "  " << label << spaces(label_width, label);
    for (size_t k = 0; k < cells.size(); ++k) out << spaces(width[k], cells[k]) << cells[k];
    out << "\n";
  };
  put(t.corner, t.columns);
  for (const Table::Row& row : t.rows) put(row.label, row.cells);
  return out.str();
}

Spread seed_spread(const std::vector<TaskModelRun>& runs, const std::string& task, const std::string& treatment,
                   size_t k, bool exact, Score score) {
  Spread s;
  double sum = 0;
  for (const TaskModelRun& run : runs) {
    if (run.task != task || run.treatment != treatment) continue;
    const double accuracy = (exact ? run.exact : run.token).at(k);
    const double v = score == Score::Error ? 1 - accuracy : accuracy;
    s.lo = s.n ? std::min(s.lo, v) : v;
    s.hi = s.n ? std::max(s.hi, v) : v;
    sum += v;
    ++s.n;
  }
  if (s.n) s.mean = sum / s.n;
  return s;
}

MeanSd mean_sd(const std::vector<double>& v) {
  MeanSd s;
  s.n = v.size();
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  if (v.size() < 2) return s;
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(sq / static_cast<double>(v.size() - 1));
  return s;
}

const TaskModelRun* find_run(const std::vector<TaskModelRun>& runs, const std::string& task,
                             const std::string& treatment, uint64_t seed) {
  for (const TaskModelRun& run : runs)
    if (run.task == task && run.treatment == treatment && run.seed == seed) return &run;
  return nullptr;
}

namespace {

// In %, one decimal: "-" without a run, "mean" of one, "mean (min–max)" of several.
std::string spread_cell(const Spread& s) {
  std::string cell = s.n == 0 ? "-" : fixed(100 * s.mean, 1);
  if (s.n > 1) cell += " (" + fixed(100 * s.lo, 1) + "–" + fixed(100 * s.hi, 1) + ")";
  return cell;
}

}  // namespace

std::string spread_table(const std::vector<TaskModelRun>& runs, const std::string& task,
                         const std::vector<std::string>& treatments, const std::vector<std::string>& columns,
                         bool exact, Score score, const TableFormat& format) {
  Table t;
  t.columns = columns;
  for (const std::string& treatment : treatments) {
    Table::Row row{treatment, {}};
    for (size_t k = 0; k < columns.size(); ++k)
      row.cells.push_back(spread_cell(seed_spread(runs, task, treatment, k, exact, score)));
    t.rows.push_back(std::move(row));
  }
  return render_table(t, format);
}

void write_results(const std::string& dir, const std::string& csv, const std::string& markdown,
                   const std::string& who) {
  if (!world().is_root()) return;  // under mpirun every rank holds the same tables; the first writes them
  const std::filesystem::path d(dir);
  write_file_atomic((d / "results.csv").string(), csv, who);
  write_file_atomic((d / "results.md").string(), markdown, who);
}

int finish(const std::string& who, const std::string& dir, const StudyReport& report, bool full, bool resized,
           std::ostream& out, const std::string& after) {
  write_results(dir, report.csv, report.markdown, who);
  const std::filesystem::path d(dir);
  out << report.text << "wrote " << (d / "results.csv").string() << ", " << (d / "results.md").string();
  for (const std::string& p : report.pictures) out << ", " << (d / p).string();
  out << after << "\n";
  if (full) return 0;
  if (resized) {
    out << "no CI checks: --steps changed the CI form's steps, and its checks hold at those only\n";
    return 0;
  }
  for (const std::string& f : report.failures) out << "CI check failed: " << f << "\n";
  if (report.failures.empty()) out << "CI checks hold\n";
  return report.failures.empty() ? 0 : 1;
}

std::string form_name(bool full, bool resized, int64_t steps) {
  const std::string form = full ? "full form" : "CI form";
  return resized ? form + "'s models at " + std::to_string(steps) + " steps" : form;
}

std::string counted(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace relgrad::bench
