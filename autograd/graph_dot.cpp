// to_dot / write_dot (autograd/graph_dot.h): collect the nodes reachable from the root with an
// explicit stack (as the engine does), number them by seq_nr, then print inputs, ops and edges.
#include "autograd/graph_dot.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/node.h"
#include "core/base/error.h"
#include "core/file_io.h"

namespace relgrad {

namespace {

// A DOT string literal's body: quotes and backslashes escaped.
std::string escaped(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

const char* kLeafStyle = "shape=ellipse";
const char* kNoGradStyle = "shape=ellipse, style=dashed, color=grey, fontcolor=grey";

std::string leaf_line(const std::string& id, const Shape& shape) {
  return "  " + id + " [label=\"leaf\\n" + shape_str(shape) + "\\nrequires_grad\", " + kLeafStyle + "];\n";
}

std::string no_grad_line(const std::string& id, const std::string& label) {
  return "  " + id + " [label=\"" + label + "\", " + kNoGradStyle + "];\n";
}

}  // namespace

std::string to_dot(const Tensor& root) {
  RG_CHECK(root.defined(), "to_dot", "the tensor is undefined");
  std::ostringstream out;
  out << "digraph relgrad {\n  node [fontname=\"Helvetica\"];\n";
  if (!root.grad_fn()) {  // no history: the tensor alone
    if (root.requires_grad()) out << leaf_line("leaf0", root.shape());
    else out << no_grad_line("nograd0", "no grad\\n" + shape_str(root.shape()));
    out << "}\n";
    return out.str();
  }

  // Every node reachable from the root, and each one's output shape (from the edges pointing at it).
  Node* top = root.grad_fn().get();
  std::vector<Node*> nodes{top}, stack{top};
  std::unordered_map<const Node*, Shape> shape_of{{top, root.shape()}};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->inputs)
      if (e.node && shape_of.emplace(e.node.get(), e.shape).second) {
        nodes.push_back(e.node.get());
        stack.push_back(e.node.get());
      }
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->seq_nr < b->seq_nr; });
  std::unordered_map<const Node*, size_t> op_id;
  for (size_t i = 0; i < nodes.size(); ++i) op_id[nodes[i]] = i;

  // Inputs in the order the ops (in run order) first use them; one edge per Edge, so a node used
  // twice gets two arrows.
  std::ostringstream inputs, ops, edges;
  std::unordered_map<const TensorImpl*, size_t> leaf_id;
  size_t no_grad_count = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    const std::string id = "op" + std::to_string(i);
    ops << "  " << id << " [label=\"" << escaped(n->name ? n->name : "") << "\\n" << shape_str(shape_of[n])
        << "\", shape=box" << (n == top ? ", peripheries=2" : "") << "];\n";
    for (const Edge& e : n->inputs) {
      if (e.node) {
        edges << "  op" << op_id[e.node.get()] << " -> " << id << ";\n";
      } else if (e.leaf) {
        auto [it, is_new] = leaf_id.emplace(e.leaf.get(), leaf_id.size());
        const std::string from = "leaf" + std::to_string(it->second);
        if (is_new) inputs << leaf_line(from, e.shape);
        edges << "  " << from << " -> " << id << ";\n";
      } else {
        const std::string from = "nograd" + std::to_string(no_grad_count++);
        inputs << no_grad_line(from, "no grad");
        edges << "  " << from << " -> " << id << " [style=dashed, color=grey];\n";
      }
    }
  }
  out << inputs.str() << ops.str() << edges.str() << "}\n";
  return out.str();
}

void write_dot(const Tensor& root, const std::string& path) {
  write_file_atomic(path, to_dot(root), "write_dot");
}

}  // namespace relgrad
