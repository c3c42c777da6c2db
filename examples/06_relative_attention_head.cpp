// 06: one attention head with a relative term, by hand and then through the library's layer.
//
// A head scores query i against key j by content, q_i·k_j, plus a term that depends only on where
// the key sits relative to the query: a learned row e_δ of a table E, one row per relative position
// δ = j − i (negative = past). With D = 2 and t = 4 every number below can be checked by hand:
//
//   S[i][j]  = q_i · e_{j−i}                       the relative term (its definition, as loops)
//   weights  = softmax((Q·Kᵀ + S) / √D)            row by row
//
// The seed's method (docs/relative-attention.md) does one product P = Q·Eᵀ and reads S off it:
// S[i][j] = P[i][j − i + 3], each diagonal of S (one δ) a column of P; SeedRelativeEmbedding does that
// inside MultiHeadAttention. Backward runs the other way: dE gathers each diagonal of dS (the scatter).
//
// Run: ./build/examples/06_relative_attention_head
// expect: S read off the diagonals of P equals the loops: yes
// expect: library agrees: yes
// expect: dE and dQ by hand equal the engine's: yes
// expect: the head's weights gradchecked in Q, K and E: yes
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "relgrad.h"

using namespace relgrad;
using Row = std::vector<double>;
using Matrix = std::vector<Row>;

namespace {

void print(const char* title, const Matrix& m) {
  std::printf("%s\n", title);
  for (const Row& row : m)
    for (size_t j = 0; j < row.size(); ++j) std::printf(" %8.4g%s", row[j], j + 1 < row.size() ? "" : "\n");
  std::printf("\n");
}

double dot(const Row& a, const Row& b) { return a[0] * b[0] + a[1] * b[1]; }  // D = 2

Tensor to_tensor(const Matrix& m) {
  Row flat;
  for (const Row& row : m) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, {static_cast<int64_t>(m.size()), static_cast<int64_t>(m[0].size())});  // float64
}

Matrix to_matrix(const Tensor& x, int n, int cols) {  // x holds n × cols numbers, row-major
  std::vector<double> v = x.contiguous().to_vector<double>();
  Matrix m(n, Row(cols));
  for (int k = 0; k < n * cols; ++k) m[k / cols][k % cols] = v[k];
  return m;
}

double max_abs_difference(const Matrix& a, const Matrix& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) worst = std::fmax(worst, std::fabs(a[i][j] - b[i][j]));
  return worst;
}

}  // namespace

