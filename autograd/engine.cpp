// The tape and the backward pass: record() appends a Node when an op runs, run_backward() walks the
// nodes reachable from the root in decreasing seq_nr (reverse creation order) and hands each node
// the sum of the gradients its consumers sent it. No recursion anywhere, so graph depth is unlimited.
#include "autograd/engine.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/profiler.h"
#include "core/parallel_for.h"

namespace relgrad {

namespace {
thread_local bool grad_mode_enabled = true;
thread_local const char* running_node = "backward";  // named in SavedTensor's error
std::atomic<uint64_t> next_seq_nr{0};
std::atomic<bool> anomaly_enabled{false};  // process-wide, as torch's AnomalyMode
}  // namespace

bool GradMode::is_enabled() { return grad_mode_enabled; }
void GradMode::set_enabled(bool enabled) { grad_mode_enabled = enabled; }
bool AnomalyMode::is_enabled() { return anomaly_enabled.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled) { anomaly_enabled.store(enabled, std::memory_order_relaxed); }

// ---- non-finite values ---------------------------------------------------------------------------
namespace {
// Non-finite exactly when the exponent bits are all ones. Testing that on the bit patterns with an
// OR-reduction vectorises (float compares in a reduction would not, without -ffast-math), so the
// common all-finite case costs one fast read; only then are NaN and Inf counted.
// Above 2^20 values the read is cut into 8 pieces shared out between the threads (parallel_for).
template <class T, class Bits>
NonFiniteCount count_in(const T* x, int64_t n, Bits exponent) {
  const int64_t pieces = n > (int64_t(1) << 20) ? 8 : 1;
  std::array<bool, 8> hit{};
  parallel_for(pieces, pieces > 1, [&](int64_t p) {
    const int64_t i0 = n * p / pieces, i1 = n * (p + 1) / pieces;
    Bits any = 0;
    for (int64_t i = i0; i < i1; ++i) {
      Bits b;
      std::memcpy(&b, x + i, sizeof b);  // the bit pattern, without breaking aliasing rules
      any |= static_cast<Bits>((b & exponent) == exponent);
    }
    hit[static_cast<size_t>(p)] = any != 0;
  });
  if (std::none_of(hit.begin(), hit.end(), [](bool h) { return h; })) return {};
  NonFiniteCount c;
  for (int64_t i = 0; i < n; ++i) {
    c.nan += std::isnan(x[i]);
    c.inf += std::isinf(x[i]);
  }
  return c;
}
}  // namespace

NonFiniteCount count_nonfinite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return {};
  if (t.device().is_cpu() && t.is_contiguous()) {  // read where it is (all_finite's every step: no copy, no view)
    if (t.dtype() == kFloat64) return count_in(t.data_ptr<double>(), t.numel(), uint64_t(0x7FF0000000000000ULL));
    if (t.dtype() == kFloat32) return count_in(t.data_ptr<float>(), t.numel(), uint32_t(0x7F800000U));
  }
  NoGradGuard no_grad;  // the copies below must not be recorded
  Tensor c = t.detach();
  if (!c.device().is_cpu()) c = c.to(Device::cpu());
  c = c.contiguous();
  if (c.dtype() == kFloat64) return count_in(c.data_ptr<double>(), c.numel(), uint64_t(0x7FF0000000000000ULL));
  return count_in(c.data_ptr<float>(), c.numel(), uint32_t(0x7F800000U));
}

namespace {
std::string shapes_of(const TensorList& tensors) {
  std::string s;
  for (const Tensor& t : tensors) s += (s.empty() ? "" : ", ") + (t.defined() ? shape_str(t.shape()) : "undefined");
  return s.empty() ? "none" : s;
}

std::string counts_text(const NonFiniteCount& c, int64_t numel) {
  return detail::concat(c.total(), " of ", numel, " values are non-finite (", c.nan, " NaN, ", c.inf, " Inf)");
}

// Anomaly mode, forward: `output` was just computed by op `name` from `inputs`.
void check_forward(const Tensor& output, const char* name, const TensorList& inputs) {
  NonFiniteCount c = count_nonfinite(output);
  if (c.total() == 0) return;
  throw NonFiniteError(detail::concat("[anomaly] op '", name, "' produced a non-finite output of shape ",
                                      shape_str(output.shape()), ": ", counts_text(c, output.numel()),
                                      "; its inputs have shapes ", shapes_of(inputs)));
}

// Anomaly mode, backward: the gradients `node` produced from `grad_out`, one per input.
void check_backward(const Node& node, const TensorList& grads, const Tensor& grad_out) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!node.needs_input_grad(i)) continue;  // dropped by the walk anyway
    NonFiniteCount c = count_nonfinite(grads[i]);
    if (c.total() == 0) continue;
    std::string input_shapes;
    for (const Edge& e : node.inputs)
      input_shapes += (input_shapes.empty() ? "" : ", ") + (e.needs_grad() ? shape_str(e.shape) : std::string("-"));
    throw NonFiniteError(detail::concat(
        "[anomaly] the backward of op '", node.name, "' produced a non-finite gradient for its input ", i,
        " of shape ", shape_str(grads[i].shape()), ": ", counts_text(c, grads[i].numel()),
        "; the op's output gradient has shape ", shape_str(grad_out.shape()), " and ",
        count_nonfinite(grad_out).total(), " non-finite values; its inputs have shapes ", input_shapes,
        " ('-': needs no gradient)"));
  }
}
}  // namespace

