// Example 02: the tape, walked by hand. Every op on a tensor that requires grad records a Node
// (autograd/node.h): its name, a sequence number, one Edge per input (to the node that made the
// input, or to the leaf whose .grad collects) and a backward closure. Here
//   a = 3 (a leaf),   b = a + a,   c = b * b
// and by hand: dc/db = 2b = 12, db/da = 2, so dc/da = 2b * 2 = 8a = 24.
// Both a and b are used twice, so two gradients arrive at each: they must be ADDED. Overwriting
// the first with the second (micrograd's classic `grad = ...` instead of `grad += ...`) keeps
// half at each double use: 12 -> 6 at b, and a then gets 6, a quarter of 24.
// The program draws the graph (autograd/graph_dot.h), runs the nodes' own backward closures in
// tape order both ways, then checks that c.backward() agrees with the hand-worked 24.
//
// Run: ./build/examples/02_tape_by_hand [graph.dot]   (default: relgrad_02_graph_uid<your uid>.dot in the temp dir)
// expect: step 1: mul .*gets 1, sends 6 to add and 6 to add
// expect: step 2: add .*gets 12, sends 12 to leaf a and 12 to leaf a
// expect: walked by hand, accumulating: dc/da = 24
// expect: walked by hand, overwriting \(the bug\): dc/da = 6
// expect: by hand 8a = 24, engine a\.grad\(\) = 24: gradients agree: yes
// expect: op0 -> op1
// expect: leaf0  leaf \(\) requires_grad  value \[3\]  grad \[24\]
// expect: wrote the graph to .*[.]dot
// expect: (rendered it to .*[.]png|install graphviz to render it)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include <unistd.h>

#include "relgrad.h"

using namespace relgrad;

namespace {

// Every node reachable from `root`, latest first: decreasing seq_nr is the order backward runs
// them in (an op's inputs always exist before it). A work list, not recursion, finds them.
std::vector<Node*> tape_of(const Tensor& root) {
  std::vector<Node*> tape{root.grad_fn().get()};
  std::set<Node*> seen{tape[0]};
  for (size_t i = 0; i < tape.size(); ++i)
    for (const Edge& e : tape[i]->inputs)
      if (e.node && seen.insert(e.node.get()).second) tape.push_back(e.node.get());
  std::sort(tape.begin(), tape.end(), [](Node* x, Node* y) { return x->seq_nr > y->seq_nr; });
  return tape;
}

// What the engine does (autograd/engine.cpp), spelled out: hand each node the gradient its
// consumers sent it, run its closure, pass each result down its edge. `accumulate` false is the bug.
double walk_by_hand(const std::vector<Node*>& tape, bool accumulate, bool verbose) {
  NoGradGuard no_grad;  // the backward pass records nothing
  std::map<Node*, Tensor> pending{{tape[0], scalar_tensor(1.0, kFloat64)}};  // dc/dc = 1
  Tensor leaf_grad;
  auto arrive = [&](Tensor& slot, const Tensor& g) { slot = accumulate && slot.defined() ? slot + g : g; };
  for (size_t step = 0; step < tape.size(); ++step) {
    Node* node = tape[step];
    TensorList grads = node->backward(pending[node]);
    if (verbose)
      std::printf("step %zu: %s (seq_nr %llu) gets %g, sends", step + 1, node->name,
                  static_cast<unsigned long long>(node->seq_nr), pending[node].item());
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& e = node->inputs[i];
      if (verbose)
        std::printf("%s %g to %s", i ? " and" : "", grads[i].item(), e.node ? e.node->name : "leaf a");
      arrive(e.node ? pending[e.node.get()] : leaf_grad, grads[i]);
    }
    if (verbose) std::printf("\n");
  }
  return leaf_grad.item();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Tensor a = scalar_tensor(3.0, kFloat64).requires_grad_();
    Tensor b = a + a;
    Tensor c = b * b;
    std::printf("a = %g, b = a + a = %g, c = b * b = %g\n\n", a.item(), b.item(), c.item());

    // The graph: one box per op, the leaf a, two arrows wherever an input is used twice.
    std::cout << to_dot(c) << "\n";
    const std::string dot_path =
        argc > 1 ? argv[1]  // else one file per user: a classroom shares the temp dir
                 : (std::filesystem::temp_directory_path() / ("relgrad_02_graph_uid" + std::to_string(getuid()) + ".dot")).string();
    write_dot(c, dot_path);
    std::printf("wrote the graph to %s\n", dot_path.c_str());
    const std::string png_path = dot_path.substr(0, dot_path.rfind('.')) + ".png";
    if (std::system("command -v dot > /dev/null 2>&1") == 0 &&
        std::system(("dot -Tpng '" + dot_path + "' -o '" + png_path + "'").c_str()) == 0)
      std::printf("rendered it to %s\n\n", png_path.c_str());
    else  // the same graph as text (to_text), so a terminal without Graphviz still shows it
      std::printf("Graphviz's dot is not on PATH: install graphviz to render it (dot -Tpng %s -o %s)\n%s\n",
                  dot_path.c_str(), png_path.c_str(), to_text(c).c_str());

    // The tape in the order backward walks it, run by hand both ways.
    std::vector<Node*> tape = tape_of(c);
    const double by_hand = walk_by_hand(tape, /*accumulate=*/true, /*verbose=*/true);
    const double buggy = walk_by_hand(tape, /*accumulate=*/false, /*verbose=*/false);
    std::printf("walked by hand, accumulating: dc/da = %g\n", by_hand);
    std::printf("walked by hand, overwriting (the bug): dc/da = %g\n\n", buggy);

    // The engine: c.backward() does the same walk and adds the result into a.grad().
    c.backward();
    const double engine = a.grad().item(), worked_out = 8 * a.item();
    const bool agree = engine == worked_out && by_hand == worked_out;
    std::printf("by hand 8a = %g, engine a.grad() = %g: gradients agree: %s\n", worked_out, engine,
                agree ? "yes" : "no");
    // The graph again, with the leaf's value and gradient and the root's value (GraphOptions::values).
    GraphOptions with_values;
    with_values.values = true;
    std::printf("\n%s", to_text(c, with_values).c_str());
    if (!agree || buggy != worked_out / 4) {
      std::printf("the walk did not give what the text says\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
