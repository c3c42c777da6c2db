// Shared by the positional-scheme tests: a whole attention layer under gradcheck.
#pragma once
#include <memory>
#include <vector>

#include "testing.h"

namespace relgrad::testing {

// A float64 MultiHeadAttention (C = 8, H = 2) using `scheme`, checked by gradcheck with respect to
// its inputs and the extra tensors `params` (scheme members, swapped for gradcheck's copies during
// each evaluation and restored after). Self-attention has t = 3; cross-attention t2 = 3, t1 = 5 with
// a key padding mask.
inline void gradcheck_attention(std::shared_ptr<PositionalScheme> scheme, bool causal, bool cross,
                                Alignment alignment = Alignment::Left, std::vector<Tensor*> params = {}) {
  Generator init(5);
  auto mha = std::make_shared<MultiHeadAttention>(8, 2, scheme, 0.0, true, &init);
  mha->to(kFloat64);
  const int64_t B = 2, t2 = 3, t1 = cross ? 5 : 3;
  AttentionOptions o;
  o.causal = causal;
  o.alignment = alignment;
  if (cross) o.key_padding_mask = from_vector<bool>({false, false, false, true, true, false, false, false, false, true}, {B, t1});
  TensorList inputs = {uniform({B, t2, 8}, -1, 1, kFloat64, 11).requires_grad_()};
  if (cross) inputs.push_back(uniform({B, t1, 8}, -1, 1, kFloat64, 12).requires_grad_());
  gradcheck_with_params(params, inputs, [&](const TensorList& in) {
    return mha->forward(in[0], cross ? in[1] : in[0], o).output;
  });
}

}  // namespace relgrad::testing
