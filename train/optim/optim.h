// Optimizers, their parameter groups and gradient clipping with PyTorch's names and update rules
// (torch.optim 1.13, single-tensor path; torch.nn.utils.clip_grad_norm_), so that a
// PyTorch training script ports line by line and tests/golden/optim_trajectories.safetensors can
// check every step against torch in float64:
//
//   auto opt = AdamW(decay_groups(model.named_parameters(), 3e-4, 0.1), AdamWOptions().betas(0.9, 0.95));
//   for (step...) { opt.zero_grad(); loss.backward(); clip_grad_norm_(params, 1.0);
//                   opt.set_lr(schedule.lr_at(step)); opt.step(); }
//
// Updates run in place under NoGradGuard (the parameter handles held by layers stay valid) with the
// same operation order as torch, one parameter at a time, so results are deterministic.
//
// State: every parameter's state (its step count and, e.g., Adam's exp_avg and exp_avg_sq) is
// allocated when the optimizer is built, zero, on the parameter's device and dtype. Allocating
// eagerly (torch does it lazily) means the set of state tensors is fixed, so a checkpoint that lacks
// one is reported as missing rather than silently restarted.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/adam.h"
#include "core/base/name_table.h"

#include "autograd/ops.h"

namespace relgrad {

// Parameters that share a learning rate and weight decay (torch's param_groups entries).
struct ParamGroup {
  TensorList params;
  double lr = 1e-3;
  double weight_decay = 0.0;
};

// Two groups for transformer training (nanoGPT's configure_optimizers, extended by name):
//   group 0 "decay":    parameters of dim >= 2 (Linear / Embedding weights) → weight_decay
//   group 1 "no decay": 1-D parameters (biases, LayerNorm/RMSNorm gains) and any parameter whose
//                       name contains "norm" or "ln" (e.g. "ln_f.weight", "blocks.0.norm1.weight")
//                       → weight_decay 0.
// Decaying biases and norm gains pulls them towards 0 for no regularising benefit, so they are left
// out. Order inside each group follows `named` (Module::named_parameters order). An empty group is
// kept, so group indices (and checkpoint names) never depend on the model.
std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Tensor>>& named, double lr,
                                     double weight_decay);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a .grad (those without are skipped, as torch).
  virtual void step();
  // Drops every parameter's .grad (torch's set_to_none=True, as Module::zero_grad).
  void zero_grad();
  std::vector<ParamGroup>& param_groups() { return groups_; }
  // Sets every group's lr (what a schedule does each step).
  void set_lr(double lr);
  int64_t step_count() const { return step_count_; }  // calls to step()
  const std::string& name() const { return name_; }

  // Checkpoint state as named tensors, in a fixed order:
  //   "step_count"                      0-d int64
  //   "group<g>.param<i>.step"          0-d int64, updates this parameter received
  //   "group<g>.param<i>.<slot>"        e.g. exp_avg, exp_avg_sq, momentum_buffer (parameter's shape)
  // The slot tensors are the live state (not copies): save them before the next step().
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  // Copies a state_tensors() list back (values converted to each parameter's dtype and device).
  // Every expected name must be present with the right shape, and no other name may appear; nothing
  // is changed unless all entries check out. Hyperparameters and lr are not part of the state.
  void load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state);

 protected:
  // `slots` are the per-parameter state tensors this optimizer keeps (fixed at construction).
  Optimizer(std::string name, std::vector<ParamGroup> groups, std::vector<std::string> slots);

  struct ParamState {
    int64_t step = 0;            // updates applied so far (Adam's bias correction uses it)
    std::vector<Tensor> slots;   // same order as slot_names_
  };
  // Updates `param` (in place, grad mode is off) from `grad`; state.step was already incremented.
  virtual void update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) = 0;
  // Called once after the step's update() calls: an optimizer that queued its updates runs them here
  // (completed), or drops them when an update threw (none of them is then left for a later step).
  virtual void finish_step(bool completed) { (void)completed; }
  // Checks that a group's lr and weight_decay are valid ("[<name>] invalid learning rate ...").
  void check_group(const ParamGroup& group, size_t index) const;

 private:
  std::string name_;
  std::vector<ParamGroup> groups_;
  std::vector<std::string> slot_names_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  int64_t step_count_ = 0;
};

// ---- positional parameter groups ------------------------------------------------------------------
// The optimizer's parameter groups of a run: decay_groups, with the positional schemes' tables moved
// into groups of their own that train at a multiple of the learning rate (optim.positional_lr_scale,
// as PyTorch's per-group lr in param_groups):
//
//   ScaledGroups g = scaled_positional_groups(model.named_parameters(), lr, weight_decay, 10.0);
//   AdamW opt(g.groups, AdamWOptions(lr));
//   for (step...) { set_scheduled_lr(opt, schedule.lr_at(step), g.lr_scale); ... opt.step(); }
//
// Why: T5's bias is in raw logit units and Adam moves each entry by about lr per step, so the ≈ 5-nat
// margin that puts 0.9 of a head on one offset takes thousands of steps at lr 3e-3; the verification
// experiments (train/instruments/experiments_internal.h, ModelSize::positional_lr_scale) give the tables 10×
// lr.
//
// Which parameters: those of the relative positional schemes, i.e. whose name contains ".positional."
// (MultiheadAttention registers its scheme as "positional": T5's bias table, the learned tables of seed,
// huang and Shaw, Transformer-XL's). The absolute position embedding (pos_embed, model.absolute_position
// = "learned") is not among them: it is an embedding like the token embedding, added to the input, and
// keeps the model's lr.
// True for a parameter of a relative positional scheme (its name contains ".positional.").
bool is_positional_parameter(const std::string& name);

