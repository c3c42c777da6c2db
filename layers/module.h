// Module: the base of every layer, as torch::nn::Module. A module owns named parameters, buffers
// and child modules, in registration order; names are dotted paths ("blocks.2.attn.q_proj.weight").
//
//   struct Mlp : Module {
//     std::shared_ptr<Linear> fc1, fc2;
//     Mlp() { fc1 = register_module("fc1", std::make_shared<Linear>(2, 8));
//             fc2 = register_module("fc2", std::make_shared<Linear>(8, 1)); }
//   };
//
// Subclasses keep Tensor handles to their parameters; to(device/dtype) converts each parameter in
// place (the handle stays valid), so those members never go stale.
//
// Checkpoints: state_dict() lists every parameter and buffer under its dotted name, in PyTorch's
// order: a module's own parameters (registration order), then its own buffers, then each child's
// entries recursively (children in registration order). A tensor reachable under several names (a
// shared table) is listed once, at its first name in that order, which is also its name in
// named_parameters(). load_state_dict() copies values back in place:
//
//   save_safetensors("m.safetensors", {sd.begin(), sd.end()});        // sd = model.state_dict()
//   model.load_state_dict(load_safetensors("m.safetensors").tensors);
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace relgrad {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters (trainable, requires_grad on), with the child modules' under dotted names. A
  // parameter reachable twice (a table shared by several layers) is listed once, at its first name.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();                  // drops every parameter's .grad

  // Parameters and buffers in the order above, as detached aliases (same storage, no autograd
  // history): writing into one writes into the model.
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Validates the whole of `state` first and, on any problem, throws one relgrad::Error listing every
  // one ("[load_state_dict] 2 problems: missing 'fc1.weight'; 'fc2.bias' has shape (3) but the model
  // expects (4)") with the model untouched. Problems: a model entry absent from `state` (missing), a
  // name the model does not have (unexpected), a duplicate or undefined entry, a shape that differs,
  // a dtype of another category (floating / int64 / bool). strict = false allows missing and
  // unexpected names (those entries are skipped); every other problem still throws. On success each
  // value is copied in place under NoGradGuard, converted to the model tensor's dtype and moved to its
  // device, so existing handles (and optimizer state keyed on them) stay valid. A shared tensor may be
  // given under any of its names; when several are given, the first in state_dict order is used.
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state, bool strict = true);
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);  // load_safetensors(...).tensors
  // Parameters (with their .grad, if any) and buffers, in place: every handle to them (members,
  // optimizer state keyed on them) stays valid. What a forward derives from shapes and settings
  // (masks, index maps, sinusoid and rotary tables) is not module state: it is built on the input's
  // device and kept in the bounded caches of core/device_cache.h, whose keys hold the device.
  virtual void to(Device device);
  virtual void to(DType dtype);      // floating parameters and buffers, in place

 protected:
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  template <class Visit>
  void visit_tensors(bool buffers, bool recurse, const std::string& prefix, Visit& visit) const;
  // Every (name, tensor) of the state in state_dict order, aliases of shared tensors included.
  void collect_state(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;

  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// The device of a module's first parameter (or buffer); the CPU when it has neither. Models live on
// one device, so this is where their inputs have to be (the sampler moves prompts there).
Device device_of(const Module& module);

// Eval mode for the scope, then the mode the module had, also when the scope is left by an exception
// (evaluation and generation: train/trainer/run.cpp, sampler.cpp).
struct EvalScope {
  explicit EvalScope(Module& m) : module(m), was_training(m.is_training()) { m.eval(); }
  ~EvalScope() { module.train(was_training); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;
  Module& module;
  bool was_training;
};

}  // namespace relgrad
