// Exercise 01 (after stop 3): sum_to, broadcasting's rule in backward.
//
// When add(a, b) broadcasts a (3, 1) operand against a (1, 4) one, the output and its gradient g are
// (3, 4). The gradient of a is g summed over every dim that broadcasting stretched: the leading dims
// the operand did not have at all, and each dim where the operand has size 1 and g does not. Write
//
//   my_sum_to(grad, shape): grad reduced to `shape`, with keepdim sums (sum(x, dims, true)) and a
//   final reshape(shape). Return grad itself when the shapes already agree.
//
// The check: an add whose backward is your my_sum_to, gradchecked on six pairs of shapes (same
// shapes, a row against a column, a scalar, a missing leading dim, ...). A wrong sum gives a wrong
// Jacobian; a wrong shape makes backward refuse the gradient.
//
// Run: ./build/exercises/01_sum_to        The library's own: autograd/engine.cpp, sum_to.
#include "exercises/exercise.h"

using namespace relgrad;

Tensor my_sum_to(const Tensor& grad, const Shape& shape) {
#ifdef RELGRAD_EXERCISE_REFERENCE
  return sum_to(grad, shape);
#else
  // ---- YOUR CODE (replace the line below) ----
  (void)shape;
  return grad;
  // ---- END OF YOUR CODE ----
#endif
}

// add, with your my_sum_to as the backward's broadcasting rule.
Tensor my_add(const Tensor& a, const Tensor& b) {
  Tensor out = add(a.detach(), b.detach());
  if (!needs_grad({a, b})) return out;
  return record(out, "my_add", {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g) -> TensorList {
    return {my_sum_to(g, sa), my_sum_to(g, sb)};
  });
}

int main() {
  Generator gen(1);
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{5}, {}}, {{2, 1, 3}, {4, 1}}};
  std::vector<std::pair<std::string, exercise::Check>> checks;
  for (const auto& [sa, sb] : pairs)
    checks.push_back({"add " + shape_str(sa) + " + " + shape_str(sb) + " gradchecked", [&, sa = sa, sb = sb] {
                        return exercise::gradchecked([](const TensorList& in) { return my_add(in[0], in[1]); },
                                                     {exercise::leaf(sa, gen), exercise::leaf(sb, gen)});
                      }});
  return exercise::run("exercise 01: sum_to", checks);
}
