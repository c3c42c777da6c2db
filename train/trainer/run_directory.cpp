// The run directory: lock, log file, *.prev rotation and the resume-target checks (see run_directory.h).
#include "train/trainer/run_directory.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ostream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/trainer/checkpoint.h"

namespace relgrad {
namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Creates `dir` and the folders above it that are missing; returns those it created, outermost first.
std::vector<std::string> make_directories(const std::string& dir) {
  std::vector<std::string> created;
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && !file_exists(partial)) {
        const bool made = ::mkdir(partial.c_str(), 0755) == 0;
        RG_CHECK(made || errno == EEXIST, "train", "cannot create directory '", partial, "': ", std::strerror(errno));
        if (made) created.push_back(partial);
      }
    }
    if (i < dir.size()) partial += dir[i];
  }
  struct stat st {};
  RG_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "train", "train.out_dir '", dir, "' is not a directory");
  return created;
}

// Whether `dir` holds nothing but `.lock`.
bool only_lock_in(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool only = true;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != ".." && name != ".lock") only = false;
  }
  ::closedir(d);
  return only;
}

// The log is appended to, not replaced atomically: like AtomicFile, never write through a symlink or
// into a FIFO or device.
void refuse_unless_regular(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0)
    RG_CHECK(S_ISREG(st.st_mode), "train", path, ": exists and is ",
             S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file", ": refusing to write the log into it");
}

}  // namespace

RunDirectory::RunDirectory(std::string dir, LogFormat format, std::ostream* out)
    : dir_(std::move(dir)), log_(format), out_(out) {}

RunDirectory::~RunDirectory() { unlock(); }

void RunDirectory::lock() {
  if (lock_) return;  // held already (a second DirectoryLock in this process would be refused)
  created_ = make_directories(dir_);
  lock_ = std::make_unique<DirectoryLock>(dir_, "train", "train.out_dir");
  if (!lock_->warning().empty() && out_) *out_ << "warning: " << lock_->warning() << "\n";
}

void RunDirectory::unlock() {
  if (!lock_) return;
  // A run refused before it wrote anything (nothing to train into a new directory) leaves no folder
  // behind: the ones lock() created are removed while they hold only the lock file. The file is
  // unlinked while still locked, so a second run that opened it meanwhile is refused, and one that
  // opens it afterwards makes a new one (then the directory is not empty and stays).
  const bool remove = !created_.empty() && only_lock_in(dir_);
  if (remove) ::unlink((dir_ + "/.lock").c_str());
  lock_.reset();
  if (!remove) return;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    if (::rmdir(it->c_str()) != 0) break;  // not empty: something else was put there
  created_.clear();
}

void RunDirectory::set_resumed_from(const std::string& checkpoint_path) {
  resumed_ = true;
  resumed_from_ = checkpoint_path;
  struct stat st {};
  if (::stat(checkpoint_path.c_str(), &st) == 0)
    resumed_device_ = uint64_t(st.st_dev), resumed_inode_ = uint64_t(st.st_ino);
}

void RunDirectory::start_fresh() {
  // Nothing is renamed yet: a run that fails before its first checkpoint leaves the earlier run as it was.
  rotate_pending_ = file_exists(checkpoint_path()) || file_exists(log_path());
  const std::string path = rotate_pending_ ? pending_log_path() : log_path();
  refuse_unless_regular(path);
  if (file_exists(path))
    RG_CHECK(::unlink(path.c_str()) == 0, "train", path, ": cannot remove the leftover log of a run that ",
             "ended before its first checkpoint: ", std::strerror(errno));
  open_log_file(path);
}

void RunDirectory::start_resumed(int64_t step, int64_t total_steps, const ResumeCheck& check) {
  check_resume_target(step, total_steps, check);
  const std::string path = log_path();
  refuse_unless_regular(path);
  if (file_exists(path)) {
    // Keep the records up to the resumed step: the ones after it describe steps that are redone.
    const std::string before = read_file(path, "train");
    std::string kept = log_.records_up_to(before, step);
    // Rewritten only once this run writes its first record or checkpoint (open_pending_log): a resume
    // that fails before (a NaN at its first step) leaves the log as it was.
    if (kept != before) rewrite_ = std::move(kept);
  }
  open_pending_ = true;
}

