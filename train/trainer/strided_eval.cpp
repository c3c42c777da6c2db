#include "train/trainer/strided_eval.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "core/base/error.h"

namespace relgrad {

std::vector<StridedWindow> strided_windows(int64_t T, int64_t window) {
  RG_CHECK(window >= 1, "evaluate_strided", "window must be >= 1, got ", window);
  const int64_t stride = (window + 1) / 2;
  std::vector<StridedWindow> out;
  int64_t scored = 0;  // tokens scored so far
  for (int64_t begin = 0; scored < T; begin += stride) {
    const int64_t end = std::min(begin + window, T);
    out.push_back({begin, end, scored});
    scored = end;
  }
  return out;
}

EvalResult evaluate_strided(RunModel& model, const Dataset& data, int64_t batches, int64_t window,
                            const std::function<void(int64_t done)>& progress) {
  RG_CHECK(model.kind() == ModelKind::DecoderOnly, "evaluate_strided",
           "a sliding window reads a decoder-only model's tokens; this is an encoder-decoder model");
  NoGradGuard no_grad;
  EvalScope eval_mode(*model.module);
  EvalResult r;
  r.rows_are_examples = false;
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t n = 0; n < batches; ++n) {
    const Batch b = data.batch(n, Split::HeldOut).to(model.device);
    const int64_t T = b.tokens.size(1);
    for (const StridedWindow& w : strided_windows(T, window)) {
      Batch part;  // tokens [begin, end), which the model reads from position 0
      part.tokens = b.tokens.narrow(1, w.begin, w.end - w.begin).contiguous();
      if (b.padding_mask.defined())
        part.padding_mask = b.padding_mask.narrow(1, w.begin, w.end - w.begin).contiguous();
      const int64_t fresh = w.end - w.scored_from;  // the window's last `fresh` positions are scored
      Tensor logits = model.logits(part);           // (B, end − begin, V)
      const int64_t B = logits.size(0), V = logits.size(2);
      Tensor scored = logits.narrow(1, logits.size(1) - fresh, fresh).contiguous();  // (B, fresh, V)
      Tensor targets = b.targets.narrow(1, w.scored_from, fresh).contiguous();       // (B, fresh)
      loss_sum += cross_entropy(scored.reshape({B * fresh, V}), targets.reshape({B * fresh}),
                                CrossEntropyOptions().set_reduction(Reduction::Sum)).item();
      const std::vector<int64_t> predicted = argmax(scored, -1).to(Device::cpu()).contiguous().to_vector<int64_t>();
      const std::vector<int64_t> wanted = targets.to(Device::cpu()).to_vector<int64_t>();
      for (size_t k = 0; k < wanted.size(); ++k) {
        if (wanted[k] == kIgnoreIndex) continue;
        ++r.tokens;
        correct += predicted[k] == wanted[k];
      }
    }
    r.sequences += b.tokens.size(0);
    if (progress) progress(n + 1);
  }
  r.loss = r.tokens ? loss_sum / static_cast<double>(r.tokens) : 0.0;
  r.accuracy = r.tokens ? static_cast<double>(correct) / static_cast<double>(r.tokens) : 0.0;
  return r;
}

}  // namespace relgrad