int main() {
  try {
    const int t = 4, D = 2, max_past = t - 1, R = 2 * t - 1;  // E has rows for δ = −3 … +3
    // The seed's small numbers (examples/seed_diagonal_example.cpp): e_δ = (δ, 1), rows past first.
    Matrix Q = {{1, 0}, {0, 1}, {1, 1}, {2, -1}};
    Matrix K = {{1, 0}, {0, 1}, {1, 1}, {0, -1}};
    Matrix E(R);
    for (int r = 0; r < R; ++r) E[r] = {static_cast<double>(r - max_past), 1.0};  // row r ↔ δ = r − 3
    print("Q (queries, 4 x 2):", Q);
    print("K (keys, 4 x 2):", K);
    print("E (one row per delta = -3 ... +3):", E);

    // 1. Content scores and the relative term, straight from their definitions.
    Matrix content(t, Row(t)), S(t, Row(t));
    for (int i = 0; i < t; ++i)
      for (int j = 0; j < t; ++j) {
        content[i][j] = dot(Q[i], K[j]);
        S[i][j] = dot(Q[i], E[j - i + max_past]);  // e_{j−i}: the row of δ = j − i
      }
    print("content scores Q.K^T:", content);
    print("relative term S[i][j] = q_i . e_(j-i) (loops):", S);

    // 2. The seed's way: one product P = Q·Eᵀ (every query against every δ), then S off its diagonals.
    Matrix P(t, Row(R)), S_from_P(t, Row(t));
    for (int i = 0; i < t; ++i)
      for (int r = 0; r < R; ++r) P[i][r] = dot(Q[i], E[r]);
    print("P = Q.E^T, the seed's QE (columns delta = -3 ... +3):", P);
    for (int i = 0; i < t; ++i)
      for (int j = 0; j < t; ++j) S_from_P[i][j] = P[i][j - i + max_past];  // S's diagonal δ = P's column δ
    const bool diagonals_agree = S_from_P == S;
    std::printf("S read off the diagonals of P equals the loops: %s\n\n", diagonals_agree ? "yes" : "NO");

    // 3. Softmax by hand: logits = (content + S)/√D; subtract the row's max before exp (the same
    // result, no overflow), then divide by the row's sum.
    Matrix logits(t, Row(t)), weights(t, Row(t));
    for (int i = 0; i < t; ++i) {
      double row_max = -INFINITY, row_sum = 0;
      for (int j = 0; j < t; ++j) {
        logits[i][j] = (content[i][j] + S[i][j]) / std::sqrt(static_cast<double>(D));
        row_max = std::fmax(row_max, logits[i][j]);
      }
      for (int j = 0; j < t; ++j) row_sum += (weights[i][j] = std::exp(logits[i][j] - row_max));
      for (int j = 0; j < t; ++j) weights[i][j] /= row_sum;
    }
    print("logits (Q.K^T + S) / sqrt(D):", logits);
    print("attention weights, by hand (each row sums to 1):", weights);

    // 4. The library: one head (embed_dim = D), the seed's scheme with its table loaded from E, and
    // identity projections without biases, so the layer's q and k are our Q and K. Q goes in as the
    // query input, K as the key input (forward(query, key_value)); t1 = t2, π(i) = i: self-attention.
    auto scheme = std::make_shared<SeedRelativeEmbedding>(D, /*max_length t3=*/t);  // table (2·t3 − 1, D)
    MultiHeadAttention attention(D, /*num_heads=*/1, scheme, /*dropout=*/0.0, /*bias=*/false);
    attention.to(kFloat64);
    Tensor I = to_tensor({{1, 0}, {0, 1}});
    std::map<std::string, Tensor> state = {{"q_proj.weight", I}, {"k_proj.weight", I}, {"v_proj.weight", I},
                                           {"out_proj.weight", I}, {"positional.table", to_tensor(E)}};
    attention.load_state_dict(state);  // every parameter must be named, or it throws
    AttentionOptions options;
    options.need_weights = true;  // also return the attention weights (B, H, t2, t1)
    Tensor queries = to_tensor(Q).reshape({1, t, D}), keys = to_tensor(K).reshape({1, t, D});  // (B, t, C)
    AttentionOutput out = attention.forward(queries, keys, options);
    Matrix library_weights = to_matrix(out.weights, t, t);  // (1, 1, t, t)
    // The scheme's term alone, as the layer adds it to Q·Kᵀ before scaling.
    AttentionGeometry geometry = AttentionGeometry::make(/*B=*/1, /*H=*/1, D, t, t, /*causal=*/false);
    Matrix library_S = to_matrix(scheme->score_term(to_tensor(Q).reshape({1, 1, t, D}), geometry), t, t);
    print("relative term, SeedRelativeEmbedding::score_term:", library_S);
    print("attention weights, MultiHeadAttention (need_weights):", library_weights);
    const double diff_S = max_abs_difference(S, library_S);
    const double diff_w = max_abs_difference(weights, library_weights);
    std::printf("max |difference|: relative term %.3g, weights %.3g\n", diff_S, diff_w);
    const bool agrees = diff_S < 1e-12 && diff_w < 1e-12;
    std::printf("library agrees: %s\n\n", agrees ? "yes" : "NO");

    // 5. Backward through the relative term, for an upstream gradient dS (the weights above, numbers
    // on screen): S[i][j] = q_i · e_{j−i} gives dQ[i] = Σ_j dS[i][j] e_{j−i} and dE[δ] = Σ_i dS[i][i+δ] q_i,
    // each diagonal of dS weighted by its queries and summed into one row of E: the scatter.
    const Matrix& dS = weights;
    Matrix dE(R, Row(D, 0.0)), dQ(t, Row(D, 0.0));
    for (int i = 0; i < t; ++i)
      for (int j = 0; j < t; ++j)
        for (int d = 0; d < D; ++d) {
          dE[j - i + max_past][d] += dS[i][j] * Q[i][d];  // the scatter: diagonal δ of dS onto row δ of E
          dQ[i][d] += dS[i][j] * E[j - i + max_past][d];
        }
    print("dE by hand (rows delta = -3 ... +3):", dE);
    // The engine: S = relative_gather(Q·Eᵀ, C), C[i][j] = j − i + 3 (stop 14), then backward with dS.
    RelativeIndexOptions o;
    o.max_past = o.max_future = max_past;
    Tensor C = relative_index(t, t, o), Qt = to_tensor(Q).requires_grad_(), Et = to_tensor(E).requires_grad_();
    relative_gather(matmul(Qt, Et.transpose(0, 1)), C, R).backward(to_tensor(dS));
    const double diff_grads = std::fmax(max_abs_difference(dE, to_matrix(Et.grad(), R, D)),
                                        max_abs_difference(dQ, to_matrix(Qt.grad(), t, D)));
    const bool grads_agree = diff_grads < 1e-12;
    std::printf("dE and dQ by hand equal the engine's: %s (max |difference| %.3g)\n", grads_agree ? "yes" : "NO",
                diff_grads);
    // The whole head, weights = softmax((Q·Kᵀ + S)/√D), against finite differences in Q, K and E.
    GradcheckResult check = gradcheck([&](const TensorList& in) {
      Tensor S_t = relative_gather(matmul(in[0], in[2].transpose(0, 1)), C, R);
      return softmax((matmul(in[0], in[1].transpose(0, 1)) + S_t) * (1 / std::sqrt(double(D))), -1);
    }, {Qt, to_tensor(K).requires_grad_(), Et});
    std::printf("the head's weights gradchecked in Q, K and E: %s\n", check.ok ? "yes" : check.message.c_str());
    return diagonals_agree && agrees && grads_agree && check.ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
