#include "layers/module.h"

#include <unordered_map>
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

void Module::collect_state(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : parameters_) out.emplace_back(prefix + name, t);
  for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect_state(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> all, out;
  collect_state("", all);
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, t] : all)
    if (seen.insert(t.impl()).second) out.emplace_back(name, t.detach());
  return out;
}

namespace {

// Dtypes convertible into each other on load: a float64 file loads into a float32 model, but an
// int64 table never silently becomes floating weights.
const char* dtype_category(DType dt) { return is_floating(dt) ? "floating" : dtype_name(dt); }

}  // namespace

void Module::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state, bool strict) {
  // The model's tensors, one slot per distinct tensor, each with all its names (first = canonical).
  std::vector<std::pair<std::string, Tensor>> all;
  collect_state("", all);
  std::vector<Tensor> targets;
  std::vector<std::vector<std::string>> names;
  std::unordered_map<const TensorImpl*, size_t> slot_of_impl;
  std::unordered_map<std::string, size_t> slot_of_name;
  for (auto& [name, t] : all) {
    auto [it, fresh] = slot_of_impl.emplace(t.impl(), targets.size());
    if (fresh) {
      targets.push_back(t);
      names.emplace_back();
    }
    names[it->second].push_back(name);
    slot_of_name.emplace(name, it->second);
  }

  // Validate everything, collecting every problem before touching the model.
  std::vector<std::string> problems, entry_problems;
  std::unordered_map<std::string, size_t> given;  // name -> index in state
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& [name, value] = state[i];
    if (!given.emplace(name, i).second) {
      entry_problems.push_back(detail::concat("duplicate '", name, "'"));
      continue;
    }
    auto slot = slot_of_name.find(name);
    if (slot == slot_of_name.end()) {
      if (strict) entry_problems.push_back(detail::concat("unexpected '", name, "'"));
      continue;
    }
    const Tensor& target = targets[slot->second];
    if (!value.defined()) {
      entry_problems.push_back(detail::concat("'", name, "' is an undefined tensor"));
      continue;
    }
    if (value.shape() != target.shape())
      entry_problems.push_back(detail::concat("'", name, "' has shape ", shape_str(value.shape()),
                                              " but the model expects ", shape_str(target.shape())));
    if (std::string(dtype_category(value.dtype())) != dtype_category(target.dtype()))
      entry_problems.push_back(detail::concat("'", name, "' has dtype ", dtype_name(value.dtype()),
                                              " but the model expects ", dtype_name(target.dtype())));
  }
  std::vector<const Tensor*> sources(targets.size(), nullptr);
  for (size_t s = 0; s < targets.size(); ++s) {
    for (const std::string& name : names[s]) {
      auto it = given.find(name);
      if (it != given.end()) {
        sources[s] = &state[it->second].second;
        break;
      }
    }
    if (!sources[s] && strict) problems.push_back(detail::concat("missing '", names[s].front(), "'"));
  }
  problems.insert(problems.end(), entry_problems.begin(), entry_problems.end());
  if (!problems.empty()) {
    std::string list;
    for (size_t i = 0; i < problems.size(); ++i) list += (i ? "; " : "") + problems[i];
    RG_CHECK(false, "load_state_dict", problems.size(), problems.size() == 1 ? " problem: " : " problems: ", list);
  }

  // Copy in place: handles to the parameters (members, optimizer state) stay valid.
  NoGradGuard no_grad;
  for (size_t s = 0; s < targets.size(); ++s) {
    if (!sources[s]) continue;
    Tensor value = sources[s]->detach();
    if (value.device() != targets[s].device()) value = value.to(targets[s].device());
    targets[s].copy_(value);  // converts the dtype
  }
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  load_state_dict(std::vector<std::pair<std::string, Tensor>>(state.begin(), state.end()), strict);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto list : {named_parameters(), named_buffers()})
    for (auto& [_, t] : list) {
      if (t.device() == device) continue;
      Tensor grad = t.grad();
      t.set_data(t.detach().to(device));
      if (grad.defined()) t.set_grad(grad.to(device));
    }
}

Device device_of(const Module& module) {
  for (const auto& [_, t] : module.named_parameters()) return t.device();
  for (const auto& [_, t] : module.named_buffers()) return t.device();
  return Device::cpu();
}

void Module::to(DType dtype) {
  RG_CHECK_T(DTypeError, is_floating(dtype), "Module.to", "modules convert to floating dtypes only, got ",
             dtype_name(dtype));
  for (auto list : {named_parameters(), named_buffers()})
    for (auto& [_, t] : list)
      if (is_floating(t.dtype())) t.set_data(t.detach().to(dtype));
}

}  // namespace relgrad