// ---- Node and SavedTensor ---------------------------------------------------------------------
Node::~Node() {
  // Destroying a node drops its edges, which may destroy the next node, and so on: a long chain
  // would recurse once per node. Instead the first destructor on this thread drains a work list.
  thread_local std::vector<std::shared_ptr<Node>> to_free;
  thread_local bool draining = false;
  for (Edge& e : inputs)
    if (e.node) to_free.push_back(std::move(e.node));
  if (draining) return;
  draining = true;
  while (!to_free.empty()) {
    std::shared_ptr<Node> n = std::move(to_free.back());
    to_free.pop_back();
    n.reset();  // may run ~Node, which only appends to to_free
  }
  draining = false;
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
}

const Tensor& SavedTensor::get() const {
  if (data_.defined())
    RG_CHECK(data_.version() == version_, running_node,
             "a tensor saved for backward was modified by an in-place operation (its version is ", data_.version(),
             ", it was ", version_, " when saved); clone() it before modifying, or modify it out of place");
  return data_;
}

bool needs_grad(const TensorList& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(Tensor output, const char* name, const TensorList& inputs, BackwardFn backward) {
  if (AnomalyMode::is_enabled()) check_forward(output, name, inputs);
  auto node = std::make_shared<Node>();
  node->name = name;
  node->seq_nr = next_seq_nr++;
  for (const Tensor& in : inputs) {
    Edge e;
    if (in.defined() && in.requires_grad()) {
      e.shape = in.shape();
      if (in.grad_fn()) e.node = in.grad_fn();
      else e.leaf = in.impl_ptr();
    }
    node->inputs.push_back(std::move(e));
  }
  node->backward = std::move(backward);
  output.impl()->grad_fn = std::move(node);
  output.impl()->requires_grad = true;
  return output;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  RG_CHECK_T(ShapeError, lead >= 0, "sum_to", "cannot reduce gradient of shape ", shape_str(grad.shape()), " to ",
             shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(d);
  Tensor reduced = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return reduced.reshape(shape);
}

// ---- backward ---------------------------------------------------------------------------------
namespace {

// Nodes reachable from `root`, sorted in decreasing seq_nr: every consumer comes before its producers.
std::vector<Node*> tape_order(Node* root) {
  std::vector<Node*> order, stack{root};
  std::unordered_set<Node*> seen{root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->inputs)
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->seq_nr > b->seq_nr; });
  return order;
}

// True when `g` (a gradient a backward returned) is the only holder of its data: its TensorImpl held
// once (by the caller's list) and its storage by it alone, dense from the storage's start.
bool stealable(const Tensor& g) {
  const TensorImpl* impl = g.impl();
  return g.impl_ptr().use_count() == 1 && impl->storage.use_count() == 1 && !impl->grad_fn && impl->offset == 0 &&
         g.is_contiguous() && impl->storage->nbytes() == static_cast<size_t>(g.numel()) * dtype_size(g.dtype());
}

void accumulate(Tensor& slot, const Tensor& g) {  // a profile row of its own, as PyTorch's AccumulateGrad
  ProfileScope scope("accumulate_grad");
  slot = slot.defined() ? add(slot, g) : g;
}

// The common walk of backward() and grad(): `deliver(leaf, g)` receives each leaf's gradient;
// `captured` (may be null) receives the total gradient reaching the listed nodes.
template <class Deliver>
void walk(const Tensor& root, const Tensor& grad_root, bool retain_graph, Deliver deliver,
          std::unordered_map<Node*, Tensor>* captured) {
  RG_CHECK(root.requires_grad(), "backward", "the tensor does not require grad and has no grad_fn");
  Tensor g0 = grad_root;
  if (!g0.defined()) {
    RG_CHECK_T(ShapeError, root.numel() == 1, "backward",
               "grad can be implicitly created only for one-element outputs; got shape ", shape_str(root.shape()),
               ", pass a gradient");
    g0 = ones_like(root);
  }
  RG_CHECK_T(ShapeError, g0.shape() == root.shape(), "backward", "gradient shape ", shape_str(g0.shape()),
             " differs from output shape ", shape_str(root.shape()));
  RG_CHECK_T(DTypeError, g0.dtype() == root.dtype(), "backward", "gradient dtype ", dtype_name(g0.dtype()),
             " differs from output dtype ", dtype_name(root.dtype()));
  NoGradGuard no_grad;  // the backward pass itself records nothing
  running_node = "backward";
  if (!root.grad_fn()) {  // backward on a leaf: its gradient is grad_root itself
    deliver(root.impl_ptr(), g0);
    return;
  }
  std::unordered_map<Node*, Tensor> pending;
  pending[root.grad_fn().get()] = g0;
  for (Node* node : tape_order(root.grad_fn().get())) {
    auto it = pending.find(node);
    Tensor g_out = it == pending.end() ? Tensor() : std::move(it->second);
    if (it != pending.end()) pending.erase(it);
    if (captured && captured->count(node)) (*captured)[node] = g_out;
    if (g_out.defined()) {
      RG_CHECK(node->backward != nullptr, "backward",
               "trying to backward through the graph a second time (its saved tensors were freed after the first "
               "backward, at op '", node->name, "'); call backward with retain_graph=true the first time");
      running_node = node->name;
      TensorList g_in = [&] { ProfileScope op(node->name, /*backward=*/true); return node->backward(g_out); }();
      running_node = "backward";
      RG_CHECK(g_in.size() == node->inputs.size(), node->name, "backward returned ", g_in.size(),
               " gradients for ", node->inputs.size(), " inputs");
      if (AnomalyMode::is_enabled()) check_backward(*node, g_in, g_out);
      g_out = Tensor();  // let go of it: a gradient that is a view of it can then be kept as it is (stealable)
      for (size_t i = 0; i < g_in.size(); ++i) {
        const Edge& e = node->inputs[i];
        if (!e.needs_grad() || !g_in[i].defined()) continue;
        RG_CHECK_T(ShapeError, g_in[i].shape() == e.shape, node->name, "backward produced a gradient of shape ",
                   shape_str(g_in[i].shape()), " for input ", i, " of shape ", shape_str(e.shape));
        if (e.node) accumulate(pending[e.node.get()], g_in[i]);
        else deliver(e.leaf, g_in[i]);
      }
    }
    if (!retain_graph) node->backward = nullptr;  // frees the saved tensors
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph) {
  walk(root, grad_root, retain_graph,
       [](const std::shared_ptr<TensorImpl>& leaf, const Tensor& g) {
         ProfileScope scope("accumulate_grad");
         // .grad accumulates across backward calls, in a tensor nothing else refers to: g itself where
         // nothing else does (neither g nor its storage is held elsewhere: a view's, a saved tensor's or
         // another input's gradient), as PyTorch's AccumulateGrad steals it; otherwise a copy.
         Tensor slot(leaf->grad);
         if (slot.defined()) slot = add(slot, g);
         else slot = stealable(g) ? g : g.clone();
         leaf->grad = slot.impl_ptr();
       },
       nullptr);
}

TensorList grad(const Tensor& root, const TensorList& inputs, const Tensor& grad_root, bool retain_graph) {
  std::unordered_map<TensorImpl*, size_t> leaf_index;
  std::unordered_map<Node*, Tensor> captured;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RG_CHECK(inputs[i].requires_grad(), "grad", "input ", i, " does not require grad");
    if (inputs[i].grad_fn()) captured[inputs[i].grad_fn().get()] = Tensor();
    else leaf_index[inputs[i].impl()] = i;
  }
  TensorList result(inputs.size());
  walk(root, grad_root, retain_graph,
       [&](const std::shared_ptr<TensorImpl>& leaf, const Tensor& g) {
         auto it = leaf_index.find(leaf.get());
         if (it != leaf_index.end()) accumulate(result[it->second], g);
       },
       &captured);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].grad_fn()) result[i] = captured[inputs[i].grad_fn().get()];
  return result;
}

}  // namespace relgrad
