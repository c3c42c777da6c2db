// Optimizers: the shared bookkeeping (groups, state, checkpoints) and the SGD / Adam / AdamW updates,
// written in the same operation order as torch.optim 1.13's single-tensor path so that float64 runs
// agree with PyTorch to rounding. Every update runs on the parameter's device: SGD and the composite
// Adam through tensor ops, the fused Adam step through core/backend/adam.h.
#include "train/optim/optim.h"

#include <omp.h>

#include <cmath>
#include <map>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/profiler.h"
#include "core/base/error.h"
#include "core/backend/adam.h"
#include "core/cpu/reduce.h"
#include "core/parallel_tasks.h"

namespace relgrad {

// ---- decay_groups -----------------------------------------------------------------------------------
namespace {
bool is_no_decay(const std::string& name, const Tensor& p) {
  return p.dim() < 2 || name.find("norm") != std::string::npos || name.find("ln") != std::string::npos;
}
}  // namespace

std::vector<ParamGroup> decay_groups(const std::vector<std::pair<std::string, Tensor>>& named, double lr,
                                     double weight_decay) {
  ParamGroup decay{{}, lr, weight_decay}, no_decay{{}, lr, 0.0};
  for (const auto& [name, p] : named) {
    RG_CHECK(p.defined(), "decay_groups", "parameter '", name, "' is undefined");
    (is_no_decay(name, p) ? no_decay : decay).params.push_back(p);
  }
  return {decay, no_decay};
}

// ---- Optimizer ------------------------------------------------------------------------------------
Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, std::vector<std::string> slots)
    : name_(std::move(name)), groups_(std::move(groups)), slot_names_(std::move(slots)) {
  const char* op = name_.c_str();
  std::set<const TensorImpl*> seen;
  size_t total = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    check_group(groups_[g], g);
    std::vector<ParamState> states;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      RG_CHECK(p.defined(), op, "group ", g, " param ", i, " is undefined");
      RG_CHECK(is_floating(p.dtype()), op, "group ", g, " param ", i, " has dtype ", dtype_name(p.dtype()),
               "; only float32/float64 parameters can be optimized");
      RG_CHECK(p.is_leaf(), op, "group ", g, " param ", i, " (shape ", shape_str(p.shape()),
               ") is not a leaf; optimize the tensor itself, not a result computed from it");
      // A parameter in two groups would be updated twice per step (torch refuses it too).
      RG_CHECK(seen.insert(p.impl()).second, op, "group ", g, " param ", i,
               " appears more than once in the parameter groups");
      ParamState state;
      for (size_t s = 0; s < slot_names_.size(); ++s) state.slots.push_back(zeros_like(p));
      states.push_back(std::move(state));
      ++total;
    }
    state_.push_back(std::move(states));
  }
  RG_CHECK(total > 0, op, "got an empty parameter list");
}

void Optimizer::check_group(const ParamGroup& group, size_t index) const {
  // Written as !(x >= 0) so that NaN is refused too.
  RG_CHECK(group.lr >= 0, name_, "invalid learning rate ", group.lr, " in group ", index, " (must be >= 0)");
  RG_CHECK(group.weight_decay >= 0, name_, "invalid weight_decay ", group.weight_decay, " in group ", index,
           " (must be >= 0)");
}

void Optimizer::step() {
  ProfileScope profile("optimizer.step");  // one row of the op profiler (autograd/profiler.h)
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) check_group(groups_[g], g);  // a schedule may have set lr
  try {
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (size_t i = 0; i < groups_[g].params.size(); ++i) {
        Tensor& p = groups_[g].params[i];
        Tensor grad = p.grad();
        if (!grad.defined()) continue;
        ParamState& state = state_[g][i];
        ++state.step;
        update(groups_[g], p, grad, state);
      }
    }
  } catch (...) {
    finish_step(false);
    throw;
  }
  finish_step(true);
  ++step_count_;
}

void Optimizer::zero_grad() {
  for (auto& group : groups_)
    for (auto& p : group.params) p.set_grad(Tensor());
}

void Optimizer::set_lr(double lr) {
  for (auto& group : groups_) group.lr = lr;
}

namespace {
std::string param_prefix(size_t g, size_t i) {
  return "group" + std::to_string(g) + ".param" + std::to_string(i) + ".";
}
Tensor int_scalar(int64_t v) { return scalar_tensor(static_cast<double>(v), kInt64); }
}  // namespace

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back("step_count", int_scalar(step_count_));
  for (size_t g = 0; g < state_.size(); ++g) {
    for (size_t i = 0; i < state_[g].size(); ++i) {
      std::string prefix = param_prefix(g, i);
      out.emplace_back(prefix + "step", int_scalar(state_[g][i].step));
      for (size_t s = 0; s < slot_names_.size(); ++s) out.emplace_back(prefix + slot_names_[s], state_[g][i].slots[s]);
    }
  }
  return out;
}

