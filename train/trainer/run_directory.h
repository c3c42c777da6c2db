// The run directory of a training run (train.out_dir; docs/cli.md "Run directories"): what the Trainer
// (train/trainer/trainer.h) writes there, and the rules that keep earlier runs safe. Rank 0's alone.
//
//   RunDirectory dir("runs/a", LogFormat::Jsonl, &std::cout);
//   dir.lock();                        // one run at a time (out_dir/.lock, core/file_io.h DirectoryLock)
//   dir.start_fresh();                 // or, after a resume, dir.start_resumed(step, steps, check)
//   dir.append(LogEntry(LogEvent::Train).set(LogColumn::Step, 10));   // one log record
//   dir.save([&](const std::string& path) { trainer.save(path); });   // a checkpoint
//   dir.close_log();                   // or dir.abandon() when the run failed
//
// Files: checkpoint.safetensors and log.jsonl or log.csv (train/trainer/training_log.h). The rules:
// - Lock: held from lock() to unlock() (or destruction); a second run into the directory is refused
//   with an error naming the holder's pid. A directory lock() created and the run left empty (refused
//   before writing anything) is removed again by unlock(), lock file and all.
// - A fresh run in a directory that holds an earlier run keeps that run's files as
//   checkpoint.prev.safetensors / log.prev.*, but only at its own first checkpoint: until then its log
//   is log.new.* and the earlier files are untouched, so a run that fails before saving anything (a
//   NaN, out of memory) leaves the directory as it found it (abandon() removes its log.new.*).
// - A resume keeps the log's records up to the resumed step, but rewrites the log only at its first
//   record or checkpoint: a resume that fails before leaves the log as it was. It refuses a directory
//   whose checkpoint.safetensors is not the file it resumed from and is another run's or at a later
//   step (it would be overwritten), and one that holds a log but no checkpoint.
// - The log is appended to, never written through a symbolic link or into a FIFO or device.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/trainer/training_log.h"

namespace relgrad {

class DirectoryLock;

class RunDirectory {
 public:
  // `out` receives the notes (an earlier run moved to *.prev, a file system without locks); null: none.
  RunDirectory(std::string dir, LogFormat format, std::ostream* out = nullptr);
  ~RunDirectory();

  const std::string& dir() const { return dir_; }
  std::string checkpoint_path() const { return dir_ + "/checkpoint.safetensors"; }
  std::string log_path() const { return dir_ + "/log." + log_format_name(log_.format()); }
  const TrainingLog& log() const { return log_; }

  // Creates the directory and takes its lock (nothing when this RunDirectory holds it); throws
  // relgrad::Error naming the directory and the holder's pid when another process or RunDirectory
  // holds it. unlock() releases it (nothing when not held).
  void lock();
  void unlock();

  // The checkpoint a resume read (before start_resumed): its file's identity tells a resume in place.
  void set_resumed_from(const std::string& checkpoint_path);
  bool resumed() const { return resumed_; }

  // A fresh run: notes whether an earlier run is there and opens the log (log.new.* if so).
  void start_fresh();
  // Called by start_resumed with the saved config of the checkpoint found in the directory and its
  // path; throws when it is another run's (TrainerOptions::check_resume). Empty: no check.
  using ResumeCheck = std::function<void(const std::string& saved_json, const std::string& path)>;
  // A resumed run at `step` of `total_steps`: checks the directory (see above), then prepares the log.
  void start_resumed(int64_t step, int64_t total_steps, const ResumeCheck& check);

  void append(const LogEntry& entry);  // nothing before start_* or after close_log
  // Writes a checkpoint by calling `write(path)`; the first of a fresh run in a used directory moves
  // the earlier run's files to *.prev once it is written.
  void save(const std::function<void(const std::string& path)>& write);
  void close_log();
  // The run failed: closes the log, removes a fresh run's log.new.*, leaves a resume's log as it was.
  void abandon();

  // The end of a failed step's error: which checkpoint is left as it was.
  std::string failure_note() const;

 private:
  std::string pending_log_path() const { return dir_ + "/log.new." + log_format_name(log_.format()); }
  void check_resume_target(int64_t step, int64_t total_steps, const ResumeCheck& check) const;
  void open_pending_log();
  void open_log_file(const std::string& path);

  std::string dir_;
  TrainingLog log_;
  std::ostream* out_;
  std::unique_ptr<DirectoryLock> lock_;
  std::vector<std::string> created_;  // the folders lock() created, removed by unlock() if left empty
  bool resumed_ = false;
  std::string resumed_from_;  // the checkpoint resumed from, and its file's identity
  uint64_t resumed_device_ = 0, resumed_inode_ = 0;
  std::unique_ptr<std::ofstream> file_;
  bool open_pending_ = false;              // a resume: the log is opened at the first record or save
  std::optional<std::string> rewrite_;     // ... and first rewritten to these records, when set
  bool rotate_pending_ = false;            // a fresh run whose first checkpoint will make the earlier *.prev
};

}  // namespace relgrad
