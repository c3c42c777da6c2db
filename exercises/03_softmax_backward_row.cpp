// Exercise 03 (after stop 10): one row of the softmax's backward.
//
// y = softmax(x) over a row of C values. Given the row y (the forward's output, all the backward
// needs) and g = dL/dy, write
//
//   my_softmax_backward_row(y, g, gx, C): gx = dL/dx, without building the C × C Jacobian.
//
// Hint: dy_c/dx_k = y_c ([c == k] − y_k). Contract it with g and look for a sum that every entry
// shares.
//
// The check: a softmax over the last dim whose backward runs your row function on every row,
// gradchecked on rows of 1, 2, 5 and 17 values (and a batch of rows with large logits).
//
// Run: ./build/exercises/03_softmax_backward_row   The library's own: core/cpu/softmax.h,
// softmax_backward_row.
#include "core/cpu/softmax.h"
#include "exercises/exercise.h"

using namespace relgrad;

void my_softmax_backward_row(const double* y, const double* g, double* gx, int64_t C) {
#ifdef RELGRAD_EXERCISE_REFERENCE
  cpu::softmax_backward_row<double>(y, g, gx, C, /*log_=*/false);
#else
  // ---- YOUR CODE (replace the loop below) ----
  (void)y;
  for (int64_t c = 0; c < C; ++c) gx[c] = g[c];
  // ---- END OF YOUR CODE ----
#endif
}

// softmax over the last dim (float64 on the CPU), with your row function as its backward.
Tensor my_softmax(const Tensor& x) {
  Tensor y = softmax(x.detach(), -1).contiguous();
  if (!needs_grad({x})) return y;
  return record(y, "my_softmax", {x}, [y = SavedTensor(y)](const Tensor& g) -> TensorList {
    Tensor yv = y.get(), gc = g.contiguous(), gx = empty(yv.shape(), kFloat64);
    const int64_t C = yv.size(-1), rows = yv.numel() / C;
    for (int64_t r = 0; r < rows; ++r)
      my_softmax_backward_row(yv.data_ptr<double>() + r * C, gc.data_ptr<double>() + r * C,
                              gx.data_ptr<double>() + r * C, C);
    return {gx};
  });
}

int main() {
  Generator gen(3);
  std::vector<std::pair<std::string, exercise::Check>> checks;
  for (const Shape& shape : std::vector<Shape>{{1}, {2}, {5}, {3, 17}})
    checks.push_back({"softmax over " + shape_str(shape) + " gradchecked", [&, shape = shape] {
                        return exercise::gradchecked([](const TensorList& in) { return my_softmax(in[0]); },
                                                     {exercise::leaf(shape, gen)});
                      }});
  checks.push_back({"softmax of large logits (4, 6) gradchecked", [&] {
                      Tensor x = (exercise::leaf({4, 6}, gen) * 20.0).detach().requires_grad_();
                      return exercise::gradchecked([](const TensorList& in) { return my_softmax(in[0]); }, {x});
                    }});
  return exercise::run("exercise 03: a softmax backward row", checks);
}
