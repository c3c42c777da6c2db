// Node: one recorded op on the tape.
//
// Every differentiable op that runs with grad mode on and an input that requires grad creates one
// Node for its (single) output. The node holds:
//   - seq_nr: a global counter at creation. An op's inputs always exist before it, so walking the
//     nodes in decreasing seq_nr is a valid reverse topological order (the tape order) and needs no
//     recursion;
//   - one Edge per op input: where that input's gradient goes (the node that made it, or the leaf
//     tensor whose .grad accumulates it, or nowhere);
//   - backward: a closure mapping the output's gradient to one gradient per input. The closure
//     captures exactly what it needs, as SavedTensor (a version-checked, history-free alias).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "autograd/profiler.h"  // every op opens an RG_PROFILE_OP scope
#include "core/tensor.h"

namespace relgrad {

struct Edge {
  std::shared_ptr<Node> node;        // gradient flows to this node ...
  std::shared_ptr<TensorImpl> leaf;  // ... or accumulates into this leaf's .grad
  Shape shape;                       // the input's shape (the gradient must match it)
  bool needs_grad() const { return node != nullptr || leaf != nullptr; }
};

// grads_in = backward(grad_out): one entry per input; an undefined Tensor means "no gradient".
using BackwardFn = std::function<TensorList(const Tensor& grad_out)>;

struct Node {
  const char* name = "";
  uint64_t seq_nr = 0;
  std::vector<Edge> inputs;
  BackwardFn backward;  // reset to null once the graph is freed (after a backward without retain_graph)

  bool needs_input_grad(size_t i) const { return i < inputs.size() && inputs[i].needs_grad(); }
  // Frees the node's input chain iteratively: a chain of 100,000 nodes must not recurse 100,000 deep.
  ~Node();
};

// A tensor saved for backward: an alias of its data without autograd history (so the graph holds
// no cycle), plus the storage version at save time, to catch in-place modification.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t);  // NOLINT: implicit, so capture lists stay short
  // The saved data; throws if any view of its storage was modified in place since it was saved.
  const Tensor& get() const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
};

// True when grad mode is on and any of `inputs` requires grad: the op must record a node.
bool needs_grad(const TensorList& inputs);

// Attaches a new Node to `output` (which must be freshly created by the op) and marks it as
// requiring grad. Call only when needs_grad(inputs). Returns output for chaining. With anomaly
// detection on (autograd/grad_mode.h) it first throws NonFiniteError if `output` holds NaN/Inf.
Tensor record(Tensor output, const char* name, const TensorList& inputs, BackwardFn backward);

// The broadcasting rule of backward, in one place: sums `grad` over the dims that broadcasting
// added or expanded, so that the result has `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace relgrad