struct ScaledGroups {
  std::vector<ParamGroup> groups;  // each group's lr is lr × lr_scale[g]
  std::vector<double> lr_scale;    // one per group
};

// positional_lr_scale == 1: decay_groups unchanged (two groups, the layout of every checkpoint so far).
// Otherwise four groups: 0 decay and 1 no decay (decay_groups' rule) without the positional parameters,
// then 2 positional decay and 3 positional no decay (the same rule, at lr × positional_lr_scale). The
// positional groups are kept when empty (a model without a relative scheme), so group indices, and the
// checkpoint's optimizer state names, depend on the scale only. positional_lr_scale must be > 0.
ScaledGroups scaled_positional_groups(const std::vector<std::pair<std::string, Tensor>>& named, double lr,
                                      double weight_decay, double positional_lr_scale);

// What a schedule does each step with scaled groups: group g's lr = lr × lr_scale[g] (every group at
// lr when lr_scale is empty, Optimizer::set_lr).
void set_scheduled_lr(Optimizer& optimizer, double lr, const std::vector<double>& lr_scale);

// ---- gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2) -------------
// total = sqrt(sum over params with a .grad of sum(grad²)), accumulated in float64 whatever the
// grads' dtype. When scale = max_norm / (total + 1e-6) is < 1, every grad is multiplied by it in
// place. Returns total (before clipping); params without a .grad are skipped, none at all gives 0.
//
// A non-finite total (inf/NaN gradients) is returned, not thrown, and the grads are left untouched
// (torch would multiply them by NaN): the caller checks std::isfinite(total) and skips the step.
// Throws "[clip_grad_norm_] ..." for max_norm < 0 or NaN.
double clip_grad_norm_(const TensorList& params, double max_norm);

// ---- SGD (torch.optim.SGD) -------------------------------------------------------------------------
//   d = grad + weight_decay * p
//   buf = d (first update) | momentum * buf + (1 - dampening) * d
//   d = d + momentum * buf (nesterov) | buf (momentum > 0)
//   p -= lr * d
struct SGDOptions {
  double lr_ = 1e-3, momentum_ = 0.0, dampening_ = 0.0, weight_decay_ = 0.0;
  bool nesterov_ = false;
  explicit SGDOptions(double lr = 1e-3) : lr_(lr) {}
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
};

class SGD : public Optimizer {
 public:
  // With groups, each group's own lr and weight_decay are used (options' lr/weight_decay ignored).
  SGD(std::vector<ParamGroup> groups, SGDOptions options);
  SGD(const TensorList& params, SGDOptions options);
  const SGDOptions& options() const { return options_; }

 protected:
  void update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) override;

 private:
  SGDOptions options_;
};

// ---- Adam (torch.optim.Adam, L2 weight decay) and AdamW (decoupled weight decay) -------------------
//   Adam:  g = grad + weight_decay * p                   AdamW: p *= 1 - lr * weight_decay; g = grad
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g²
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)      (t = this parameter's step)
struct AdamOptions {
  double lr_ = 1e-3, beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8, weight_decay_ = 0.0;
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  AdamOptions& lr(double v) { lr_ = v; return *this; }
  AdamOptions& betas(double b1, double b2) { beta1_ = b1; beta2_ = b2; return *this; }
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
};
// torch.optim.AdamW's default weight_decay is 0.01 (Adam's is 0).
struct AdamWOptions : AdamOptions {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay_ = 0.01; }
  AdamWOptions& lr(double v) { lr_ = v; return *this; }
  AdamWOptions& betas(double b1, double b2) { beta1_ = b1; beta2_ = b2; return *this; }
  AdamWOptions& eps(double v) { eps_ = v; return *this; }
  AdamWOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
};

// The Adam / AdamW update written with tensor ops: the fused kernels' twin (used where neither fused
// one, CPU or CUDA, can run: non-contiguous or mixed layouts) and their test oracle.
void adam_composite_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const backend::AdamStep& s);

class Adam : public Optimizer {
 public:
  // With groups, each group's own lr and weight_decay are used (options' lr/weight_decay ignored).
  Adam(std::vector<ParamGroup> groups, AdamOptions options);
  Adam(const TensorList& params, AdamOptions options);
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled);
  void update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) override;
  void finish_step(bool completed) override;

 private:
  AdamOptions options_;
  bool decoupled_;  // AdamW
  std::vector<backend::AdamJob> queued_;  // this step's fused updates, run together by finish_step
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options);
  AdamW(const TensorList& params, AdamWOptions options);
};

// ---- choosing an optimizer by name ---------------------------------------------------------------
// The optimizers a run chooses from by name (optim.name, train/trainer/options.h). Optimizer::name()
// is another spelling, PyTorch's class name ("AdamW"), the one checkpoints store.
enum class OptimizerKind { SGD, Adam, AdamW };
// "sgd", "adam" or "adamw" → the kind; throws relgrad::Error "[optim] optim.name: expected one of ..."
// otherwise. The one place a name becomes an optimizer kind.
OptimizerKind optimizer_kind(const std::string& name);
inline constexpr NameTable<OptimizerKind, 3> kOptimizerKindNames{
    {{OptimizerKind::SGD, "sgd"}, {OptimizerKind::Adam, "adam"}, {OptimizerKind::AdamW, "adamw"}}};
const char* optimizer_kind_name(OptimizerKind kind);

}  // namespace relgrad
