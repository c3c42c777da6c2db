// What every exercise shares: run its checks, print PASS or FAIL with the first problem, exit 0 only
// on PASS. docs/learn.md, "Exercises", says how they are built and run.
//
// Each exercise file holds one function for you to write, between the YOUR CODE markers. Built with
// -DRELGRAD_EXERCISE_REFERENCE (the *_reference programs, exercises/CMakeLists.txt) the function is
// the library's own instead, the one the suite's tests use: the reference must pass every check, and
// the stub as shipped must fail one, so the checks are known to catch a wrong answer.
#pragma once
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "relgrad.h"

namespace exercise {

// A check returns "" when it holds, or what went wrong.
using Check = std::function<std::string()>;

inline int run(const char* name, const std::vector<std::pair<std::string, Check>>& checks) {
#ifdef RELGRAD_EXERCISE_REFERENCE
  std::printf("%s (the library's reference)\n", name);
#else
  std::printf("%s (your version)\n", name);
#endif
  for (const auto& [what, check] : checks) {
    std::string problem;
    try {
      problem = check();
    } catch (const std::exception& e) {
      problem = std::string("threw: ") + e.what();
    }
    if (!problem.empty()) {
      std::printf("FAIL: %s: %s\n", what.c_str(), problem.c_str());
      return 1;
    }
    std::printf("  ok  %s\n", what.c_str());
  }
  std::printf("PASS: all %zu checks\n", checks.size());
  return 0;
}

// gradcheck (autograd/gradcheck.h) as a check: "" or its message.
inline std::string gradchecked(const std::function<relgrad::Tensor(const relgrad::TensorList&)>& f,
                               const relgrad::TensorList& inputs) {
  relgrad::GradcheckResult r = relgrad::gradcheck(f, inputs);
  return r.ok ? "" : "gradcheck: " + r.message;
}

// Random float64 leaves that require grad, of the given shape (values in [0.5, 1.5) when positive).
inline relgrad::Tensor leaf(const relgrad::Shape& shape, relgrad::Generator& gen, bool positive = false) {
  relgrad::Tensor x = positive ? relgrad::rand(shape, relgrad::kFloat64, &gen) + 0.5
                               : relgrad::randn(shape, relgrad::kFloat64, &gen);
  return x.detach().requires_grad_();
}

}  // namespace exercise
