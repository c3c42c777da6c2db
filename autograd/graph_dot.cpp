// to_dot / to_text / write_dot (autograd/graph_dot.h): collect the nodes reachable from the root with
// an explicit stack (as the engine does), number them by seq_nr, name every input once, then print.
#include "autograd/graph_dot.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/grad_mode.h"
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

// "[1, 2, 3]", the first max_values elements in row-major order, then "...": copied to the host as
// float64 (any device or dtype).
std::string values_text(const Tensor& t, int64_t max_values) {
  NoGradGuard no_grad;
  const int64_t n = std::min(t.numel(), std::max<int64_t>(max_values, 0));
  std::vector<double> v = t.detach().reshape({-1}).narrow(0, 0, n).to(Device::cpu()).to(kFloat64).contiguous()
                              .to_vector<double>();
  std::ostringstream out;
  out << "[";
  for (int64_t i = 0; i < n; ++i) out << (i ? ", " : "") << v[i];
  out << (n < t.numel() ? (n ? ", ...]" : "...]") : "]");
  return out.str();
}

// What the graph shows of a tensor beyond its shape: its values and, for a leaf, its gradient (numbers,
// brackets and commas: nothing DOT needs escaped).
std::string values_of(const Tensor& t, const GraphOptions& o, const char* separator) {
  if (!o.values) return "";
  std::string s = std::string(separator) + "value " + values_text(t, o.max_values);
  if (t.impl()->grad) s += std::string(separator) + "grad " + values_text(Tensor(t.impl()->grad), o.max_values);
  return s;
}

// One input of an op, named: opN (a node), leafN (a leaf that receives a gradient), nogradN (neither).
struct Input {
  std::string id;
  bool is_new = false;  // the first use of this leaf or no-grad input
  const Edge* edge = nullptr;
};

// The tape behind a root, in run order, with every input named.
struct Graph {
  std::vector<const Node*> nodes;  // in seq_nr order: the root's last
  std::unordered_map<const Node*, Shape> shape_of;
  std::vector<std::vector<Input>> inputs;  // per node, one per Edge
};

Graph collect(const Tensor& root) {
  Graph g;
  const Node* top = root.grad_fn().get();
  std::vector<const Node*> stack{top};
  g.nodes = {top};
  g.shape_of = {{top, root.shape()}};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->inputs)
      if (e.node && g.shape_of.emplace(e.node.get(), e.shape).second) {
        g.nodes.push_back(e.node.get());
        stack.push_back(e.node.get());
      }
  }
  std::sort(g.nodes.begin(), g.nodes.end(), [](const Node* a, const Node* b) { return a->seq_nr < b->seq_nr; });
  std::unordered_map<const Node*, size_t> op_id;
  for (size_t i = 0; i < g.nodes.size(); ++i) op_id[g.nodes[i]] = i;
  // Inputs in the order the ops (in run order) first use them.
  std::unordered_map<const TensorImpl*, size_t> leaf_id;
  size_t no_grad_count = 0;
  for (const Node* n : g.nodes) {
    std::vector<Input>& in = g.inputs.emplace_back();
    for (const Edge& e : n->inputs) {
      if (e.node) {
        in.push_back({"op" + std::to_string(op_id[e.node.get()]), false, &e});
      } else if (e.leaf) {
        auto [it, is_new] = leaf_id.emplace(e.leaf.get(), leaf_id.size());
        in.push_back({"leaf" + std::to_string(it->second), is_new, &e});
      } else {
        in.push_back({"nograd" + std::to_string(no_grad_count++), true, &e});
      }
    }
  }
  return g;
}

const char* kLeafStyle = "shape=ellipse";
const char* kNoGradStyle = "shape=ellipse, style=dashed, color=grey, fontcolor=grey";

std::string leaf_line(const std::string& id, const Tensor& leaf, const Shape& shape, const GraphOptions& o) {
  const std::string values = leaf.defined() ? values_of(leaf, o, "\\n") : "";
  return "  " + id + " [label=\"leaf\\n" + shape_str(shape) + "\\nrequires_grad" + values + "\", " +
         kLeafStyle + "];\n";
}

std::string no_grad_line(const std::string& id, const std::string& label) {
  return "  " + id + " [label=\"" + label + "\", " + kNoGradStyle + "];\n";
}

}  // namespace

std::string to_dot(const Tensor& root, const GraphOptions& options) {
  RG_CHECK(root.defined(), "to_dot", "the tensor is undefined");
  std::ostringstream out;
  out << "digraph relgrad {\n  node [fontname=\"Helvetica\"];\n";
  if (!root.grad_fn()) {  // no history: the tensor alone
    if (root.requires_grad()) out << leaf_line("leaf0", root, root.shape(), options);
    else out << no_grad_line("nograd0", "no grad\\n" + shape_str(root.shape()));
    out << "}\n";
    return out.str();
  }
  const Graph g = collect(root);
  std::ostringstream inputs, ops, edges;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node* n = g.nodes[i];
    const bool is_root = i + 1 == g.nodes.size();
    const std::string id = "op" + std::to_string(i), values = is_root ? values_of(root, options, "\\n") : "";
    ops << "  " << id << " [label=\"" << escaped(n->name ? n->name : "") << "\\n" << shape_str(g.shape_of.at(n))
        << values << "\", shape=box" << (is_root ? ", peripheries=2" : "") << "];\n";
    for (const Input& in : g.inputs[i]) {  // one edge per Edge: a node used twice gets two arrows
      if (in.edge->leaf && in.is_new) inputs << leaf_line(in.id, Tensor(in.edge->leaf), in.edge->shape, options);
      if (!in.edge->needs_grad()) inputs << no_grad_line(in.id, "no grad");
      edges << "  " << in.id << " -> " << id << (in.edge->needs_grad() ? "" : " [style=dashed, color=grey]") << ";\n";
    }
  }
  out << inputs.str() << ops.str() << edges.str() << "}\n";
  return out.str();
}

std::string to_text(const Tensor& root, const GraphOptions& options) {
  RG_CHECK(root.defined(), "to_text", "the tensor is undefined");
  if (!root.grad_fn())
    return (root.requires_grad() ? "leaf0  leaf " + shape_str(root.shape()) + " requires_grad"
                                 : "nograd0  no grad " + shape_str(root.shape())) +
           values_of(root, options, "  ") + "\n";
  const Graph g = collect(root);
  std::ostringstream out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const Input& in : g.inputs[i])
      if (in.is_new && in.edge->leaf)
        out << in.id << "  leaf " << shape_str(in.edge->shape) << " requires_grad"
            << values_of(Tensor(in.edge->leaf), options, "  ") << "\n";
    const Node* n = g.nodes[i];
    const bool is_root = i + 1 == g.nodes.size();
    out << "op" << i << "  " << (n->name ? n->name : "") << " " << shape_str(g.shape_of.at(n)) << " <-";
    for (size_t k = 0; k < g.inputs[i].size(); ++k) out << (k ? ", " : " ") << g.inputs[i][k].id;
    out << (is_root ? "  (root)" + values_of(root, options, "  ") : "") << "\n";
  }
  return out.str();
}

void write_dot(const Tensor& root, const std::string& path, const GraphOptions& options) {
  write_file_atomic(path, to_dot(root, options), "write_dot");
}

}  // namespace relgrad
