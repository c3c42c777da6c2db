// to_dot: the tape behind a tensor as a Graphviz DOT graph, to see what backward will walk.
//
//   Tensor a = ones({2}).requires_grad_();
//   Tensor c = (a + a) * (a + a);
//   std::cout << to_dot(c);      // or write_dot(c, "graph.dot"); then: dot -Tpng graph.dot -o graph.png
//
// What is drawn (edges point the way data flows, from an op's inputs to the op):
//   - one box per recorded op (autograd/node.h's Node), labelled with its name and output shape; the
//     root's box has a double border. A node used twice (b = a + a) is drawn once, with two edges;
//   - one ellipse per leaf whose .grad receives a gradient: "leaf", its shape, "requires_grad";
//   - one grey dashed "no grad" ellipse per op input that needs no gradient (a constant, or an
//     optional input left out): its Edge records nothing else, so two such inputs of the same tensor
//     are drawn as two.
// A tensor with no history gives a single ellipse: the leaf itself, or "no grad" and its shape.
//
// With GraphOptions::values, each leaf also shows its values and, once a backward has reached it, its
// .grad, and the root shows its value: the first max_values elements in row-major order, then "...".
// The ops in between show none: the tape keeps no op's output (only what each backward saved).
//
// to_text is the same graph as plain text, one line per leaf and per op in run order, for a terminal
// without Graphviz:
//   leaf0  leaf (2) requires_grad  value [1, 2]  grad [8, 16]
//   op0  add (2) <- leaf0, leaf0
//   op1  mul (2) <- op0, op0  (root)  value [4, 16]
//
// Deterministic: ops are numbered op0, op1, ... in the order they ran (seq_nr), leaves and no-grad
// inputs leaf0, ..., nograd0, ... in the order those ops first use them, so the same program gives
// the same text. The walk keeps an explicit stack, so a 100,000-op chain is fine.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace relgrad {

struct GraphOptions {
  bool values = false;      // leaves' values and gradients, and the root's value
  int64_t max_values = 6;   // elements shown of each
};

std::string to_dot(const Tensor& root, const GraphOptions& options = {});
std::string to_text(const Tensor& root, const GraphOptions& options = {});

// Writes to_dot(root, options) to `path` atomically (core/file_io.h: a crash never leaves half a file).
void write_dot(const Tensor& root, const std::string& path, const GraphOptions& options = {});

}  // namespace relgrad
