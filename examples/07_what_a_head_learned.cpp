// 07: what a head learned. One attention head with a learned relative table is trained on the lag-k
// copy task; then we read off where it looks, as a function of δ = j − i.
//
// The task: random symbols x_0 … x_{T−1}; the output at position i must be y_i = x_{i−k} (k = 3),
// the input k steps back (positions i < k have no answer and are left out of the loss). The model
// is as small as it can be:
//
//   x (B, T) → Embedding → MultiHeadAttention (1 head, causal, the seed's relative table)
//            → Linear → logits (B, T, V)
//
// Nothing tells the model where a token is (no absolute positions), and every symbol is equally
// likely everywhere, so nothing in a key's content says it is k steps back: the task needs the
// relative term q_i · e_δ (example 06), which has to put the head's attention on δ = −k. After
// training we measure it: the head's average attention probability at each δ. The ablation,
// --no-relative, trains the same model with no positional scheme: it stalls near 30 % accuracy
// (28.1–28.9 % on seeds 1–3), and the program exits 0 when it stays under 50 %, as it should.
//
// Run: ./build/examples/07_what_a_head_learned [seed] [--no-relative]   (under a second, idle)
// expect: held-out accuracy (99|100)[.][0-9]+ %
// expect: peak at delta = -3: the head looks 3 steps back, exactly the lag
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "relgrad.h"
#include "train/optim/optim.h"

using namespace relgrad;

int main(int argc, char** argv) {
  try {
    const int V = 10, T = 20, k = 3, C = 16, B = 32, steps = 200;  // vocabulary, length, lag, width, batch
    uint64_t seed = 1;
    bool relative = true;
    for (int a = 1; a < argc; ++a)
      if (std::string(argv[a]) == "--no-relative") relative = false;
      else seed = std::strtoull(argv[a], nullptr, 10);
    Generator gen(seed);

    Embedding embed(V, C, /*padding_idx=*/-1, &gen);
    // One table of 2T − 1 rows (δ = −(T − 1) … T − 1) shared by the heads; causal attention uses δ ≤ 0.
    auto scheme = relative ? std::make_shared<SeedRelativeEmbedding>(C, /*max_length=*/T, /*num_heads=*/0,
                                                                     OutOfRange::Zero, &gen)
                           : nullptr;  // the ablation: no positional scheme at all
    MultiHeadAttention attention(C, /*num_heads=*/1, scheme, /*dropout=*/0.0, /*bias=*/true, &gen);
    Linear to_vocab(C, V, /*bias=*/true, &gen);
    AttentionOptions causal;
    causal.causal = true;  // position i sees keys j ≤ i only
    auto forward = [&](const Tensor& x, const AttentionOptions& options) {
      Tensor h = embed(x);  // (B, T, C)
      AttentionOutput a = attention.forward(h, h, options);
      return std::make_pair(to_vocab(a.output), a.weights);  // logits (B, T, V), weights (B, 1, T, T)
    };
    // A batch: random symbols, and the targets y_i = x_{i−k}, −100 (ignored by the loss) for i < k.
    auto make_batch = [&](int rows, Tensor& x, Tensor& y) {
      x = randint(0, V, {rows, T}, kInt64, &gen);
      y = cat({full({rows, k}, -100, kInt64), narrow(x, 1, 0, T - k)}, 1);
    };

    TensorList params;
    for (const TensorList& group : {embed.parameters(), attention.parameters(), to_vocab.parameters()})
      params.insert(params.end(), group.begin(), group.end());
    Adam optimizer(params, AdamOptions(/*lr=*/1e-2));
    std::printf("lag-%d copy: V = %d symbols, T = %d, one head of width %d, %d steps of Adam\n",
                k, V, T, C, steps);
    for (int step = 1; step <= steps; ++step) {
      Tensor x, y;
      make_batch(B, x, y);
      Tensor logits = forward(x, causal).first;
      Tensor loss = cross_entropy(logits.reshape({B * T, V}), y.reshape({B * T}));  // mean over i ≥ k
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (step == 1 || step % 50 == 0) std::printf("step %3d  loss %.4f\n", step, loss.item());
    }

    // A held-out batch: the accuracy, and the attention weights w[b][i][j] of the one head.
    NoGradGuard no_grad;
    const int N = 256;
    Tensor x, y;
    make_batch(N, x, y);
    AttentionOptions with_weights = causal;
    with_weights.need_weights = true;
    auto [logits, weights] = forward(x, with_weights);
    std::vector<int64_t> predicted = argmax(logits, -1).to_vector<int64_t>(), target = y.to_vector<int64_t>();
    int correct = 0, counted = 0;
    for (size_t n = 0; n < target.size(); ++n)
      if (target[n] != -100) ++counted, correct += predicted[n] == target[n];
    const double accuracy = 100.0 * correct / counted;
    std::printf("held-out accuracy %.2f %% (%d of %d positions)\n\n", accuracy, correct, counted);
    if (!relative) {
      std::printf("without a relative scheme the model %s\n", accuracy < 50 ? "stalls: nothing tells it where k steps back is"
                                                                          : "did NOT stall (expected under 50 %)");
      return accuracy < 50 ? 0 : 1;
    }

    // The response against δ: the head's attention probability on the key j = i + δ, averaged over
    // every batch row b and every query i that has an answer (i ≥ k) and such a key (i + δ ≥ 0).
    // Causal attention has δ ≤ 0 only, so mass[d] holds δ = −d.
    std::vector<double> w = weights.to(kFloat64).to_vector<double>();  // (N, 1, T, T)
    std::vector<double> mass(T, 0.0);
    for (int d = 0; d < T; ++d) {
      double total = 0;
      int pairs = 0;
      for (int b = 0; b < N; ++b)
        for (int i = std::max(k, d); i < T; ++i, ++pairs) total += w[(b * T + i) * T + (i - d)];
      mass[d] = total / pairs;
    }
    // Where the peak comes from: the logit the learned table adds at δ for the batch's mean query q̄,
    // q̄ · e_δ / √C (example 06's S, scaled as in the logits); the content term q·k adds the rest.
    Tensor queries = attention.q_proj->forward(embed(x));  // (N, T, C), one head: C = D
    std::vector<double> q_mean = mean(queries, {0, 1}).to(kFloat64).to_vector<double>();
    std::vector<double> E = scheme->table.to(kFloat64).to_vector<double>();  // row r ↔ δ = r − (T − 1)
    std::vector<double> table_term(T, 0.0);
    for (int d = 0; d < T; ++d)
      for (int c = 0; c < C; ++c) table_term[d] += q_mean[c] * E[(T - 1 - d) * C + c] / std::sqrt(double(C));

    int peak = 0;
    for (int d = 1; d < T; ++d)
      if (mass[d] > mass[peak]) peak = d;
    std::printf("mean attention probability against delta = j - i (queries i >= %d); the table's logit\n", k);
    for (int d = 0; d < T; ++d) {
      std::string bar(static_cast<size_t>(mass[d] * 50 + 0.5), '#');
      std::printf("delta %3d | %-50s %.3f   table %+6.2f\n", -d, bar.c_str(), mass[d], table_term[d]);
    }
    std::printf("\npeak at delta = %d: ", -peak);
    if (peak == k)
      std::printf("the head looks %d steps back, exactly the lag\n", k);
    else
      std::printf("NOT the lag k = %d\n", k);
    const bool learned = accuracy >= 99.0 && peak == k && mass[k] > 0.9;
    if (!learned) std::printf("not learned: expected accuracy >= 99 %% and a peak > 0.9 at delta = -%d\n", k);
    return learned ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
