// The study runner (train/instruments/study.h): records, resume, progress and the spread over ranks; the
// table of studies and the one runner of a planned study (train/instruments/study_registry.h).
#include "train/instruments/study.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <ostream>
#include <sstream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"
#include "train/instruments/study_registry.h"
#include "train/trainer/distributed.h"

namespace relgrad {

namespace {

constexpr const char* kHeader = "relgrad study record 1";
constexpr const char* kOp = "bench";

std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);  // exact: every bit of the double round-trips through strtod
  return buf;
}

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string fingerprint_hash(const std::string& fingerprint) {
  return hex64(fnv1a64(fingerprint.data(), fingerprint.size()));
}

// Rank `owner`'s text to every rank.
std::string broadcast_text(Communicator& comm, std::string text, int owner) {
  int64_t bytes = static_cast<int64_t>(text.size());
  comm.broadcast(&bytes, sizeof bytes, owner);
  text.resize(static_cast<size_t>(bytes));
  if (bytes > 0) comm.broadcast(text.data(), bytes, owner);
  return text;
}

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

void StudyRecord::set(const std::string& name, double value) {
  for (auto& [n, v] : values)
    if (n == name) {
      v = value;
      return;
    }
  values.emplace_back(name, value);
}

double StudyRecord::get(const std::string& name) const {
  for (const auto& [n, v] : values)
    if (n == name) return v;
  throw Error(detail::concat("[study record] '", line, "' has no value '", name, "'"));
}

void StudyRecord::set_series(const std::string& name, const std::vector<double>& series) {
  for (size_t k = 0; k < series.size(); ++k) set(name + "." + std::to_string(k), series[k]);
}

std::vector<double> StudyRecord::series(const std::string& name) const {
  std::vector<double> out;
  for (;;) {
    const std::string key = name + "." + std::to_string(out.size());
    bool found = false;
    for (const auto& [n, v] : values)
      if (n == key) {
        out.push_back(v);
        found = true;
        break;
      }
    if (!found) return out;
  }
}

std::string study_record_path(const std::string& out_dir, const std::string& key) {
  return (std::filesystem::path(out_dir) / "runs" / key / "study-record.txt").string();
}

std::string study_record_text(const std::string& study, const std::string& fingerprint, const StudyRecord& r) {
  std::ostringstream out;
  out << kHeader << "\nstudy " << study << "\nfingerprint " << fingerprint_hash(fingerprint) << "\nline "
      << r.line << "\n";
  for (const auto& [name, v] : r.values) out << "value " << name << " " << hex_double(v) << "\n";
  out << "end\n";
  return out.str();
}

bool parse_study_record(const std::string& text, const std::string& study, const std::string& fingerprint,
                        StudyRecord& record, const std::string& who) {
  std::istringstream in(text);
  std::string line;
  const auto next = [&](const char* what) {
    RG_CHECK(std::getline(in, line), who, "ends before its ", what, " line");
  };
  next("header");
  RG_CHECK(line == kHeader, who, "is not a study record (its first line is '", line.substr(0, 60), "')");
  next("study");
  if (line != "study " + study) return false;
  next("fingerprint");
  if (line != "fingerprint " + fingerprint_hash(fingerprint)) return false;
  next("line");
  RG_CHECK(line.rfind("line ", 0) == 0, who, "has '", line.substr(0, 60), "' where its line was expected");
  StudyRecord r;
  r.line = line.substr(5);
  for (;;) {
    next("end");
    if (line == "end") break;
    std::istringstream fields(line);
    std::string word, name, number, extra;
    fields >> word >> name >> number;
    RG_CHECK(word == "value" && !name.empty() && !number.empty() && !(fields >> extra), who, "has a malformed line '",
             line.substr(0, 60), "'");
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    RG_CHECK(end && *end == '\0', who, "value ", name, " '", number, "' is not a number");
    r.values.emplace_back(name, v);
  }
  RG_CHECK(!std::getline(in, line), who, "has text after its end line");
  record = std::move(r);
  return true;
}

Communicator& study_model_communicator() {
  static const std::unique_ptr<Communicator> single = make_single_communicator();
  return *single;
}

std::string study_duration_text(double seconds) {
  const long long s = static_cast<long long>(seconds + 0.5);
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s / 60 % 60) + " min";
}

std::string file_fingerprint(const std::string& path, const std::string& who) {
  const std::string bytes = read_file(path, who);
  return std::to_string(bytes.size()) + " bytes, fnv1a64 " + hex64(fnv1a64(bytes.data(), bytes.size()));
}

std::vector<StudyRecord> run_study_models(const std::string& study, const std::vector<StudyModel>& models,
                                          const std::string& out_dir, std::ostream* progress, Communicator* comm) {
  Communicator& world_comm = comm ? *comm : world();
  const int rank = world_comm.rank(), ranks = world_comm.size();
  const size_t n = models.size();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < i; ++j)
      RG_CHECK(models[i].key != models[j].key, study, "two models share the run directory '", models[i].key, "'");

  // This rank's models: kept records first (so the ETA counts only what will train), then training.
  std::vector<StudyRecord> records(n);
  std::vector<bool> mine(n, false), kept(n, false);
  size_t to_train = 0;
  for (size_t i = 0; i < n; ++i) {
    mine[i] = static_cast<int>(i % static_cast<size_t>(ranks)) == rank;
    if (!mine[i]) continue;
    const std::string path = study_record_path(out_dir, models[i].key);
    kept[i] = std::filesystem::exists(path) &&
              parse_study_record(read_file(path, study), study, models[i].fingerprint, records[i], path);
    to_train += !kept[i];
  }
  const auto counter = [n](size_t i) { return "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] "; };
  double trained_seconds = 0;
  size_t trained = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!mine[i]) continue;
    const StudyModel& m = models[i];
    if (kept[i]) {
      if (progress) *progress << "  " << counter(i) << records[i].line << " (kept from an earlier run)\n" << std::flush;
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    records[i] = m.run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string path = study_record_path(out_dir, m.key);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    write_file_atomic(path, study_record_text(study, m.fingerprint, records[i]), study);
    trained_seconds += seconds;
    ++trained;
    if (progress) {
      *progress << "  " << counter(i) << records[i].line << " (" << study_duration_text(seconds);
      if (trained < to_train)
        *progress << "; ETA "
                  << study_duration_text(trained_seconds / static_cast<double>(trained) *
                                         static_cast<double>(to_train - trained));
      *progress << ")\n" << std::flush;
    }
  }

  // Every record to every rank, as its text (exact: %a). A rank that finished early waits for the
  // slowest as long as it takes (a model may train for many minutes), so the collective deadline is off
  // for the exchange.
  if (ranks > 1) {
    const double deadline = world_comm.timeout();
    world_comm.set_timeout(0);
    for (size_t i = 0; i < n; ++i) {
      const std::string text = broadcast_text(
          world_comm, mine[i] ? study_record_text(study, models[i].fingerprint, records[i]) : std::string(),
          static_cast<int>(i % static_cast<size_t>(ranks)));
      if (!mine[i])
        RG_CHECK(parse_study_record(text, study, models[i].fingerprint, records[i], study), study,
                 "the record of ", models[i].label, " did not come back");
    }
    world_comm.set_timeout(deadline);
  }
  return records;
}

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
  return bench::finish(entry.name, o.out_dir, report, plan.full, plan.resized, out,
                       " (" + study_duration_text(seconds_since(start)) + ")");
}

}  // namespace relgrad
