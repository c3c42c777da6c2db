// The table of studies (train/instruments/study_registry.h) and the one runner of a planned study.
#include "train/instruments/study_registry.h"

#include <filesystem>
#include <mutex>
#include <ostream>

#include "core/base/error.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"
#include "train/trainer/distributed.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "bench";

// One line per built-in study, in the order `relgrad --help` lists their commands.
std::vector<StudyEntry> builtin_studies() {
  return {music_bench_study(), length_bench_study(), addition_bench_study(), cope_bench_study(),
          context_bench_study()};
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

std::vector<StudyEntry>& table() {
  static std::vector<StudyEntry> t = builtin_studies();
  return t;
}

}  // namespace

const std::vector<StudyEntry>& studies() { return table(); }

const StudyEntry* find_study(const std::string& name) {
  for (const StudyEntry& e : table())
    if (e.name == name) return &e;
  return nullptr;
}

std::string study_names_text() {
  std::string text;
  for (const StudyEntry& e : table()) text += (text.empty() ? "" : ", ") + e.name;
  return text;
}

void register_study(StudyEntry entry) {
  const std::lock_guard<std::mutex> lock(table_mutex());
  RG_CHECK(!entry.name.empty(), kOp, "a study needs a name");
  RG_CHECK(!find_study(entry.name), kOp, "a study named '", entry.name, "' is registered already");
  RG_CHECK(entry.plan || entry.run, kOp, "study '", entry.name, "' has neither a plan nor a run");
  table().push_back(std::move(entry));
}

void unregister_study(const std::string& name) {
  const std::lock_guard<std::mutex> lock(table_mutex());
  const size_t builtins = builtin_studies().size();
  std::vector<StudyEntry>& t = table();
  for (size_t i = builtins; i < t.size(); ++i)
    if (t[i].name == name) {
      t.erase(t.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

std::string StudyArgs::text(const std::string& flag, const std::string& fallback) const {
  const auto it = given.find(flag);
  return it == given.end() || it->second.empty() ? fallback : it->second.front();
}

std::vector<std::string> StudyArgs::list(const std::string& flag) const {
  const auto it = given.find(flag);
  return it == given.end() ? std::vector<std::string>{} : it->second;
}

int run_study(const StudyEntry& entry, const StudyArgs& args, std::ostream& out) {
  if (entry.run) return entry.run(args, out);
  StudyOptions o = args.options;
  if (o.out_dir.empty()) o.out_dir = (std::filesystem::path("runs") / entry.name).string();
  const ThreadCountGuard restore_threads;
  const auto start = std::chrono::steady_clock::now();
  const StudyPlan plan = entry.plan(o);
  RG_CHECK(plan.report, entry.name, "its plan has no report");
  const bool root = world().is_root();
  if (root) std::filesystem::create_directories(o.out_dir);
  world().barrier();  // the folder exists before any rank writes a record under it
  out << plan.heading << "\n" << std::flush;
  const std::vector<StudyRecord> records = run_study_models(entry.name, plan.models, o.out_dir, &out);
  if (!root) return 0;
  const StudyReport report = plan.report(records, o.out_dir);
  bench::write_results(o.out_dir, report.csv, report.markdown, entry.name);
  out << report.text << bench::written(o.out_dir, report.pictures) << " (" << study_duration_text(seconds_since(start))
      << ")\n";
  return bench::form_verdict(plan.full, plan.resized, report.failures, out);
}

}  // namespace relgrad
