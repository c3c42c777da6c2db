// A study defined in a test file with one registration call (tests/test_study.cpp,
// tests/test_scheme_registry.cpp): copy at a toy size, every treatment of decoder self-attention the
// registry offers (no list of schemes), its table and one CI check.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "train/data/length_tasks.h"
#include "train/instruments/bench_report.h"
#include "train/instruments/recipe.h"
#include "train/instruments/study_registry.h"
#include "train/instruments/task_models.h"

namespace relgrad::testing {

inline StudyEntry toy_copy_study() {
  StudyEntry e;
  e.name = "toy-copy";
  e.summary = "copy at a toy size, every treatment";
  e.plan = [](const StudyOptions& o) {
    TaskModelSize s;
    s.d_model = 8, s.n_heads = 2, s.d_ff = 16, s.layers = 1;
    s.batch_size = 8, s.steps = o.steps > 0 ? o.steps : 4, s.warmup = 1, s.lr = 3e-3;
    s.train_min = 1, s.train_max = 3;
    s.buckets = {{1, 3}, {4, 5}};
    s.eval_rows = 8, s.eval_batches = 1;
    const std::vector<std::string> treatments = o.treatments.empty() ? every_treatment(false) : o.treatments;
    const std::vector<uint64_t> seeds = o.seeds.empty() ? std::vector<uint64_t>{1} : o.seeds;
    StudyPlan plan;
    plan.heading = "toy-copy: " + bench::counted(treatments.size(), "treatment");
    plan.full = o.full;
    auto runs = std::make_shared<std::vector<TaskModel>>();
    for (const std::string& t : treatments)
      for (uint64_t seed : seeds) {
        LengthTaskConfig c;
        c.kind = LengthTaskKind::Copy;
        c.min_len = s.train_min, c.max_len = s.train_max, c.batch_size = s.batch_size, c.seed = seed;
        TaskModel m;
        m.task = "copy", m.treatment = t, m.seed = seed;
        m.train = std::make_shared<LengthTaskData>(c);
        m.train_tokens = LengthTaskData(c).max_sequence_length();
        for (const auto& [lo, hi] : s.buckets) {
          LengthTaskConfig b = c;
          b.min_len = lo, b.max_len = hi, b.batch_size = s.eval_rows, b.seed = seed + 1000;
          m.buckets.push_back(std::make_shared<LengthTaskData>(b));
        }
        plan.models.push_back(task_study_model("toy-copy", s, m, o.out_dir,
                                               [s](const TaskModelRun& r) { return bucket_line(s, r); }));
        runs->push_back(std::move(m));
      }
    plan.report = [runs, treatments](const std::vector<StudyRecord>& records, const std::string&) {
      std::vector<TaskModelRun> scored;
      for (size_t i = 0; i < records.size(); ++i) scored.push_back(task_model_run((*runs)[i], records[i]));
      StudyReport r;
      r.csv = "treatment,seed,token_train\n";
      for (const TaskModelRun& run : scored) {
        r.csv += run.treatment + "," + std::to_string(run.seed) + "," + bench::fixed(run.token[0], 4) + "\n";
        if (!std::isfinite(run.train_loss)) r.failures.push_back(run.treatment + ": the loss is not finite");
      }
      const std::vector<std::string> columns = {"1-3 (train)", "4-5"};
      r.markdown = bench::spread_table(scored, "copy", treatments, columns, false, bench::Score::Accuracy, {true});
      r.text = bench::spread_table(scored, "copy", treatments, columns, false, bench::Score::Accuracy, {false});
      return r;
    };
    return plan;
  };
  return e;
}

}  // namespace relgrad::testing
