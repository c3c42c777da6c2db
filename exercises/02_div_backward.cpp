// Exercise 02 (after stop 4): the backward of div.
//
// out = a / b, elementwise with broadcasting. Given g = dL/dout (out's shape), write
//
//   my_div_backward(g, a, b) = {dL/da, dL/db}, each of its operand's shape.
//
// Hints: d(a/b)/da = 1/b and d(a/b)/db = −a/b²; an operand that was broadcast gets the sum over the
// stretched dims (sum_to(x, shape), stop 3 or exercise 01). Use ops (div, mul, neg, sum_to), so that
// your backward runs on any device.
//
// The check: a div whose backward is yours, gradchecked on four pairs of shapes, b kept away from 0.
//
// Run: ./build/exercises/02_div_backward    The library's own: autograd/ops/elementwise.cpp, div.
#include "exercises/exercise.h"

using namespace relgrad;

TensorList my_div_backward(const Tensor& g, const Tensor& a, const Tensor& b) {
#ifdef RELGRAD_EXERCISE_REFERENCE
  // The library's div, differentiated by the engine on fresh leaves: its backward, not a copy of it.
  EnableGradGuard grad_on;
  Tensor a2 = a.detach().requires_grad_(), b2 = b.detach().requires_grad_();
  return grad(div(a2, b2), {a2, b2}, g);
#else
  // ---- YOUR CODE (replace the line below) ----
  return {sum_to(g, a.shape()), sum_to(g, b.shape())};
  // ---- END OF YOUR CODE ----
#endif
}

Tensor my_div(const Tensor& a, const Tensor& b) {
  Tensor out = div(a.detach(), b.detach());
  if (!needs_grad({a, b})) return out;
  return record(out, "my_div", {a, b}, [a = SavedTensor(a), b = SavedTensor(b)](const Tensor& g) -> TensorList {
    return my_div_backward(g, a.get(), b.get());
  });
}

int main() {
  Generator gen(2);
  const std::vector<std::pair<Shape, Shape>> pairs = {{{2, 3}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3}, {3}}, {{4}, {}}};
  std::vector<std::pair<std::string, exercise::Check>> checks;
  for (const auto& [sa, sb] : pairs)
    checks.push_back({"a " + shape_str(sa) + " / b " + shape_str(sb) + " gradchecked", [&, sa = sa, sb = sb] {
                        return exercise::gradchecked([](const TensorList& in) { return my_div(in[0], in[1]); },
                                                     {exercise::leaf(sa, gen), exercise::leaf(sb, gen, /*positive=*/true)});
                      }});
  return exercise::run("exercise 02: div's backward", checks);
}
