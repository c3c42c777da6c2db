// Dropout as nn.Dropout: while training, zeroes each element with probability p and scales the rest
// by 1/(1−p); in eval mode (module.eval()) it is the identity. No parameters.
//   x (...) → same shape
#pragma once
#include "layers/module.h"

namespace relgrad {

class Dropout : public Module {
 public:
  explicit Dropout(double p_ = 0.5, Generator* generator_ = nullptr) : p(p_), generator(generator_) {
    RG_CHECK(p >= 0.0 && p <= 1.0, "Dropout", "p must be in [0, 1], got ", p);
  }
  Tensor forward(const Tensor& x) const {
    // p = 0 skips the op entirely: no mask draw, so the generator's stream is not advanced.
    if (!is_training() || p == 0.0) return x;
    return dropout(x, p, true, generator);
  }
  Tensor operator()(const Tensor& x) const { return forward(x); }

  double p;
  Generator* generator = nullptr;  // masks come from here; null: the default generator
};

}  // namespace relgrad