void Optimizer::load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) {
  const std::string op = name_ + ".load_state_tensors";  // "[AdamW.load_state_tensors] ..."
  std::map<std::string, Tensor> given;
  for (const auto& [name, t] : state) {
    RG_CHECK(t.defined(), op, "entry '", name, "' is undefined");
    RG_CHECK(given.emplace(name, t).second, op, "entry '", name, "' appears twice");
  }
  // Check everything against the expected layout before changing anything.
  std::vector<std::pair<std::string, Tensor>> expected = state_tensors();
  for (const auto& [name, current] : expected) {
    auto it = given.find(name);
    RG_CHECK(it != given.end(), op, "missing entry '", name, "' (the state was saved by a different optimizer, ",
             "model or parameter grouping?)");
    RG_CHECK(it->second.shape() == current.shape(), op, "entry '", name, "' has shape ", shape_str(it->second.shape()),
             " but this optimizer expects ", shape_str(current.shape()));
    if (current.dtype() == kInt64) {
      double v = it->second.item();
      RG_CHECK(v >= 0 && v == std::floor(v), op, "entry '", name, "' must be a count >= 0, got ", v);
    }
    given.erase(it);
  }
  RG_CHECK(given.empty(), op, "unexpected entry '", given.begin()->first, "' (", given.size(),
           " entries not used by this optimizer)");

  NoGradGuard no_grad;
  std::map<std::string, Tensor> by_name(state.begin(), state.end());
  step_count_ = static_cast<int64_t>(by_name.at("step_count").item());
  for (size_t g = 0; g < state_.size(); ++g) {
    for (size_t i = 0; i < state_[g].size(); ++i) {
      std::string prefix = param_prefix(g, i);
      state_[g][i].step = static_cast<int64_t>(by_name.at(prefix + "step").item());
      for (size_t s = 0; s < slot_names_.size(); ++s) state_[g][i].slots[s].copy_(by_name.at(prefix + slot_names_[s]));
    }
  }
}

// ---- SGD ------------------------------------------------------------------------------------------
namespace {
std::vector<ParamGroup> one_group(const TensorList& params, double lr, double weight_decay) {
  return {ParamGroup{params, lr, weight_decay}};
}
void check_sgd(const SGDOptions& o) {
  RG_CHECK(o.momentum_ >= 0, "SGD", "invalid momentum ", o.momentum_, " (must be >= 0)");
  RG_CHECK(o.dampening_ >= 0 && o.dampening_ <= 1, "SGD", "invalid dampening ", o.dampening_, " (must be in [0, 1])");
  RG_CHECK(!o.nesterov_ || (o.momentum_ > 0 && o.dampening_ == 0), "SGD",
           "nesterov momentum requires momentum > 0 and dampening = 0 (got momentum ", o.momentum_, ", dampening ",
           o.dampening_, ")");
}
std::vector<std::string> sgd_slots(const SGDOptions& o) {
  check_sgd(o);  // before the base constructor allocates anything
  if (o.momentum_ != 0) return {"momentum_buffer"};
  return {};
}
}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), sgd_slots(options)), options_(options) {}
SGD::SGD(const TensorList& params, SGDOptions options)
    : SGD(one_group(params, options.lr_, options.weight_decay_), options) {}

void SGD::update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) {
  const SGDOptions& o = options_;
  Tensor d = grad;
  if (group.weight_decay != 0) d = add(grad, mul(param, group.weight_decay));
  if (o.momentum_ != 0) {
    Tensor& buf = state.slots[0];
    if (state.step == 1) buf.copy_(d);  // torch starts the buffer at the first gradient, undamped
    else buf.mul_(o.momentum_).add_(d, 1 - o.dampening_);
    d = o.nesterov_ ? add(d, mul(buf, o.momentum_)) : buf;
  }
  param.add_(d, -group.lr);
}

// ---- Adam / AdamW ---------------------------------------------------------------------------------
namespace {
std::vector<std::string> adam_slots(const char* name, const AdamOptions& o) {
  RG_CHECK(o.beta1_ >= 0 && o.beta1_ < 1, name, "invalid beta1 ", o.beta1_, " (must be in [0, 1))");
  RG_CHECK(o.beta2_ >= 0 && o.beta2_ < 1, name, "invalid beta2 ", o.beta2_, " (must be in [0, 1))");
  RG_CHECK(o.eps_ >= 0, name, "invalid eps ", o.eps_, " (must be >= 0)");
  return {"exp_avg", "exp_avg_sq"};
}
}  // namespace

