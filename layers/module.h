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
#pragma once
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
  virtual void to(Device device);    // parameters and buffers, in place
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

  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace relgrad
