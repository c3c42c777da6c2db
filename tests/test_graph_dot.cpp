// to_dot (autograd/graph_dot.h): the exact DOT text of a small known graph, a node used twice drawn
// once with two edges, tensors with no history, a 100,000-op chain, quoting, and write_dot.
#include <algorithm>

#include "file_testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {
size_t count_of(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + piece.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE("to_dot: the exact text of b = a + a, c = b * b, d = c * k with a constant k") {
  Tensor a = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor k = from_vector<double>({3, 4}, {2});  // needs no gradient
  Tensor b = a + a;
  Tensor c = b * b;
  Tensor d = c * k;
  const std::string expected = R"dot(digraph relgrad {
  node [fontname="Helvetica"];
  leaf0 [label="leaf\n(2)\nrequires_grad", shape=ellipse];
  nograd0 [label="no grad", shape=ellipse, style=dashed, color=grey, fontcolor=grey];
  op0 [label="add\n(2)", shape=box];
  op1 [label="mul\n(2)", shape=box];
  op2 [label="mul\n(2)", shape=box, peripheries=2];
  leaf0 -> op0;
  leaf0 -> op0;
  op0 -> op1;
  op0 -> op1;
  op1 -> op2;
  nograd0 -> op2 [style=dashed, color=grey];
}
)dot";
  CHECK(to_dot(d) == expected);
  // The tape keeps its edges after backward (only the closures are freed): same picture.
  d.sum().backward();
  CHECK(to_dot(d) == expected);
  // An inner tensor is a root of its own, smaller graph.
  CHECK(to_dot(b) == R"dot(digraph relgrad {
  node [fontname="Helvetica"];
  leaf0 [label="leaf\n(2)\nrequires_grad", shape=ellipse];
  op0 [label="add\n(2)", shape=box, peripheries=2];
  leaf0 -> op0;
  leaf0 -> op0;
}
)dot");
}

TEST_CASE("to_dot: a node used twice is one node with two edges, not two copies") {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor y = tanh(x);
  Tensor z = (y * y).sum();  // y feeds mul twice
  const std::string dot = to_dot(z);
  CHECK(count_of(dot, "leaf0 [") == 1);
  CHECK(count_of(dot, "leaf1") == 0);
  CHECK(count_of(dot, "op0 [label=\"tanh\\n(2,3)\"") == 1);
  CHECK(count_of(dot, "op0 -> op1;") == 2);
  CHECK(count_of(dot, "op1 -> op2;") == 1);
  CHECK(count_of(dot, "op3") == 0);
  CHECK(count_of(dot, "op2 [label=\"sum\\n()\", shape=box, peripheries=2]") == 1);
  CHECK(count_of(dot, " -> ") == 4);  // leaf->tanh, tanh->mul twice, mul->sum
}

TEST_CASE("to_dot: a tensor with no history is a single node") {
  Tensor leaf = zeros({2, 3}).requires_grad_();
  CHECK(to_dot(leaf) == R"dot(digraph relgrad {
  node [fontname="Helvetica"];
  leaf0 [label="leaf\n(2,3)\nrequires_grad", shape=ellipse];
}
)dot");
  Tensor plain = ones({4});
  CHECK(to_dot(plain) == R"dot(digraph relgrad {
  node [fontname="Helvetica"];
  nograd0 [label="no grad\n(4)", shape=ellipse, style=dashed, color=grey, fontcolor=grey];
}
)dot");
  // Ops under no_grad record nothing: the result has no history either.
  Tensor made;
  {
    NoGradGuard guard;
    made = leaf * 2.0;
  }
  CHECK(to_dot(made) == to_dot(zeros({2, 3})));
  CHECK_THROWS_WITH_AS(to_dot(Tensor()), doctest::Contains("[to_dot] the tensor is undefined"), Error);
}

TEST_CASE("to_dot: a chain of 100,000 ops is walked without recursion") {
  Tensor x = from_vector<float>({0.5f}, {1}).requires_grad_();
  Tensor y = x;
  const int n = 100000;
  for (int i = 0; i < n; ++i) y = -y;
  const std::string dot = to_dot(y);
  CHECK(count_of(dot, " -> ") == static_cast<size_t>(n));
  CHECK(count_of(dot, "[label=\"neg\\n(1)\"") == static_cast<size_t>(n));
  CHECK(count_of(dot, "leaf0 -> op0;\n") == 1);
  CHECK(count_of(dot, "op99998 -> op99999;\n") == 1);
  CHECK(count_of(dot, "op99999 [label=\"neg\\n(1)\", shape=box, peripheries=2];") == 1);
  CHECK(count_of(dot, "op100000") == 0);
}

