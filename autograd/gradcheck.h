// gradcheck: compares the gradients computed by backward with central finite differences, in
// float64, with PyTorch's defaults (eps 1e-6, atol 1e-5, rtol 1e-3). Public: use it on your own ops.
//
//   auto r = gradcheck([](const TensorList& in) { return layer_norm(in[0], {4}); }, {x});
//   if (!r.ok) std::cerr << r.message;
//
// Every input that requires grad is perturbed; f must be deterministic (seed any dropout inside).
#pragma once
#include <functional>
#include <string>

#include "core/tensor.h"

namespace relgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;  // over all Jacobian entries
  std::string message;       // names the worst element: input, flat index, output index, both values
};

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs,
                          const GradcheckOptions& options = {});

}  // namespace relgrad
