// The Trainer's rooms of its own: the training log's schema (train/trainer/training_log.h: one column
// table for the writer, the resume's cut and the plot's reader) and the run directory
// (train/trainer/run_directory.h: lock, *.prev rotation, resume-target checks), tested without a
// Trainer; the optimizer and decay names (train/optim/optim.h, schedule.h). Runs end to end are in
// tests/test_trainer.cpp and tests/test_run_dir.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "file_testing.h"
#include "layers/linear.h"
#include "testing.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"
#include "train/plot/plot.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/run_directory.h"
#include "train/trainer/training_log.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

using C = LogColumn;

// One record of each kind, with the values a run writes (a skip's loss is not finite).
std::vector<LogEntry> sample_entries() {
  return {LogEntry(LogEvent::Train, {{C::Step, 2}, {C::Loss, 2.5}, {C::Lr, 3e-4}, {C::GradNorm, 1.25},
                                     {C::Tokens, 82}, {C::TokensPerS, 1234.5}, {C::ElapsedS, 0.125}}),
          LogEntry(LogEvent::Eval, {{C::Step, 3}, {C::Loss, 3.17495969}, {C::Accuracy, 0.0487804878},
                                    {C::SequenceAccuracy, 0}, {C::ElapsedS, 0.25}}),
          LogEntry(LogEvent::Skip, {{C::Step, 4}, {C::Loss, NAN}, {C::Lr, 750000}, {C::GradNorm, INFINITY}})
              .set(C::Tensor, "encoder.\"embed\"\tweight grad"),
          LogEntry(LogEvent::Eval, {{C::Step, 5}, {C::Loss, 3.0}, {C::Accuracy, 0.5}, {C::ElapsedS, 1}})};
}

std::string write_log(const TempDir& dir, LogFormat format) {
  const TrainingLog log(format);
  std::string text = log.header();
  for (const LogEntry& e : sample_entries()) text += log.line(e);
  const std::string path = dir.file(std::string("log.") + log_format_name(format));
  write_bytes(path, text);
  return path;
}

// A real checkpoint at `step` (a Linear layer's weights), for the resume-target checks.
void write_checkpoint(const std::string& path, int64_t step) {
  Generator g(1);
  Linear layer(2, 3, true, &g);
  CheckpointMeta meta;
  meta.step = step;
  meta.config_json = "{}";
  save_checkpoint(path, layer, nullptr, meta);
}

