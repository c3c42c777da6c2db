// The training log's schema, written once: the columns each event kind carries, in order. The Trainer
// writes its records through it (train/trainer/run_directory.h owns the file) and the log reader of
// `relgrad plot` reads the same names (train/plot/plot.h).
//
//   event  columns (in this order; a record writes the ones it has)
//   train  step loss lr grad_norm tokens tokens_per_s elapsed_s       every log_every steps
//   eval   step loss accuracy sequence_accuracy elapsed_s             every evaluation
//   skip   step loss lr grad_norm tensor                              a step skipped (train.nonfinite)
//
// Formats (train.log_format):
//   JSONL  one object per record: {"event":"train","step":10,"loss":2.31,...}; numbers with 9
//          significant digits, a non-finite one as the string "nan", "inf" or "-inf"; a text column
//          as a string (quotes and backslashes escaped, control characters as spaces).
//   CSV    the header event,step,loss,accuracy,sequence_accuracy,lr,grad_norm,tokens,tokens_per_s,
//          elapsed_s (every number column, in table order), then one line per record with empty
//          fields for the columns it lacks; text columns are JSONL only.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/base/name_table.h"

namespace relgrad {

enum class LogFormat { Jsonl, Csv };
// "jsonl" or "csv" (train.log_format) → the format; throws relgrad::Error naming the name otherwise.
LogFormat log_format(const std::string& name);
inline constexpr NameTable<LogFormat, 2> kLogFormatNames{{{LogFormat::Jsonl, "jsonl"}, {LogFormat::Csv, "csv"}}};
const char* log_format_name(LogFormat format);  // also the log file's extension: log.jsonl, log.csv

enum class LogEvent { Train, Eval, Skip };
const char* log_event_name(LogEvent event);  // "train", "eval", "skip"

enum class LogColumn { Step, Loss, Accuracy, SequenceAccuracy, Lr, GradNorm, Tokens, TokensPerS, ElapsedS, Tensor };

struct LogColumnInfo {
  LogColumn column;
  const char* name;
  bool text;                // a string: JSONL only
  bool train, eval, skip;   // the events that carry it
  bool carried_by(LogEvent event) const;
};
// The table, in column order.
const std::vector<LogColumnInfo>& log_columns();
const LogColumnInfo& log_column(LogColumn column);
const char* log_column_name(LogColumn column);
// Whether `name` is a number column of the table (a reader requires those to be numbers).
bool is_number_log_column(const std::string& name);

// One record as the Trainer writes it: its event and the values of some of the event's columns.
class LogEntry {
 public:
  explicit LogEntry(LogEvent event) : event_(event) {}
  LogEntry(LogEvent event, std::initializer_list<std::pair<LogColumn, double>> values);
  // Throws relgrad::Error when the event does not carry the column or its kind differs.
  LogEntry& set(LogColumn column, double value);
  LogEntry& set(LogColumn column, const std::string& text);
  LogEvent event() const { return event_; }
  const std::map<LogColumn, double>& values() const { return values_; }
  const std::map<LogColumn, std::string>& texts() const { return texts_; }

 private:
  LogEvent event_;
  std::map<LogColumn, double> values_;
  std::map<LogColumn, std::string> texts_;
};

// A log in one format: its header, its record lines, and the records of an existing log up to a step.
class TrainingLog {
 public:
  explicit TrainingLog(LogFormat format) : format_(format) {}
  LogFormat format() const { return format_; }
  // What a new log file starts with: CSV's header line (with its newline); nothing for JSONL.
  std::string header() const;
  // One record, with its newline.
  std::string line(const LogEntry& entry) const;
  // The text of an existing log cut back to the records of steps ≤ `step` (a resume redoes the steps
  // after it): CSV's header kept, empty lines and a torn record (a run killed mid-write: a CSV line
  // without every field, a JSONL line not ending in '}') dropped.
  std::string records_up_to(const std::string& text, int64_t step) const;

 private:
  LogFormat format_;
};

}  // namespace relgrad
