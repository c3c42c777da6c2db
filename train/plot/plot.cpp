// Training logs: the JSONL / CSV reader and the standard plot of a log (the column names are the
// trainer's, train/trainer/training_log.h). The drawing is train/plot/plot_scene.cpp.
#include "train/plot/plot.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/trainer/training_log.h"

namespace relgrad {
namespace {

constexpr const char* kWho = "plot";
// The names the reader looks up, from the trainer's column table (train/trainer/training_log.h).
const std::string kStep = log_column_name(LogColumn::Step);
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// "[plot] <path>:<line>: <what>"
#define LOG_CHECK(cond, ...) RG_CHECK(cond, kWho, path, ":", line_no, ": ", __VA_ARGS__)

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// At most 40 characters of `s`, for error messages.
std::string excerpt(const std::string& s) { return s.size() <= 40 ? s : s.substr(0, 37) + "..."; }

// "nan", "inf", "-inf" and their spellings (any case).
bool special_number(const std::string& s, double* out) {
  std::string t = plot_detail::ascii_lower(s);
  if (t == "nan" || t == "+nan" || t == "-nan") *out = kNaN;
  else if (t == "inf" || t == "+inf" || t == "infinity" || t == "+infinity") *out = kInf;
  else if (t == "-inf" || t == "-infinity") *out = -kInf;
  else return false;
  return true;
}

// The whole of `s` as a number (locale-independent); false when it is not one.
bool parse_number(const std::string& s, double* out) {
  if (special_number(s, out)) return true;
  const char* b = s.data();
  const char* e = b + s.size();
  if (e - b >= 2 && *b == '+' && b[1] != '-') ++b;  // from_chars does not take a leading '+'
  if (b == e) return false;
  auto [end, ec] = std::from_chars(b, e, *out);
  return ec == std::errc() && end == e;
}

LogRecord parse_json_line(const std::string& text, const std::string& path, size_t line_no) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    size_t bracket = what.find("] ");  // drop "[json.exception.parse_error.101] "
    LOG_CHECK(false, "invalid JSON: ", bracket == std::string::npos ? what : what.substr(bracket + 2));
  }
  LOG_CHECK(j.is_object(), "expected a JSON object, got ", j.type_name());
  auto event = j.find("event");
  LOG_CHECK(event != j.end(), "the record has no \"event\"");
  LOG_CHECK(event->is_string() && !event->get_ref<const std::string&>().empty(),
            "\"event\" must be a non-empty string");
  LogRecord record;
  record.event = event->get<std::string>();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    double x = 0;
    if (key == "event" || v.is_null()) continue;  // null = absent
    if (v.is_number()) x = v.get<double>();
    else if (v.is_boolean()) x = v.get<bool>() ? 1 : 0;
    else if (!(v.is_string() && special_number(v.get_ref<const std::string&>(), &x))) {
      // Unknown keys with descriptive values are ignored; the keys the plots read must be numeric.
      LOG_CHECK(!is_number_log_column(key), "\"", key, "\" must be a number, null, \"nan\", \"inf\" or \"-inf\", got ",
                v.is_string() ? "\"" + excerpt(v.get<std::string>()) + "\"" : std::string("an ") + v.type_name());
      continue;
    }
    record.values[key] = x;
  }
  return record;
}

// One CSV line into fields (double quotes as in RFC 4180, within the line); false on an open quote.
bool split_csv(const std::string& line, std::vector<std::string>* fields) {
  fields->clear();
  std::string field;
  bool in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in_quotes) {
      if (c != '"') field += c;
      else if (i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else in_quotes = false;
    } else if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      fields->push_back(trim(field));
      field.clear();
    } else {
      field += c;
    }
  }
  fields->push_back(trim(field));
  return !in_quotes;
}

struct CsvHeader {
  std::vector<std::string> columns;
  size_t event = 0;
};

CsvHeader parse_csv_header(const std::string& text, const std::string& path, size_t line_no) {
  CsvHeader h;
  LOG_CHECK(split_csv(text, &h.columns), "unbalanced quote in the CSV header");
  std::set<std::string> seen;
  for (size_t c = 0; c < h.columns.size(); ++c) {
    const std::string& name = h.columns[c];
    LOG_CHECK(!name.empty(), "CSV header column ", c + 1, " has no name");
    LOG_CHECK(seen.insert(name).second, "CSV header names column \"", name, "\" twice");
    if (name == "event") h.event = c;
  }
  LOG_CHECK(seen.count("event") && seen.count(kStep), "the CSV header must have the columns \"event\" and \"step\" "
            "(a training log starts with a header such as event,step,loss,...)");
  return h;
}

