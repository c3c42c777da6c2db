// Example 03: write your own differentiable op, the way relgrad's own ops are written
// (autograd/ops/elementwise.cpp). The recipe, for cube(x) = x^3:
//   1. compute the forward WITHOUT recording it (on detached tensors, or with a kernel);
//   2. if no input needs a gradient, return the result: no node, no cost;
//   3. otherwise record(output, name, inputs, backward) (autograd/node.h): one node on the tape,
//      whose closure maps dL/dy to one dL/d(input) per input. It captures what it needs as
//      SavedTensor (a detached alias, so the graph holds no cycle, with a version stamp that
//      catches an in-place change before backward);
//   4. gradcheck it (autograd/gradcheck.h): compares backward with central finite differences in
//      float64. A wrong backward (2x^2 instead of 3x^2 below) is caught, and the report names the
//      worst Jacobian entry.
//
// Run: ./build/examples/03_your_own_op   (exits 1 if the right op fails or the wrong one passes)
// expect: cube matches pow\(x, 3\) forward and backward: yes
// expect: gradcheck cube: passed
// expect: gradcheck cube_wrong: caught.*Jacobian mismatch at input 0 element [0-9]+, output element [0-9]+
// expect: analytical [-0-9.e]+, numerical [-0-9.e]+
// expect: modified in place after the forward: refused, .*modified by an in-place operation
// expect: op0 \[label="cube
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "relgrad.h"

using namespace relgrad;

namespace {

// y = x^3, dy/dx = 3x^2.
Tensor cube(const Tensor& x) {
  Tensor plain = x.detach();          // 1. forward on a history-free alias: mul records nothing
  Tensor y = plain * plain * plain;
  if (!needs_grad({x})) return y;     // 2. nothing to differentiate
  // 3. backward: g is dL/dy, of y's shape; the result is dL/dx = g * 3x^2, of x's shape. It is
  //    written with ops, so it runs on any device; the engine runs it with grad mode off.
  return record(y, "cube", {x}, [x = SavedTensor(x)](const Tensor& g) -> TensorList {
    const Tensor& xv = x.get();       // throws if x was modified in place since the forward
    return {g * xv * xv * 3.0};
  });
}

// The same op with the classic slip in its backward: 2x^2 instead of 3x^2.
Tensor cube_wrong(const Tensor& x) {
  Tensor plain = x.detach();
  Tensor y = plain * plain * plain;
  if (!needs_grad({x})) return y;
  return record(y, "cube_wrong", {x}, [x = SavedTensor(x)](const Tensor& g) -> TensorList {
    const Tensor& xv = x.get();
    return {g * xv * xv * 2.0};
  });
}

bool close(const Tensor& a, const Tensor& b) {
  std::vector<double> u = a.to_vector<double>(), v = b.to_vector<double>();
  for (size_t i = 0; i < u.size(); ++i)
    if (std::fabs(u[i] - v[i]) > 1e-12 * (1 + std::fabs(v[i]))) return false;
  return u.size() == v.size();
}

}  // namespace

int main() {
  try {
    const std::vector<double> values{-1.5, -0.3, 0.2, 0.7, 1.1, 2.0};
    Tensor x = from_vector(values, {2, 3}, kFloat64).requires_grad_();

    // Against the library's own pow: same values, same gradients.
    Tensor y = cube(x);
    y.sum().backward();
    Tensor my_grad = x.grad();
    x.set_grad(Tensor());
    pow(x, 3.0).sum().backward();
    const bool same = close(y, pow(x.detach(), 3.0)) && close(my_grad, x.grad());
    std::printf("cube matches pow(x, 3) forward and backward: %s\n", same ? "yes" : "no");

    // gradcheck: a function of a list of float64 leaves, returning a tensor.
    GradcheckResult right = gradcheck([](const TensorList& in) { return cube(in[0]); }, {x});
    std::printf("gradcheck cube: %s (%s)\n", right.ok ? "passed" : "FAILED", right.message.c_str());
    GradcheckResult wrong = gradcheck([](const TensorList& in) { return cube_wrong(in[0]); }, {x});
    std::printf("gradcheck cube_wrong: %s: %s\n", wrong.ok ? "NOT caught" : "caught", wrong.message.c_str());
    // The worst entry is at x = 2.0: analytical 2*4 = 8, numerical 3*4 = 12.

    // Why SavedTensor: changing x in place after the forward would make backward use the new x.
    Tensor z = from_vector(values, {2, 3}, kFloat64).requires_grad_();
    Tensor out = cube(z).sum();
    {
      NoGradGuard no_grad;  // in-place ops on a tensor that requires grad are refused in grad mode
      z.mul_(2.0);
    }
    bool refused = false;
    try {
      out.backward();
    } catch (const Error& e) {
      refused = true;
      std::printf("modified in place after the forward: refused, %s\n", e.what());
    }

    // The new op is a node like any other (example 02 draws graphs).
    std::cout << to_dot(cube(x)) << "\n";

    if (!same || !right.ok || wrong.ok || !refused) {
      std::printf("the op does not behave as the text says\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
