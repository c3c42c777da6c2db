#include "layers/module.h"

#include <unordered_set>

namespace relgrad {

void Module::check_new_name(const std::string& name) const {
  RG_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module",
           "invalid name '", name, "' (non-empty, without dots)");
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  RG_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), "Module", "name '", name,
           "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  RG_CHECK(tensor.defined(), "Module", "parameter '", name, "' is an undefined tensor");
  if (requires_grad && !tensor.requires_grad()) tensor.requires_grad_(true);
  parameters_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  RG_CHECK(module != nullptr, "Module", "child '", name, "' is null");
  children_.emplace_back(name, std::move(module));
}

template <class Visit>
void Module::visit_tensors(bool buffers, bool recurse, const std::string& prefix, Visit& visit) const {
  for (const auto& [name, t] : buffers ? buffers_ : parameters_) visit(prefix + name, t);
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->visit_tensors(buffers, true, prefix + name + ".", visit);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto visit = [&](const std::string& name, const Tensor& t) {
    if (seen.insert(t.impl()).second) out.emplace_back(name, t);
  };
  visit_tensors(false, recurse, "", visit);
  return out;
}

TensorList Module::parameters(bool recurse) const {
  TensorList out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto visit = [&](const std::string& name, const Tensor& t) {
    if (seen.insert(t.impl()).second) out.emplace_back(name, t);
  };
  visit_tensors(true, recurse, "", visit);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

void Module::to(Device device) {
  for (auto list : {named_parameters(), named_buffers()})
    for (auto& [_, t] : list) t.set_data(t.detach().to(device));
}

void Module::to(DType dtype) {
  RG_CHECK_T(DTypeError, is_floating(dtype), "Module.to", "modules convert to floating dtypes only, got ",
             dtype_name(dtype));
  for (auto list : {named_parameters(), named_buffers()})
    for (auto& [_, t] : list)
      if (is_floating(t.dtype())) t.set_data(t.detach().to(dtype));
}

}  // namespace relgrad
