// The spine every published comparison runs on (docs/design.md, "The lab"). A study is a list of
// models, each trained through the path `relgrad train` takes and scored; the runner below trains them
// in order, shows progress with an ETA across the whole study, keeps each model's numbers as soon as
// it is scored (so a killed run loses at most the model in flight and a rerun trains only what is
// missing), and, under `mpirun -np N`, spreads the models over the ranks, one model per rank at a time,
// every rank ending with every model's numbers.
//
//   std::vector<StudyModel> models;
//   models.push_back({"copy-none-s1", "copy none seed 1", fingerprint, [&] { return train_and_score(); }});
//   const std::vector<StudyRecord> records = run_study_models("length-bench", models, out_dir, &std::cout);
//
// A study's own file says what its models are, what each record holds and how the records become its
// tables (train/instruments/study_registry.h registers it as a command).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace relgrad {

class Communicator;

// What one model measured: named numbers, kept exactly (written as hexadecimal floats), and the words
// its progress line shows.
struct StudyRecord {
  std::vector<std::pair<std::string, double>> values;  // in the order the model wrote them
  std::string line;                                     // "copy none seed 1: exact/token % 1-6:100/100 ..."

  void set(const std::string& name, double value);  // appends, or replaces a value of that name
  // The value of `name`; an Error naming the study record and the name when there is none.
  double get(const std::string& name) const;
  // name.0, name.1, ...: the values of a series set by set_series.
  void set_series(const std::string& name, const std::vector<double>& series);
  std::vector<double> series(const std::string& name) const;
};

// One model of a study.
struct StudyModel {
  std::string key;          // its run directory under out_dir/runs/ ("copy-none-s1"), unique in the study
  std::string label;        // what the progress names ("copy none seed 1")
  // Everything its numbers depend on (its config as `relgrad train` prints it, its data and its
  // evaluation): a record kept under another fingerprint is out of date and the model trains again.
  std::string fingerprint;
  std::function<StudyRecord()> run;  // trains and scores it; the record's line is printed
};

// The record file of a model: out_dir/runs/<key>/study-record.txt (docs/data-format.md, "Study records").
std::string study_record_path(const std::string& out_dir, const std::string& key);
// The file's text, and back: an Error naming the file's `who` for anything malformed (a wrong
// header, a value that is no number, trailing text) — a malformed record is never read as numbers.
std::string study_record_text(const std::string& study, const std::string& fingerprint, const StudyRecord& r);
// The record when `text` is one of `study` written under `fingerprint`; false when it is a record of
// another study or fingerprint (out of date).
bool parse_study_record(const std::string& text, const std::string& study, const std::string& fingerprint,
                        StudyRecord& record, const std::string& who);

// Trains and scores every model not already recorded in out_dir under its fingerprint, in order,
// writing each record atomically as soon as the model is scored; reads back the others. Progress to
// `progress` (null: silent): the study's size, then per model "[k/n] LINE (S s; ETA ...)" or
// "[k/n] LINE (kept from an earlier run)". `comm` (null: the job's, train/trainer/distributed.h): with
// N ranks, model i trains on rank i mod N and its record reaches every rank, so every rank returns the
// same records as one process would (each model trains alone on its rank, on one thread). Returns the
// records in the models' order.
std::vector<StudyRecord> run_study_models(const std::string& study, const std::vector<StudyModel>& models,
                                          const std::string& out_dir, std::ostream* progress,
                                          Communicator* comm = nullptr);

// The communicator a study's model trains with: one process alone, whatever the job's size (the
// models are spread over the ranks, not each model's batch).
Communicator& study_model_communicator();

// "2 min 5 s", "48 s": how long the rest of a study will take.
std::string study_duration_text(double seconds);

// A data file's part of a fingerprint: its size and content hash ("4432363 bytes, fnv1a64 …"), so that
// a model scored on other data trains again, wherever the file lies (`who` names the study in errors).
std::string file_fingerprint(const std::string& path, const std::string& who);

}  // namespace relgrad
