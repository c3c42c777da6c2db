// The training log's column table and its two formats (see training_log.h).
#include "train/trainer/training_log.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/base/error.h"

namespace relgrad {

namespace {

constexpr const char* kEventNames[] = {"train", "eval", "skip"};  // by LogEvent

}  // namespace

LogFormat log_format(const std::string& name) {
  const std::optional<LogFormat> format = kLogFormatNames.find(name);
  RG_CHECK(format.has_value(), "train", "train.log_format: expected one of ", kLogFormatNames.list(), ", got '", name, "'");
  return *format;
}

const char* log_format_name(LogFormat format) { return kLogFormatNames.name(format); }

const char* log_event_name(LogEvent event) { return kEventNames[static_cast<int>(event)]; }

bool LogColumnInfo::carried_by(LogEvent event) const {
  return event == LogEvent::Train ? train : event == LogEvent::Eval ? eval : skip;
}

const std::vector<LogColumnInfo>& log_columns() {
  // By LogColumn, in the order records and the CSV header write them.
  static const std::vector<LogColumnInfo> table = {
      //                           name                 text   train  eval   skip
      {LogColumn::Step,             "step",              false, true,  true,  true},
      {LogColumn::Loss,             "loss",              false, true,  true,  true},
      {LogColumn::Accuracy,         "accuracy",          false, false, true,  false},
      {LogColumn::SequenceAccuracy, "sequence_accuracy", false, false, true,  false},  // EvalResult::rows_are_examples
      {LogColumn::Lr,               "lr",                false, true,  false, true},
      {LogColumn::GradNorm,         "grad_norm",         false, true,  false, true},
      {LogColumn::Tokens,           "tokens",            false, true,  false, false},  // since step 0, across resumes
      {LogColumn::TokensPerS,       "tokens_per_s",      false, true,  false, false},
      {LogColumn::ElapsedS,         "elapsed_s",         false, true,  true,  false},  // this process
      {LogColumn::Tensor,           "tensor",            true,  false, false, true},   // the first non-finite one
  };
  return table;
}

const LogColumnInfo& log_column(LogColumn column) { return log_columns()[static_cast<size_t>(column)]; }

const char* log_column_name(LogColumn column) { return log_column(column).name; }

bool is_number_log_column(const std::string& name) {
  for (const LogColumnInfo& c : log_columns())
    if (!c.text && name == c.name) return true;
  return false;
}

LogEntry::LogEntry(LogEvent event, std::initializer_list<std::pair<LogColumn, double>> values) : event_(event) {
  for (const auto& [column, value] : values) set(column, value);
}

LogEntry& LogEntry::set(LogColumn column, double value) {
  const LogColumnInfo& c = log_column(column);
  RG_CHECK(c.carried_by(event_) && !c.text, "TrainingLog", "a \"", log_event_name(event_),
           "\" record has no number column \"", c.name, "\"");
  values_[column] = value;
  return *this;
}

LogEntry& LogEntry::set(LogColumn column, const std::string& text) {
  const LogColumnInfo& c = log_column(column);
  RG_CHECK(c.carried_by(event_) && c.text, "TrainingLog", "a \"", log_event_name(event_),
           "\" record has no text column \"", c.name, "\"");
  texts_[column] = text;
  return *this;
}

std::string TrainingLog::header() const {
  if (format_ != LogFormat::Csv) return "";
  std::string h = "event";
  for (const LogColumnInfo& c : log_columns())
    if (!c.text) h += std::string(",") + c.name;
  return h + "\n";
}

std::string TrainingLog::line(const LogEntry& entry) const {
  std::ostringstream line;
  line.precision(9);
  if (format_ == LogFormat::Csv) {
    line << log_event_name(entry.event());
    for (const LogColumnInfo& c : log_columns()) {
      if (c.text) continue;
      line << ',';
      auto v = entry.values().find(c.column);
      if (v != entry.values().end()) line << v->second;
    }
    line << "\n";
    return line.str();
  }
  line << "{\"event\":\"" << log_event_name(entry.event()) << "\"";
  for (const LogColumnInfo& c : log_columns()) {
    if (auto v = entry.values().find(c.column); v != entry.values().end()) {
      line << ",\"" << c.name << "\":";
      if (std::isfinite(v->second)) line << v->second;
      else line << "\"" << (std::isnan(v->second) ? "nan" : v->second > 0 ? "inf" : "-inf") << "\"";
    } else if (auto t = entry.texts().find(c.column); t != entry.texts().end()) {
      // e.g. "encoder.embed.weight grad"; control characters become spaces
      line << ",\"" << c.name << "\":\"";
      for (char ch : t->second)
        line << (ch == '"' || ch == '\\' ? "\\" : "") << (static_cast<unsigned char>(ch) < 32 ? ' ' : ch);
      line << "\"";
    }
  }
  line << "}\n";
  return line.str();
}

std::string TrainingLog::records_up_to(const std::string& text, int64_t step) const {
  const bool csv = format_ == LogFormat::Csv;
  const std::string csv_header = header();
  const auto commas = std::count(csv_header.begin(), csv_header.end(), ',');  // every field there
  std::istringstream in(text);
  std::string line, kept;
  bool header_line = csv;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (header_line) {
      kept += line + "\n";
      header_line = false;
      continue;
    }
    // A torn line (the run was killed mid-write) is dropped: appending after it would bury it mid-file.
    const bool complete = csv ? std::count(line.begin(), line.end(), ',') == commas : line.back() == '}';
    if (!complete) continue;
    int64_t at_step = -1;
    if (csv) {
      size_t comma = line.find(',');
      if (comma != std::string::npos) at_step = std::atoll(line.c_str() + comma + 1);
    } else {
      size_t at = line.find("\"step\":");
      if (at != std::string::npos) at_step = std::atoll(line.c_str() + at + 7);
    }
    if (at_step >= 0 && at_step <= step) kept += line + "\n";
  }
  return kept;
}

}  // namespace relgrad