void write_file(const std::string& path) { write_bytes(path, "[1]"); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

// ---- TrainingLog -------------------------------------------------------------------------------------

TEST_CASE("training log: one table gives the columns of each event, the CSV header and the names") {
  for (const LogColumnInfo& c : log_columns()) CHECK(log_column(c.column).name == c.name);  // indexed by LogColumn
  CHECK(TrainingLog(LogFormat::Csv).header() ==
        "event,step,loss,accuracy,sequence_accuracy,lr,grad_norm,tokens,tokens_per_s,elapsed_s\n");
  CHECK(TrainingLog(LogFormat::Jsonl).header().empty());
  CHECK(std::string(log_event_name(LogEvent::Skip)) == "skip");
  CHECK(is_number_log_column("tokens_per_s"));
  CHECK_FALSE(is_number_log_column("tensor"));  // a text column
  CHECK_FALSE(is_number_log_column("event"));
  CHECK(log_format("csv") == LogFormat::Csv);
  CHECK(std::string(log_format_name(log_format("jsonl"))) == "jsonl");
  check_throws_with([] { log_format("xml"); }, "[train] train.log_format: expected one of jsonl, csv, got 'xml'");
  // A record takes only its event's columns, numbers as numbers and text as text.
  check_throws_with([] { LogEntry(LogEvent::Eval).set(C::Lr, 0.1); },
                    "[TrainingLog] a \"eval\" record has no number column \"lr\"");
  check_throws_with([] { LogEntry(LogEvent::Skip).set(C::Tensor, 1.0); }, "has no number column \"tensor\"");
  check_throws_with([] { LogEntry(LogEvent::Train).set(C::Tensor, "x"); }, "has no text column \"tensor\"");
}

TEST_CASE("training log: JSONL and CSV lines, byte for byte") {
  const std::vector<LogEntry> entries = sample_entries();
  const TrainingLog jsonl(LogFormat::Jsonl), csv(LogFormat::Csv);
  CHECK(jsonl.line(entries[0]) ==
        "{\"event\":\"train\",\"step\":2,\"loss\":2.5,\"lr\":0.0003,\"grad_norm\":1.25,\"tokens\":82,"
        "\"tokens_per_s\":1234.5,\"elapsed_s\":0.125}\n");
  CHECK(jsonl.line(entries[1]) ==
        "{\"event\":\"eval\",\"step\":3,\"loss\":3.17495969,\"accuracy\":0.0487804878,\"sequence_accuracy\":0,"
        "\"elapsed_s\":0.25}\n");
  // Non-finite numbers as strings; the text escaped, its control characters as spaces.
  CHECK(jsonl.line(entries[2]) == "{\"event\":\"skip\",\"step\":4,\"loss\":\"nan\",\"lr\":750000,"
                                  "\"grad_norm\":\"inf\",\"tensor\":\"encoder.\\\"embed\\\" weight grad\"}\n");
  CHECK(csv.line(entries[0]) == "train,2,2.5,,,0.0003,1.25,82,1234.5,0.125\n");
  CHECK(csv.line(entries[1]) == "eval,3,3.17495969,0.0487804878,0,,,,,0.25\n");
  CHECK(csv.line(entries[2]) == "skip,4,nan,,,750000,inf,,,\n");  // no column for the text
}

TEST_CASE("training log: what the writer writes, the plot's reader reads back (jsonl and csv)") {
  for (LogFormat format : {LogFormat::Jsonl, LogFormat::Csv}) {
    const std::string name = log_format_name(format);
    CAPTURE(name);
    TempDir dir;
    const std::vector<LogRecord> read = read_training_log(write_log(dir, format));
    const std::vector<LogEntry> written = sample_entries();
    REQUIRE(read.size() == written.size());
    for (size_t k = 0; k < read.size(); ++k) {
      CHECK(read[k].event == log_event_name(written[k].event()));
      CHECK(read[k].values.size() == written[k].values().size());  // the text column is not a value
      for (const auto& [column, value] : written[k].values()) {
        auto it = read[k].values.find(log_column_name(column));
        REQUIRE(it != read[k].values.end());
        if (std::isnan(value)) CHECK(std::isnan(it->second));
        else if (std::isinf(value)) CHECK(it->second == value);
        else CHECK(it->second == doctest::Approx(value).epsilon(1e-9));
      }
    }
    CHECK(read[2].values.at("grad_norm") == INFINITY);
  }
}

TEST_CASE("training log: a column missing from an old log reads as absent, as before") {
  TempDir dir;
  // An eval record without sequence_accuracy (a language model's); a CSV header without the columns
  // sequence_accuracy and tokens (the first version's).
  const std::string jsonl = dir.file("old.jsonl"), csv = dir.file("old.csv");
  write_bytes(jsonl, "{\"event\":\"train\",\"step\":2,\"loss\":2.5,\"lr\":0.001}\n"
                     "{\"event\":\"eval\",\"step\":2,\"loss\":2.75,\"accuracy\":0.5,\"elapsed_s\":1}\n");
  write_bytes(csv, "event,step,loss,accuracy,lr,grad_norm,tokens_per_s,elapsed_s\ntrain,2,2.5,,0.001,1,10,1\n"
                   "eval,2,2.75,0.5,,,,1\n");
  for (const std::string& path : {jsonl, csv}) {
    CAPTURE(path);
    const std::vector<LogRecord> read = read_training_log(path);
    REQUIRE(read.size() == 2);
    CHECK(read[1].values.count("sequence_accuracy") == 0);
    CHECK(read[0].values.count("tokens") == 0);
    CHECK(read[1].values.at("accuracy") == 0.5);
  }
  // A resume keeps such records up to its step.
  CHECK(TrainingLog(LogFormat::Jsonl).records_up_to(read_bytes(jsonl), 2) == read_bytes(jsonl));
}

TEST_CASE("training log: a resume's cut keeps the header and the records up to its step, drops torn lines") {
  TempDir dir;
  const TrainingLog jsonl(LogFormat::Jsonl), csv(LogFormat::Csv);
  const std::string j = read_bytes(write_log(dir, LogFormat::Jsonl));
  const std::string c = read_bytes(write_log(dir, LogFormat::Csv));
  const std::vector<std::string> jl = lines_of(j), cl = lines_of(c);
  CHECK(jsonl.records_up_to(j, 3) == jl[0] + "\n" + jl[1] + "\n");
  CHECK(csv.records_up_to(c, 3) == cl[0] + "\n" + cl[1] + "\n" + cl[2] + "\n");
  CHECK(csv.records_up_to(c, 0) == cl[0] + "\n");  // the header alone
  CHECK(jsonl.records_up_to(j, 100) == j);
  // A record the killed run was writing (a JSONL line without its '}', a CSV line short of fields),
  // and empty lines, are dropped.
  CHECK(jsonl.records_up_to(j + "\n{\"event\":\"train\",\"step\":6,\"lo", 100) == j);
  CHECK(csv.records_up_to(c + "\ntrain,6,2.5,", 100) == c);
}

// ---- RunDirectory ------------------------------------------------------------------------------------

TEST_CASE("run directory: the lock is refused while held, names the holder, and is taken again after") {
  TempDir dir;
  const std::string d = dir.file("a/b");  // created
  RunDirectory first(d, LogFormat::Jsonl);
  first.lock();
  first.lock();  // held already: nothing to do
  CHECK(fs::is_directory(d));
  RunDirectory second(d, LogFormat::Jsonl);
  check_throws_with([&] { second.lock(); },
                    "train.out_dir '" + d + "' is in use by process " + std::to_string(::getpid()));
  first.unlock();
  second.lock();
  write_file(dir.file("file"));
  check_throws_with([&] { RunDirectory(dir.file("file"), LogFormat::Csv).lock(); }, "is not a directory");
}

TEST_CASE("run directory: a fresh run moves the earlier run to *.prev at its first checkpoint, not before") {
  for (LogFormat format : {LogFormat::Jsonl, LogFormat::Csv}) {
    const std::string ext = log_format_name(format);
    CAPTURE(ext);
    TempDir dir;
    const std::string d = dir.path.string();
    write_bytes(d + "/checkpoint.safetensors", "earlier checkpoint");
    write_bytes(d + "/log." + ext, "earlier log\n");
    std::ostringstream out;
    RunDirectory run(d, format, &out);
    run.lock();
    run.start_fresh();
    run.append(sample_entries()[0]);
    // Until its first checkpoint, the run logs beside the earlier files and touches nothing.
    CHECK(read_bytes(d + "/log." + ext) == "earlier log\n");
    CHECK(read_bytes(d + "/checkpoint.safetensors") == "earlier checkpoint");
    const TrainingLog log(format);
    CHECK(read_bytes(d + "/log.new." + ext) == log.header() + log.line(sample_entries()[0]));
    CHECK(run.failure_note() == "No checkpoint of this run was written before this step; the earlier run's files in " +
                                    d + " are left as they were");
    std::string written_to;
    run.save([&](const std::string& path) { written_to = path, write_bytes(path, "new checkpoint"); });
    CHECK(written_to == d + "/checkpoint.new.safetensors");  // renamed only once written
    CHECK(read_bytes(d + "/checkpoint.prev.safetensors") == "earlier checkpoint");
    CHECK(read_bytes(d + "/log.prev." + ext) == "earlier log\n");
    CHECK(read_bytes(d + "/checkpoint.safetensors") == "new checkpoint");
    CHECK_FALSE(fs::exists(d + "/log.new." + ext));
    CHECK(out.str() == "note: " + d + " held an earlier run; its checkpoint is now " + d +
                           "/checkpoint.prev.safetensors and its log is now log.prev." + ext + "\n");
    run.append(sample_entries()[1]);  // the open log followed its file
    run.close_log();
    CHECK(read_bytes(d + "/log." + ext) == log.header() + log.line(sample_entries()[0]) + log.line(sample_entries()[1]));
    CHECK(run.failure_note() == "The last checkpoint, " + d + "/checkpoint.safetensors, is left as it was");
    // A second checkpoint is written in place.
    run.save([&](const std::string& path) { written_to = path; });
    CHECK(written_to == d + "/checkpoint.safetensors");
  }
}

TEST_CASE("run directory: a fresh run that fails before its first checkpoint leaves the directory as it was") {
  TempDir dir;
  const std::string d = dir.path.string();
  write_bytes(d + "/log.jsonl", "earlier log\n");
  RunDirectory run(d, LogFormat::Jsonl);
  run.start_fresh();
  run.append(sample_entries()[0]);
  REQUIRE(fs::exists(d + "/log.new.jsonl"));
  run.abandon();
  CHECK_FALSE(fs::exists(d + "/log.new.jsonl"));
  CHECK(read_bytes(d + "/log.jsonl") == "earlier log\n");
  // In an empty directory the log is log.jsonl from the start, and no checkpoint is there yet.
  TempDir empty;
  RunDirectory fresh(empty.path.string(), LogFormat::Jsonl);
  fresh.start_fresh();
  fresh.append(sample_entries()[0]);
  CHECK(read_bytes(fresh.log_path()) == TrainingLog(LogFormat::Jsonl).line(sample_entries()[0]));
  CHECK(fresh.failure_note() == "No checkpoint was written before this step");
}

TEST_CASE("run directory: a resume in place cuts the log back at its first record, not before") {
  TempDir dir;
  const std::string d = dir.path.string();
  const std::string log_path = write_log(dir, LogFormat::Csv);
  const std::string before = read_bytes(log_path);
  write_file(d + "/checkpoint.safetensors");  // in place: the very file resumed from, never read
  for (bool fail : {true, false}) {
    RunDirectory run(d, LogFormat::Csv);
    run.set_resumed_from(d + "/checkpoint.safetensors");
    CHECK(run.resumed());
    run.start_resumed(/*step=*/3, /*total_steps=*/10, {});
    CHECK(read_bytes(log_path) == before);
    if (fail) {  // a NaN at the first step: the log is left as it was
      run.abandon();
      CHECK(read_bytes(log_path) == before);
      continue;
    }
    const LogEntry next(LogEvent::Train, {{C::Step, 4}, {C::Loss, 1}});
    run.append(next);
    const TrainingLog log(LogFormat::Csv);
    CHECK(read_bytes(log_path) == log.records_up_to(before, 3) + log.line(next));
  }
}

TEST_CASE("run directory: a resume refuses a target it would overwrite or cannot tell apart") {
  TempDir dir;
  const std::string from = dir.file("from.safetensors"), d = dir.file("run");
  write_checkpoint(from, 3);
  fs::create_directories(d);
  const std::string target = d + "/checkpoint.safetensors";
  const std::string refused = "[train] cannot resume from " + from + " into train.out_dir " + d + ": ";
  const std::string way_out = "; continue in another directory (--train.out_dir=DIR), or move that file away first";
  auto start = [&](int64_t step, int64_t total, const RunDirectory::ResumeCheck& check = {}) {
    RunDirectory run(d, LogFormat::Jsonl);
    run.set_resumed_from(from);
    run.start_resumed(step, total, check);
  };
  // Nothing to train: another directory would get no record.
  check_throws_with([&] { start(3, 3); }, refused + "it is at step 3 and train.steps = 3, so there is nothing to "
                                                    "train; give --train.steps=N with N > 3 to continue there, or "
                                                    "evaluate it with relgrad eval " + from);
  // A log without a checkpoint.
  write_bytes(d + "/log.jsonl", "{}\n");
  check_throws_with([&] { start(3, 10); }, refused + d + "/log.jsonl is there without a checkpoint, so it may be "
                                                         "another run's log, and resuming would rewrite it" + way_out);
  // A later checkpoint, another run's, an unreadable one.
  write_checkpoint(target, 7);
  check_throws_with([&] { start(3, 10); }, refused + target + " is at step 7, later than the resumed step 3, and "
                                                              "resuming would overwrite it" + way_out);
  auto other_run = [&](const std::string&, const std::string& path) {
    throw Error("[train] cannot resume from " + path + ": train.seed is 2 there and 1 here (keys that must agree)");
  };
  check_throws_with([&] { start(8, 10, other_run); }, target + " is another run's (train.seed is 2 there and 1 here)");
  write_bytes(target, "not a checkpoint");
  check_throws_with([&] { start(8, 10); }, target + " cannot be read (");
  // An earlier checkpoint of the same run is overwritten, as an uninterrupted run would have.
  write_checkpoint(target, 2);
  fs::remove(d + "/log.jsonl");
  start(3, 10);
}

TEST_CASE("run directory: the log is never written through a symbolic link") {
  TempDir dir;
  const std::string d = dir.path.string(), victim = dir.file("victim.txt");
  write_bytes(victim, "keep me");
  fs::create_symlink(victim, d + "/log.jsonl");
  write_file(d + "/checkpoint.safetensors");
  RunDirectory run(d, LogFormat::Jsonl);
  run.set_resumed_from(d + "/checkpoint.safetensors");
  check_throws_with([&] { run.start_resumed(1, 10, {}); },
                    d + "/log.jsonl: exists and is a symbolic link: refusing to write the log into it");
  CHECK(read_bytes(victim) == "keep me");
}

// ---- optimizer and decay names -----------------------------------------------------------------------

TEST_CASE("optim: optim.name and optim.decay map to their enums in one place each") {
  CHECK(optimizer_kind("sgd") == OptimizerKind::SGD);
  CHECK(optimizer_kind("adam") == OptimizerKind::Adam);
  CHECK(optimizer_kind("adamw") == OptimizerKind::AdamW);
  for (OptimizerKind k : {OptimizerKind::SGD, OptimizerKind::Adam, OptimizerKind::AdamW})
    CHECK(optimizer_kind(optimizer_kind_name(k)) == k);
  check_throws_with([] { optimizer_kind("lion"); }, "[optim] optim.name: expected one of sgd, adam, adamw, got 'lion'");
  using D = LrSchedule::Decay;
  for (D d : {D::Cosine, D::Linear, D::Constant}) CHECK(lr_decay(lr_decay_name(d)) == d);
  CHECK(lr_decay("linear") == D::Linear);
  check_throws_with([] { lr_decay("step"); },
                    "[LrSchedule] optim.decay: expected one of cosine, linear, constant, got 'step'");
}
