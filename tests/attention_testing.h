// Shared by the positional-scheme tests: a whole attention layer under gradcheck, one forward + backward
// of a layer (fused against composite), and cached decoding of whole models against the full pass.
#pragma once
#include <memory>
#include <vector>

#include "layers/models.h"
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

// Output and every gradient (inputs, then parameters in order) of one forward + backward of `m` on
// x (queries) and mem (keys), weighted by a fixed random cotangent: what a fused core and its composite
// twin must both give.
inline TensorList layer_run(MultiHeadAttention& m, const Tensor& x, const Tensor& mem, const AttentionOptions& o) {
  m.zero_grad();
  Tensor xi = x.detach().clone().requires_grad_(), mi = mem.detach().clone().requires_grad_();
  Tensor out = m.forward(xi, mi, o).output;
  sum(mul(out, uniform(out.shape(), -1, 1, out.dtype(), 21))).backward();
  TensorList r{out, xi.grad(), mi.grad()};
  for (const auto& [name, p] : m.named_parameters()) r.push_back(p.grad().defined() ? p.grad() : zeros_like(p));
  return r;
}

// A DecoderLM and an EncoderDecoder built from `c` (float64, eval): a prompt of 3 target tokens, then 6
// cached steps of one, give the full pass's logits (the encoder-decoder with a padded source row).
inline void check_cached_decoding(const TransformerConfig& c) {
  Generator init(9);
  DecoderLM lm(c, &init);
  EncoderDecoder model(c, &init);
  lm.to(kFloat64);
  model.to(kFloat64);
  lm.eval();
  model.eval();
  NoGradGuard no_grad;
  Generator data(10);
  Tensor tokens = randint(0, 11, {2, 9}, kInt64, &data), src = randint(0, 11, {2, 6}, kInt64, &data);
  Tensor src_mask = from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 6}).to(kBool);
  Tensor memory = model.encode(src, src_mask);
  Tensor full_lm = lm.forward(tokens), full_ed = model.decode(tokens, memory, src_mask);
  std::vector<LayerCache> lm_cache, ed_cache;
  TensorList lm_steps = {lm.forward(tokens.narrow(1, 0, 3).contiguous(), Tensor(), &lm_cache)};
  TensorList ed_steps = {model.decode(tokens.narrow(1, 0, 3).contiguous(), memory, src_mask, Tensor(), &ed_cache)};
  for (int64_t n = 3; n < 9; ++n) {
    lm_steps.push_back(lm.forward(tokens.narrow(1, n, 1).contiguous(), Tensor(), &lm_cache));
    ed_steps.push_back(model.decode(tokens.narrow(1, n, 1).contiguous(), memory, src_mask, Tensor(), &ed_cache));
  }
  CHECK_CLOSE(cat(lm_steps, 1), full_lm, 1e-10, 0);
  CHECK_CLOSE(cat(ed_steps, 1), full_ed, 1e-10, 0);
}

}  // namespace relgrad::testing
