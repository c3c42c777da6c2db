// The softmax family's kernel contracts, named once for the three floors that spell them
// (core/cpu/softmax.h, cuda/softmax.h, core/backend/softmax.h) and the op that fills them
// (autograd/ops/softmax.cpp): the layout a kernel sees and its options, so that a name means the same
// thing on every floor.
#pragma once
#include <cstdint>

namespace relgrad {

// x (outer, C, inner) contiguous: softmax, or log_softmax, over C.
struct SoftmaxLayout {
  int64_t outer = 1, C = 1, inner = 1;
  bool log = false;  // log_softmax
};

// logits (N, C, D) contiguous and targets (N, D): cross-entropy over the C classes at each of the
// N·D positions.
struct CrossEntropyLayout {
  int64_t N = 1, C = 1, D = 1;
  int64_t ignore_index = -100;   // a position whose target equals it has no loss and no gradient
  double label_smoothing = 0.0;  // ε: loss = (1 − ε)(−log p_t) + ε mean_c(−log p_c)
};

}  // namespace relgrad