// Resuming writes out_dir/checkpoint.safetensors and rewrites the log: refused when that checkpoint is
// not the file resumed from and is another run's or further on (it would be lost), and when a log is
// there without a checkpoint (it cannot be told whose it is, and its records would be spliced in).
void RunDirectory::check_resume_target(int64_t step, int64_t total_steps, const ResumeCheck& check) const {
  const std::string target = checkpoint_path();
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && uint64_t(st.st_dev) == resumed_device_ &&
      uint64_t(st.st_ino) == resumed_inode_)
    return;  // resuming in place: the usual case
  const std::string refused = "cannot resume from " + resumed_from_ + " into train.out_dir " + dir_ + ": ";
  // A finished checkpoint has nothing to train: another directory would get no training record (and
  // no plot). In place it is evaluated and reported, writing nothing (Trainer::train_loop).
  RG_CHECK(step < total_steps, "train", refused, "it is at step ", step, " and train.steps = ", total_steps,
           ", so there is nothing to train; give --train.steps=N with N > ", step,
           " to continue there, or evaluate it with relgrad eval ", resumed_from_);
  const std::string way_out = "; continue in another directory (--train.out_dir=DIR), or move that file away first";
  if (file_exists(target)) {
    std::string why;
    Checkpoint there;
    try {
      there = load_checkpoint(target);
    } catch (const Error& e) {
      why = "cannot be read (" + std::string(e.what()) + "), so it cannot be told whether it is this run's";
    }
    if (why.empty() && check) {
      try {
        check(there.meta.config_json, target);
      } catch (const Error& e) {
        // "[train] cannot resume from <target>: train.seed is 2 there and 1 here (keys ...)" → what differs
        std::string differs = e.what();
        const size_t at = differs.find(target + ": ");
        if (at != std::string::npos) differs = differs.substr(at + target.size() + 2);
        differs = differs.substr(0, differs.find(" (keys"));
        why = "is another run's (" + differs + ")";
      }
    }
    if (why.empty() && there.meta.step > step)
      why = "is at step " + std::to_string(there.meta.step) + ", later than the resumed step " + std::to_string(step);
    RG_CHECK(why.empty(), "train", refused, target, " ", why, ", and resuming would overwrite it", way_out);
  } else if (file_exists(log_path())) {
    RG_CHECK(false, "train", refused, log_path(), " is there without a checkpoint, so it may be another run's log, ",
             "and resuming would rewrite it", way_out);
  }
}

void RunDirectory::open_pending_log() {
  if (!open_pending_) return;
  open_pending_ = false;
  if (rewrite_) write_file_atomic(log_path(), *rewrite_, "train");
  rewrite_.reset();
  open_log_file(log_path());
}

void RunDirectory::open_log_file(const std::string& path) {
  const bool new_file = !file_exists(path);
  file_ = std::make_unique<std::ofstream>(path, std::ios::app);
  RG_CHECK(file_->good(), "train", "cannot open the log ", path, " for writing");
  if (new_file) *file_ << log_.header();
}

void RunDirectory::append(const LogEntry& entry) {
  open_pending_log();
  if (!file_) return;
  *file_ << log_.line(entry);
  file_->flush();
}

void RunDirectory::save(const std::function<void(const std::string& path)>& write) {
  if (!rotate_pending_) {
    write(checkpoint_path());
    open_pending_log();  // a resume's log is rewritten now at the latest, to match the checkpoint
    return;
  }
  // The first checkpoint of a fresh run in a directory that held an earlier run: only now, with
  // something of its own to keep, does this run move the earlier run's files to *.prev. The checkpoint
  // is written first under another name, so a failed save (a full disk) still renames nothing.
  const std::string next = dir_ + "/checkpoint.new.safetensors";
  write(next);
  auto move = [&](const std::string& from, const std::string& to) {
    if (file_exists(from))
      RG_CHECK(::rename(from.c_str(), to.c_str()) == 0, "train", "cannot rename ", from, " to ", to, ": ",
               std::strerror(errno));
  };
  const std::string prev = dir_ + "/checkpoint.prev.safetensors";
  const std::string format = log_format_name(log_.format());
  const bool had_checkpoint = file_exists(checkpoint_path());
  move(checkpoint_path(), prev);
  move(log_path(), dir_ + "/log.prev." + format);
  move(pending_log_path(), log_path());  // the open log follows its file: appending goes on
  move(next, checkpoint_path());
  fsync_directory(dir_, "train");
  rotate_pending_ = false;
  if (out_)
    *out_ << "note: " << dir_ << " held an earlier run; its "
          << (had_checkpoint ? "checkpoint is now " + prev + " and its " : "") << "log is now log.prev." << format
          << "\n";
}

void RunDirectory::close_log() { file_.reset(); }

void RunDirectory::abandon() {
  file_.reset();
  // The failed run's own log, when it had not reached its first checkpoint, is not kept.
  if (rotate_pending_) ::unlink(pending_log_path().c_str());
  rotate_pending_ = false;
  open_pending_ = false;  // a resume's log is left as it was
  rewrite_.reset();
}

// A failed step writes nothing, so the last checkpoint is intact.
std::string RunDirectory::failure_note() const {
  if (rotate_pending_)
    return "No checkpoint of this run was written before this step; the earlier run's files in " + dir_ +
           " are left as they were";
  return file_exists(checkpoint_path()) ? "The last checkpoint, " + checkpoint_path() + ", is left as it was"
                                        : "No checkpoint was written before this step";
}

}  // namespace relgrad
