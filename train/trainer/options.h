// What the Trainer (train/trainer/trainer.h) reads: the model it builds, the optimizer and its schedule,
// the loop, checkpoints and samples, and the data as a Dataset (train/data/dataset.h). The relgrad
// command fills them from a RunConfig in one place (trainer_options, train/config/run_options.h);
// a C++ program may fill them itself.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/base/name_table.h"
#include "layers/models.h"
#include "train/data/dataset.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"
#include "train/trainer/nonfinite.h"
#include "train/trainer/training_log.h"
#include "train/trainer/sampler.h"

namespace relgrad {

// train.plot_format: the loss plot written at the end (train/plot/plot.h).
enum class PlotFormat { Svg, Png };
inline constexpr NameTable<PlotFormat, 2> kPlotFormatNames{{{PlotFormat::Svg, "svg"}, {PlotFormat::Png, "png"}}};
// train.dtype: the parameters' and activations' dtype (of core/base/dtype.h's, the floating ones).
inline constexpr NameTable<DType, 2> kParameterDTypeNames{{{DType::Float32, "float32"}, {DType::Float64, "float64"}}};
// train.precision: the products' precision under autocast (autograd/autocast.h); fp16 adds dynamic
// loss scaling (train/optim/grad_scaler.h). Weights, optimizer state, reductions and checkpoints stay float32.
inline constexpr NameTable<DType, 3> kPrecisionNames{
    {{DType::Float32, "fp32"}, {DType::BFloat16, "bf16"}, {DType::Float16, "fp16"}}};

struct OptimConfig {
  OptimizerKind name = OptimizerKind::AdamW;  // kOptimizerKindNames: sgd, adam, adamw (train/optim/optim.h)
  double lr = 1e-3;            // peak learning rate
  double min_lr = 0.0;         // reached at decay_steps
  int64_t warmup_steps = 100;  // linear warmup from 0
  // The step at which the decay reaches min_lr (PyTorch's T_max), held there after; 0 = train.steps.
  // A resume with a larger train.steps stretches the schedule when 0, keeps it when the old total.
  int64_t decay_steps = 0;
  LrSchedule::Decay decay = LrSchedule::Decay::Cosine;  // after warmup: kDecayNames (train/optim/schedule.h)
  double weight_decay = 0.01;  // decay_groups: tensors of 2+ dims (positional tables too), not biases or norms
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.0;       // sgd
  bool nesterov = false;       // sgd
  double clip = 1.0;           // global gradient-norm clip; 0 = off
  // The relative positional schemes' tables (parameters named "*.positional.*") train at lr × this, in
  // optimizer groups of their own that follow the schedule (train/optim/optim.h); 1 = one lr for all.
  double positional_lr_scale = 1.0;
};

struct TrainLoopConfig {
  int64_t steps = 1000;         // optimizer steps
  int64_t grad_accum = 1;       // micro-batches per step
  int64_t batch_shards = 1;     // each micro-batch's rows cut into this many shards (at most one row each), run side by side on
                                // replicas of the model (train/trainer/batch_shards.h); the same bits at any
                                // thread count, not the same as another shard count (sums over rows)
  bool shard_by_length = false;  // with batch_shards > 1: rows ordered by length, cut where the shards' padded costs are
                                 // most even, each shard padded only to its own longest row (batch_shards.h)
  int64_t log_every = 10;       // progress line + log record every n steps
  int64_t eval_every = 250;     // held-out evaluation every n steps (and at the end); 0 = only at the end
  int64_t eval_batches = 8;     // held-out batches per evaluation
  int64_t save_every = 500;     // checkpoint every n steps (and at the end); 0 = only at the end
  std::string out_dir = "runs/default";  // checkpoint.safetensors, log.jsonl|csv, loss.svg|png
  LogFormat log_format = LogFormat::Jsonl;  // jsonl or csv (kLogFormatNames, train/trainer/training_log.h)
  PlotFormat plot_format = PlotFormat::Svg;  // svg or png (written at the end)
  uint64_t seed = 1;            // model initialisation and dropout
  int64_t threads = 0;          // OpenMP threads; 0 = the adaptive policy (train/trainer/thread_policy.h).
                                // The bits do not depend on the count (kernels reduce in a fixed order).
  double collective_timeout_s = 300;  // mpirun: seconds a rank waits for the others in a collective before it
                                      // ends the job with an error (docs/distributed.md); 0 = forever
  std::string device = "cpu";   // cpu or cuda
  DType dtype = kFloat32;       // float32 or float64 parameters and activations (kParameterDTypeNames)
  double target_accuracy = 0.0;   // stop early once a held-out evaluation reaches it (0 = never)
  int64_t samples = 4;          // examples decoded greedily after training (0 = none)
  NonfinitePolicy nonfinite = NonfinitePolicy::Stop;  // a NaN/Inf loss or gradient: stop (error, exit 3) or skip the step
  int64_t max_skipped_steps = 10;  // skip: consecutive skipped steps allowed; one more stops the run
  bool detect_anomaly = false;     // check every op's output and gradient for NaN/Inf (slow; names the op)
  int64_t profile = 0;             // op-level profile of this many steps after the first (train/trainer/trainer.cpp)
  bool tf32 = false;               // TF32 for float32 GEMMs on the GPU (torch.backends.cuda.matmul.allow_tf32)
  DType precision = kFloat32;      // kPrecisionNames: fp32, bf16 or fp16 products (mixed precision, torch.autocast)
};

// model.type: the two kinds of model (train/trainer/run.h: DecoderOnlyModel, EncoderDecoderModel).
enum class ModelKind { DecoderOnly, EncoderDecoder };
inline constexpr NameTable<ModelKind, 2> kModelKindNames{
    {{ModelKind::EncoderDecoder, "encoder-decoder"}, {ModelKind::DecoderOnly, "decoder-only"}}};

// The model of a run: its kind and sizes (vocab sizes filled in) and the parameters' dtype.
struct ModelOptions {
  ModelKind type = ModelKind::EncoderDecoder;
  TransformerConfig config;
  DType dtype = kFloat32;                // float32 or float64
};

struct TrainerOptions {
  ModelOptions model;
  OptimConfig optim;
  TrainLoopConfig train;
  SamplingOptions sample;          // the samples printed after training (eos as the data's samples need)
  std::shared_ptr<const Dataset> data;
  // A model.cross_alignment = "explicit" run: each target query's place on the source axis for a target
  // of t2 tokens, int64 (t2), which the samples printed after training pass the model as the data's
  // batches carry Batch::tgt_positions. Empty for models that align cross-attention themselves.
  std::function<Tensor(int64_t t2)> target_positions;
  // Written verbatim into every checkpoint (and compared across ranks): the config the run came
  // from, so that a checkpoint can be reopened without the trainer (train/config/run_options.h).
  std::string config_json;
  // Written into every checkpoint as extra.vocab when not empty: what the ids mean, so that sampling
  // needs no data (docs/checkpoint-format.md, 1.3; trainer_options fills it, vocab_to_json).
  std::string vocab_json;
  // Called by Trainer::resume with the checkpoint's config_json and path: throws when the two runs
  // differ in what shapes the model, the data or the optimizer state. Empty: no check.
  std::function<void(const std::string& saved_json, const std::string& path)> check_resume;
};

}  // namespace relgrad
