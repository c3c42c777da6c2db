// The models of the benches on synthetic tasks (length-bench, addition-bench, cope-bench): decoder-only
// models of one size, each trained on a task's training distribution through the path `relgrad train`
// takes (trainer_options → Trainer, one OpenMP thread, train/instruments/recipe.h) and scored on
// held-out sets, teacher-forced; run on the study spine (train/instruments/study.h), so a rerun keeps
// every model already scored.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace relgrad {

class Dataset;
class RunModel;
struct RunConfig;

// The model and budget every model of a bench's form shares (each bench's size starts with it).
struct BenchModelSize {
  int64_t d_model = 64, n_heads = 4, d_ff = 256, layers = 2;
  int64_t batch_size = 32;
  int64_t steps = 600, warmup = 60;
  double lr = 1e-3;  // AdamW, cosine to lr / 20, clip 1, weight decay 0.01, no dropout (recipe.h)
};
// recipe_config (train/instruments/recipe.h) at `size`: `layers` decoder layers, and as many encoder
// layers for an encoder–decoder.
RunConfig bench_recipe(const BenchModelSize& size, bool encoder_decoder, int64_t layers, uint64_t seed);
int64_t parameter_count(RunModel& model);  // every parameter of the model

// The synthetic-task benches' size, and the held-out sets it is scored on.
struct TaskModelSize : BenchModelSize {
  int64_t train_min = 1, train_max = 8;  // input lengths of training
  // Test input lengths [lo, hi], the first = training's; empty where each model brings its own held-out
  // sets (cope-bench: a task's splits).
  std::vector<std::pair<int64_t, int64_t>> buckets;
  int64_t eval_rows = 32, eval_batches = 2;  // held-out rows per bucket: rows × batches
  int64_t random_positions_max = 64;  // L of the randomised treatments (>= the longest test sequence)
  int64_t max_positions = 64;         // learned table rows (the longest test sequence, at least)
  int64_t cope_positions = 0;         // cope's embedded positions (0: the scheme's default, 64)
};
// Every field, for a model's fingerprint (StudyModel::fingerprint).
std::string describe(const TaskModelSize& size);

// One model's scores per held-out set (size.buckets' order), teacher-forced argmax over the answer
// and EOS. exact: the fraction of rows whose every answer token and EOS is right (the same as greedy
// decoding's exact match: greedy output equals the answer iff each teacher-forced step is right);
// token: the fraction of answer tokens and EOS right.
struct TaskModelRun {
  std::string task, treatment;
  uint64_t seed = 0;
  std::vector<double> exact, token;
  double train_loss = 0;  // the last logged training loss
  double seconds = 0;
};

// One model to train: `treatment` at `seed` on `train` (its vocabulary sizes the model; train_tokens,
// its longest sequence, sizes the relative schemes by their entries' fit, FitRule::WindowEdge), scored
// on each of `buckets` in order (one per size.buckets entry where the size has buckets); its checkpoint under
// out_dir/runs/TASK-TREATMENT-sSEED. `data` names what `train` and `buckets` hold beyond the task's
// name and the size (a split's parameters), for the fingerprint.
struct TaskModel {
  std::string task, treatment;
  uint64_t seed = 0;
  std::shared_ptr<Dataset> train;
  int64_t train_tokens = 0;
  std::vector<std::shared_ptr<const Dataset>> buckets;
  std::string data;
};

// The progress words of a scored model: "copy none seed 1: exact/token % 1-6:100/100 7-9:40/81".
using TaskModelLine = std::function<std::string(const TaskModelRun&)>;
std::string bucket_line(const TaskModelSize& size, const TaskModelRun& run);

// A model on the study spine (train/instruments/study.h): its run directory TASK-TREATMENT-sSEED, its
// fingerprint (the size, the task's data, the config `relgrad train` would run), and its training and
// scoring, recorded as exact.K and token.K per held-out set, train_loss and seconds; and back.
struct StudyModel;
struct StudyRecord;
StudyModel task_study_model(const std::string& study, const TaskModelSize& size, const TaskModel& model,
                            const std::string& out_dir, const TaskModelLine& line);
TaskModelRun task_model_run(const TaskModel& model, const StudyRecord& record);

// Trains and scores every model on the study spine (run_study_models: a model scored by an earlier
// run of `study` into out_dir with the same size and data is read back, not trained); returns their
// scores in the models' order.
std::vector<TaskModelRun> run_task_models(const std::string& study, const TaskModelSize& size,
                                          const std::vector<TaskModel>& models, const std::string& out_dir,
                                          std::ostream* progress, const TaskModelLine& line);

}  // namespace relgrad