Adam::Adam(const char* name, std::vector<ParamGroup> groups, AdamOptions options, bool decoupled)
    : Optimizer(name, std::move(groups), adam_slots(name, options)), options_(options), decoupled_(decoupled) {}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", std::move(groups), options, false) {}
Adam::Adam(const TensorList& params, AdamOptions options)
    : Adam("Adam", one_group(params, options.lr_, options.weight_decay_), options, false) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : Adam("AdamW", std::move(groups), options, true) {}
AdamW::AdamW(const TensorList& params, AdamWOptions options)
    : Adam("AdamW", one_group(params, options.lr_, options.weight_decay_), options, true) {}

void adam_composite_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const backend::AdamStep& s) {
  Tensor g = grad;
  if (s.decoupled) param.mul_(1 - s.lr * s.weight_decay);                   // AdamW: shrink p directly
  else if (s.weight_decay != 0) g = add(grad, mul(param, s.weight_decay));  // Adam: L2 in the gradient
  m.mul_(s.beta1).add_(g, 1 - s.beta1);
  v.mul_(s.beta2).add_(mul(g, 1 - s.beta2).mul_(g));  // torch's addcmul order: (value * g) * g
  Tensor denom = div(sqrt(v), std::sqrt(s.bias_correction2));
  denom.add_(s.eps);
  param.add_(div(m, denom), -(s.lr / s.bias_correction1));
}

void Adam::update(const ParamGroup& group, Tensor& param, const Tensor& grad, ParamState& state) {
  const AdamOptions& o = options_;
  Tensor& m = state.slots[0];
  Tensor& v = state.slots[1];
  const double t = static_cast<double>(state.step);
  backend::AdamStep s;
  s.lr = group.lr;
  s.weight_decay = group.weight_decay;
  s.beta1 = o.beta1_;
  s.beta2 = o.beta2_;
  s.eps = o.eps_;
  s.bias_correction1 = 1 - std::pow(o.beta1_, t);
  s.bias_correction2 = 1 - std::pow(o.beta2_, t);
  s.decoupled = decoupled_;
  // One fused pass on the parameter's device (core/backend/adam.h) where the layout allows, queued so
  // that finish_step runs every parameter's in one go; same bits as the composite.
  if (!backend::adam_fusable(param, grad, m, v)) return adam_composite_update(param, grad, m, v, s);
  queued_.push_back(backend::AdamJob{param, grad, m, v, s});
}

void Adam::finish_step(bool completed) {
  std::vector<backend::AdamJob> jobs = std::move(queued_);
  queued_.clear();
  if (!completed) return;
  backend::adam_steps(jobs);
  for (backend::AdamJob& j : jobs)
    for (Tensor* t : {&j.param, &j.m, &j.v}) t->bump_version();
}

// ---- positional parameter groups ------------------------------------------------------------------
bool is_positional_parameter(const std::string& name) {
  return name.find(".positional.") != std::string::npos;
}

ScaledGroups scaled_positional_groups(const std::vector<std::pair<std::string, Tensor>>& named, double lr,
                                      double weight_decay, double positional_lr_scale) {
  RG_CHECK(std::isfinite(positional_lr_scale) && positional_lr_scale > 0, "optim",
           "optim.positional_lr_scale must be a positive number, got ", positional_lr_scale);
  ScaledGroups out;
  if (positional_lr_scale == 1.0) {
    out.groups = decay_groups(named, lr, weight_decay);
    out.lr_scale.assign(out.groups.size(), 1.0);
    return out;
  }
  std::vector<std::pair<std::string, Tensor>> plain, positional;
  for (const auto& entry : named)
    (is_positional_parameter(entry.first) ? positional : plain).push_back(entry);
  out.groups = decay_groups(plain, lr, weight_decay);
  for (ParamGroup& g : decay_groups(positional, lr * positional_lr_scale, weight_decay))
    out.groups.push_back(g);
  out.lr_scale = {1.0, 1.0, positional_lr_scale, positional_lr_scale};
  return out;
}

void set_scheduled_lr(Optimizer& optimizer, double lr, const std::vector<double>& lr_scale) {
  std::vector<ParamGroup>& groups = optimizer.param_groups();
  if (lr_scale.empty()) return optimizer.set_lr(lr);
  RG_CHECK(lr_scale.size() == groups.size(), "optim", "set_scheduled_lr: ", lr_scale.size(), " scales for ",
           groups.size(), " parameter groups");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = lr * lr_scale[g];
}

