// Exercise 05 (after stop 16): one scheme's bias, ALiBi's.
//
// ALiBi (Press et al. 2022) has no table: each head h adds −m_h · distance to its logits after the
// 1/√D scaling, with a fixed slope m_h per head (alibi_slopes, layers/relative_bias.h). For query i
// and key j of self-attention (π(i) = i, δ = j − i):
//   causal (the paper):  distance = i − j for keys j ≤ i, and 0 for later keys (the mask hides them);
//   bidirectional:       distance = |j − i|.
// Write
//
//   my_alibi_bias(slopes, t, bidirectional): the bias (H, t, t) row-major, H = slopes.size(),
//   bias[(h·t + i)·t + j] = −slopes[h] · distance(i, j).
//
// The check: your bias against the library's ALiBi::logit_bias on 8 geometries (1, 2, 3 and 8 heads,
// causal and bidirectional), entry by entry. The bias is a constant with no backward of its own, so a
// gradcheck could not see a wrong one: the values are compared. Then a causal head's weights through
// your bias are gradchecked in the logits.
//
// Run: ./build/exercises/05_alibi_bias   The library's own: layers/relative_bias.cpp, ALiBi::logit_bias.
#include "exercises/exercise.h"

using namespace relgrad;

std::vector<double> my_alibi_bias(const std::vector<double>& slopes, int64_t t, bool bidirectional) {
#ifdef RELGRAD_EXERCISE_REFERENCE
  const int64_t H = static_cast<int64_t>(slopes.size());
  ALiBi alibi(H, bidirectional);  // its slopes are alibi_slopes(H), the ones the check passes in
  AttentionGeometry g = AttentionGeometry::make(/*B=*/1, H, /*D=*/4, t, t, /*causal=*/!bidirectional);
  return alibi.logit_bias(g).to(kFloat64).contiguous().to_vector<double>();
#else
  // ---- YOUR CODE (replace the line below) ----
  (void)bidirectional;
  return std::vector<double>(slopes.size() * static_cast<size_t>(t * t), 0.0);
  // ---- END OF YOUR CODE ----
#endif
}

std::string compare(int64_t H, int64_t t, bool bidirectional) {
  const std::vector<double> slopes = alibi_slopes(H);
  ALiBi alibi(H, bidirectional);
  AttentionGeometry g = AttentionGeometry::make(1, H, 4, t, t, !bidirectional);
  const std::vector<double> want = alibi.logit_bias(g).to(kFloat64).contiguous().to_vector<double>();
  const std::vector<double> got = my_alibi_bias(slopes, t, bidirectional);
  if (got.size() != want.size())
    return "the bias has " + std::to_string(got.size()) + " entries, expected H·t·t = " + std::to_string(want.size());
  for (size_t k = 0; k < want.size(); ++k)
    if (std::fabs(got[k] - want[k]) > 1e-6 * (1 + std::fabs(want[k]))) {
      const size_t n = static_cast<size_t>(t);
      return "bias[h " + std::to_string(k / (n * n)) + "][i " + std::to_string(k / n % n) + "][j " +
             std::to_string(k % n) + "] is " + std::to_string(got[k]) + ", expected " + std::to_string(want[k]);
    }
  return "";
}

int main() {
  std::vector<std::pair<std::string, exercise::Check>> checks;
  for (bool bidirectional : {false, true})
    for (int64_t H : {1, 2, 3, 8})
      checks.push_back({std::to_string(H) + " heads, t 5, " + (bidirectional ? "bidirectional" : "causal"),
                        [H, bidirectional] { return compare(H, 5, bidirectional); }});
  checks.push_back({"a causal head's weights through your bias, gradchecked", [] {
                      Generator gen(5);
                      const int64_t H = 2, t = 4;
                      Tensor bias = from_vector(my_alibi_bias(alibi_slopes(H), t, false), {1, H, t, t});
                      Tensor mask = causal_mask(arange(double(t), kInt64), t);  // true = hidden: keys after their query
                      return exercise::gradchecked(
                          [bias, mask](const TensorList& in) { return masked_softmax(in[0], mask, 0.5, bias); },
                          {exercise::leaf({1, H, t, t}, gen)});
                    }});
  return exercise::run("exercise 05: ALiBi's bias", checks);
}