LogRecord parse_csv_line(const std::string& text, const CsvHeader& h, const std::string& path, size_t line_no) {
  std::vector<std::string> fields;
  LOG_CHECK(split_csv(text, &fields), "unbalanced quote");
  LOG_CHECK(fields.size() == h.columns.size(), "expected ", h.columns.size(), " fields as in the header, got ",
            fields.size());
  LogRecord record;
  record.event = fields[h.event];
  LOG_CHECK(!record.event.empty(), "the \"event\" field is empty");
  for (size_t c = 0; c < fields.size(); ++c) {
    if (c == h.event || fields[c].empty()) continue;  // empty = absent
    double x = 0;
    LOG_CHECK(parse_number(fields[c], &x), "column \"", h.columns[c], "\": \"", excerpt(fields[c]),
              "\" is not a number");
    record.values[h.columns[c]] = x;
  }
  return record;
}

}  // namespace

std::vector<LogRecord> read_training_log(const std::string& path) {
  std::string text = read_file(path, kWho, uint64_t(1) << 30);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a UTF-8 byte order mark
  std::vector<LogRecord> records;
  // A file named .jsonl (or .json) is read as JSONL whatever its first line: a damaged one is then
  // reported as invalid JSON, not as a CSV file with a bad header.
  const size_t dot = path.rfind('.'), slash = path.rfind('/');
  const std::string ext = dot != std::string::npos && (slash == std::string::npos || dot > slash)
                              ? plot_detail::ascii_lower(path.substr(dot)) : std::string();
  const bool named_jsonl = ext == ".jsonl" || ext == ".json";
  bool decided = false, jsonl = false, have_header = false;
  CsvHeader header;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    // The trainer may be killed in the middle of writing a record: a last line with no newline that
    // does not parse is that partial record, and is skipped. Only there is a malformed line forgiven.
    bool unterminated_last = nl == std::string::npos;
    std::string line = text.substr(pos, unterminated_last ? std::string::npos : nl - pos);
    pos = unterminated_last ? text.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    if (!decided) {
      decided = true;
      jsonl = trim(line)[0] == '{' || named_jsonl;
    }
    try {
      if (!jsonl && !have_header) {
        header = parse_csv_header(line, path, line_no);
        have_header = true;
        continue;
      }
      LogRecord r = jsonl ? parse_json_line(line, path, line_no) : parse_csv_line(line, header, path, line_no);
      auto step = r.values.find(kStep);
      LOG_CHECK(step == r.values.end() || std::isfinite(step->second), "\"step\" is not finite");
      records.push_back(std::move(r));
    } catch (const Error&) {
      if (unterminated_last) break;
      throw;
    }
  }
  RG_CHECK(!records.empty(), kWho, path, ": the training log has no records",
           text.empty() ? " (the file is empty)" : "");
  bool has_train_loss = std::any_of(records.begin(), records.end(), [](const LogRecord& r) {
    return r.event == log_event_name(LogEvent::Train) && r.values.count(log_column_name(LogColumn::Loss));
  });
  RG_CHECK(has_train_loss, kWho, path, ": none of the ", records.size(),
           " records is a \"train\" record with a loss; is this a training log?");
  return records;
}

std::string plot_detail::ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ---- the standard plot of a training log ------------------------------------------------------------
void plot_training_log(const std::string& log_path, const std::string& out_path) {
  plot_detail::plot_extension(out_path);  // a wrong extension fails before the log is read
  std::vector<LogRecord> records = read_training_log(log_path);
  PlotSeries train{"train", {}, {}}, eval{"eval", {}, {}}, acc{"accuracy", {}, {}},
      seq{"sequence accuracy", {}, {}}, lr{"lr", {}, {}};
  // A step that goes back is a resumed run: its points replace the old ones from that step on.
  auto add = [](PlotSeries& s, const LogRecord& r, LogColumn column) {
    auto it = r.values.find(log_column_name(column));
    if (it == r.values.end()) return;
    double step = r.values.at(kStep);
    while (!s.x.empty() && s.x.back() >= step) s.x.pop_back(), s.y.pop_back();
    s.x.push_back(step);
    s.y.push_back(it->second);
  };
  for (const LogRecord& r : records) {
    if (!r.values.count(kStep)) continue;
    if (r.event == log_event_name(LogEvent::Train)) add(train, r, LogColumn::Loss), add(lr, r, LogColumn::Lr);
    if (r.event == log_event_name(LogEvent::Eval))
      add(eval, r, LogColumn::Loss), add(acc, r, LogColumn::Accuracy), add(seq, r, LogColumn::SequenceAccuracy);
  }
  PlotPanel loss{"loss", "step", "loss", false, {train}};
  if (!eval.x.empty()) loss.series.push_back(eval);
  double lo = kInf, hi = -kInf;
  bool positive = true;
  for (const PlotSeries& s : loss.series)
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v), positive = positive && v > 0;
  loss.log_y = positive && lo > 0 && hi > 10 * lo;
  std::vector<PlotPanel> panels{loss};
  if (!acc.x.empty() || !seq.x.empty()) {
    PlotPanel a{"held-out accuracy", "step", "accuracy", false, {}};
    if (!acc.x.empty()) a.series.push_back(acc);
    if (!seq.x.empty()) a.series.push_back(seq);
    panels.push_back(a);
  }
  if (!lr.x.empty()) panels.push_back(PlotPanel{"learning rate", "step", "learning rate", false, {lr}});
  write_plot(out_path, panels);
}

}  // namespace relgrad