// ---- clip_grad_norm_ ------------------------------------------------------------------------------
double clip_grad_norm_(const TensorList& params, double max_norm) {
  RG_PROFILE_OP("clip_grad_norm_");
  RG_CHECK(max_norm >= 0, "clip_grad_norm_", "invalid max_norm ", max_norm, " (must be >= 0)");
  NoGradGuard no_grad;
  double sum_sq = 0.0;
  // GPU gradients: the per-tensor sums are added up on the device, in the same order as on the
  // host (a chain of float64 adds, so the same value), and read back once per device, not once per
  // parameter (each read waits for the queue to drain).
  Tensor partial;
  auto flush = [&] {
    if (partial.defined()) sum_sq += partial.item();
    partial = Tensor();
  };
  // CPU float32 gradients: each tensor's sum (one chain of float64 adds) on one thread, the tensors
  // side by side, added below in the parameters' order: the same bits as one thread. A sum is a
  // chain whose adds wait on each other, so the default run's 0.24 M took 0.3 ms on one thread. The
  // threads are shared out above kParallelGrain elements in all (core/strided.h), as the kernels do.
  const int64_t count = static_cast<int64_t>(params.size());
  auto summed_on_cpu = [](const Tensor& g) {
    return g.defined() && g.device().is_cpu() && g.dtype() == kFloat32 && g.is_contiguous();
  };
  int64_t cpu_elements = 0;
  for (const Tensor& p : params)
    if (summed_on_cpu(p.grad())) cpu_elements += p.grad().numel();
  const int threads = cpu_elements > cpu::kParallelGrain ? omp_get_max_threads() : 1;
  // The tensors cut into one group per thread, of about equal elements, each group's sums four side
  // by side (cpu::sums_of_squares): each sum is still its own tensor's chain.
  std::vector<double> cpu_sum(params.size(), 0.0);
  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(threads));
  int64_t before = 0;
  for (int64_t i = 0; i < count; ++i) {
    const Tensor g = params[static_cast<size_t>(i)].grad();
    if (!summed_on_cpu(g)) continue;
    groups[static_cast<size_t>(std::min<int64_t>(threads - 1, before * threads / cpu_elements))].push_back(i);
    before += g.numel();
  }
  parallel_tasks(threads, threads, [&](int64_t q, int) {
    const std::vector<int64_t>& group = groups[static_cast<size_t>(q)];
    std::vector<const float*> data;
    std::vector<int64_t> sizes;
    for (int64_t i : group) {
      const Tensor g = params[static_cast<size_t>(i)].grad();
      data.push_back(g.data_ptr<float>());
      sizes.push_back(g.numel());
    }
    std::vector<double> sums(group.size());
    cpu::sums_of_squares(data.data(), sizes.data(), sums.data(), static_cast<int64_t>(group.size()));
    for (size_t t = 0; t < group.size(); ++t) cpu_sum[static_cast<size_t>(group[t])] = sums[t];
  });
  for (int64_t i = 0; i < count; ++i) {
    Tensor g = params[static_cast<size_t>(i)].grad();
    if (!g.defined()) continue;
    // float64 per tensor and across tensors: float32 grads of a big model would lose digits otherwise.
    if (summed_on_cpu(g)) {
      sum_sq += cpu_sum[static_cast<size_t>(i)];
      continue;
    }
    Tensor g64 = g.to(kFloat64);
    Tensor s = sum(mul(g64, g64));  // ()
    if (g.device().is_cpu()) {
      sum_sq += s.item();
      continue;
    }
    if (partial.defined() && partial.device() != g.device()) flush();
    partial = partial.defined() ? add(partial, s) : s;
  }
  flush();
  double total = std::sqrt(sum_sq);
  if (!std::isfinite(total)) return total;
  double scale = max_norm / (total + 1e-6);
  if (scale < 1.0) {
    // The CPU float32 gradients scaled by the threads, group by group, element by element with mul_'s
    // arithmetic (a float32 product with the scale rounded to float32) but without an op's dispatch
    // and write-back per tensor; the others by mul_ from this thread.
    const float scale32 = static_cast<float>(scale);
    parallel_tasks(threads, threads, [&](int64_t q, int) {
      for (int64_t i : groups[static_cast<size_t>(q)]) {
        const Tensor g = params[static_cast<size_t>(i)].grad();
        float* x = g.data_ptr<float>();
        for (int64_t k = 0, n = g.numel(); k < n; ++k) x[k] = x[k] * scale32;
        g.bump_version();
      }
    });
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined() && !summed_on_cpu(g)) g.mul_(scale);
    }
  }
  return total;
}

// ---- choosing an optimizer by name ---------------------------------------------------------------
OptimizerKind optimizer_kind(const std::string& name) {
  const std::optional<OptimizerKind> kind = kOptimizerKindNames.find(name);
  RG_CHECK(kind.has_value(), "optim", "optim.name: expected one of ", kOptimizerKindNames.list(), ", got '", name, "'");
  return *kind;
}

const char* optimizer_kind_name(OptimizerKind kind) { return kOptimizerKindNames.name(kind); }

}  // namespace relgrad