TEST_CASE("to_dot: op names are quoted for DOT and each no-grad input is its own node") {
  Tensor a = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor k = from_vector<double>({3, 4}, {2});
  // A hand-recorded op (autograd/node.h) with a name DOT would misread unescaped.
  Tensor out = record(add(a.detach(), k), "my \"add\" \\ op", {k, a, k},
                      [](const Tensor& g) -> TensorList { return {Tensor(), g, Tensor()}; });
  const std::string dot = to_dot(out);
  CHECK(count_of(dot, R"dot(op0 [label="my \"add\" \\ op\n(2)")dot") == 1);
  // Edges keep the op's input order: constant, leaf, constant.
  const size_t first = dot.find("nograd0 -> op0"), leaf = dot.find("leaf0 -> op0"),
               second = dot.find("nograd1 -> op0");
  REQUIRE(first != std::string::npos);
  REQUIRE(leaf != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(first < leaf);
  CHECK(leaf < second);
}

TEST_CASE("to_dot: write_dot writes the same text to a file") {
  TempDir dir;
  Tensor a = ones({3}).requires_grad_();
  Tensor s = (exp(a) * 2.0).sum();
  write_dot(s, dir.file("graph.dot"));
  CHECK(read_bytes(dir.file("graph.dot")) == to_dot(s));
  CHECK_THROWS_AS(write_dot(s, dir.file("no_such_folder/graph.dot")), Error);
}

TEST_CASE("to_dot and to_text: values and gradients on request, and the same graph as text") {
  Tensor a = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor b = a + a;
  Tensor c = b * b;
  GraphOptions with_values;
  with_values.values = true;
  CHECK(to_text(c) == "leaf0  leaf (2) requires_grad\nop0  add (2) <- leaf0, leaf0\nop1  mul (2) <- op0, op0  (root)\n");
  CHECK(to_text(c, with_values) ==
        "leaf0  leaf (2) requires_grad  value [1, 2]\nop0  add (2) <- leaf0, leaf0\n"
        "op1  mul (2) <- op0, op0  (root)  value [4, 16]\n");
  CHECK(count_of(to_dot(c, with_values), "value") == 2);
  c.sum().backward();  // dc/da = 2b · 2 = 8a
  CHECK(to_text(c, with_values) ==
        "leaf0  leaf (2) requires_grad  value [1, 2]  grad [8, 16]\nop0  add (2) <- leaf0, leaf0\n"
        "op1  mul (2) <- op0, op0  (root)  value [4, 16]\n");
  const std::string dot = to_dot(c, with_values);
  CHECK(count_of(dot, "leaf0 [label=\"leaf\\n(2)\\nrequires_grad\\nvalue [1, 2]\\ngrad [8, 16]\", shape=ellipse];") == 1);
  CHECK(count_of(dot, "op1 [label=\"mul\\n(2)\\nvalue [4, 16]\", shape=box, peripheries=2];") == 1);
  CHECK(to_dot(c) == to_dot(c, GraphOptions()));  // without values: the picture of the tests above
  // Long tensors show their first max_values elements; a constant input is named in the text form too.
  GraphOptions three = with_values;
  three.max_values = 3;
  Tensor x = arange(10.0, kFloat64).requires_grad_();
  CHECK(to_text(x, three) == "leaf0  leaf (10) requires_grad  value [0, 1, 2, ...]\n");
  CHECK(to_text(ones({2}), three) == "nograd0  no grad (2)  value [1, 1]\n");
  Tensor y = x * arange(10.0, kFloat64);
  CHECK(to_text(y, three) ==
        "leaf0  leaf (10) requires_grad  value [0, 1, 2, ...]\nop0  mul (10) <- leaf0, nograd0  (root)  value [0, 1, 4, ...]\n");
  CHECK_THROWS_WITH_AS(to_text(Tensor()), doctest::Contains("[to_text] the tensor is undefined"), Error);
}
