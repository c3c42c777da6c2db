// The seed's generalised diagonal method (SeedRelativeEmbedding, layers/relative_learned.h;
// docs/relative-attention.md), worked out for t3 = 4 as the seed does — QE, S̄ = diagonal(QE, 0, t3 − 1) and S = S̄ᵀ — first with labels, then with
// numbers, next to relgrad's index-mapped primitive:
//
//   S = relative_gather(Q·tableᵀ, relative_index(t2, t1, {max_past = max_future = t3 − 1}))
//
// Then t2 = 5 > t3: TensorFlow's diag_part (default align RIGHT_LEFT) pads the shorter diagonals on
// the left, so column 0 of S holds the *previous* query's score; relgrad gives each query its own.
//
// Labels: "q2e-1" = q_2 · e_{−1}, query 2 looking one step into the past (the seed writes s_{2−1}).
// The seed's E is (D, 2·t3 − 1) with column c ↔ relative time t = t3 − 1 − c (future first);
// relgrad's table is (2·t3 − 1, D) with row r ↔ δ = r − (t3 − 1) (past first).
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "layers/relative_learned.h"
#include "relgrad.h"

using namespace relgrad;

namespace {

template <class T>
using Matrix = std::vector<std::vector<T>>;

std::string label(int64_t i, int64_t t) { return "q" + std::to_string(i) + "e" + (t >= 0 ? "+" : "") + std::to_string(t); }

void print(const char* title, const Matrix<std::string>& m) {
  std::printf("%s\n", title);
  for (const auto& row : m) {
    for (const auto& cell : row) std::printf(" %-6s", cell.empty() ? "." : cell.c_str());
    std::printf("\n");
  }
  std::printf("\n");
}

void print(const char* title, const Matrix<double>& m) {
  std::printf("%s\n", title);
  for (const auto& row : m) {
    for (double v : row) std::printf(" %6g", v);
    std::printf("\n");
  }
  std::printf("\n");
}

// TensorFlow's tf.linalg.diag_part(x, k = (0, k1)) with the default align = "RIGHT_LEFT" (as
// TensorFlow's API documentation defines it): row m holds diagonal d = k1 − m; a diagonal shorter than the longest is
// right-aligned (padded on the left with `pad`).
template <class T>
Matrix<T> tf_diag_part(const Matrix<T>& x, int64_t k1, T pad) {
  const int64_t M = static_cast<int64_t>(x.size()), N = static_cast<int64_t>(x[0].size());
  const int64_t max_len = std::min(M, N);
  Matrix<T> out(k1 + 1, std::vector<T>(max_len, pad));
  for (int64_t m = 0; m <= k1; ++m) {
    const int64_t d = k1 - m;
    const int64_t len = std::min(N - d, M);
    const int64_t offset = max_len - len;  // right-aligned: the first `offset` slots are padding
    for (int64_t n = 0; n < max_len; ++n) {
      const int64_t row = n - offset, col = n + d - offset;
      if (row >= 0 && row < M && col >= 0 && col < N) out[m][n] = x[row][col];
    }
  }
  return out;
}

template <class T>
Matrix<T> transpose(const Matrix<T>& x) {
  Matrix<T> out(x[0].size(), std::vector<T>(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < x[0].size(); ++j) out[j][i] = x[i][j];
  return out;
}

template <class T>
Matrix<T> truncate(Matrix<T> x, int64_t keep) {
  for (auto& row : x) row.resize(keep);
  return x;
}

Matrix<double> to_matrix(const Tensor& t) {
  std::vector<double> v = t.to(kFloat64).contiguous().to_vector<double>();
  const int64_t rows = t.size(0), cols = t.size(1);
  Matrix<double> m(rows, std::vector<double>(cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[i][j] = v[i * cols + j];
  return m;
}

// The seed's recipe: S = truncate(transpose(diag_part(QE, 0, t3 − 1)), t1).
template <class T>
Matrix<T> seed_recipe(const Matrix<T>& QE, int64_t t3, int64_t t1, T pad) {
  return truncate(transpose(tf_diag_part(QE, t3 - 1, pad)), t1);
}

// relgrad's map C (t2, t1) as labels: row r ↔ δ = r − (t3 − 1); −1 = no entry (".").
Matrix<std::string> relgrad_labels(const Tensor& C, int64_t t3) {
  Matrix<double> c = to_matrix(C);
  Matrix<std::string> out(c.size(), std::vector<std::string>(c[0].size()));
  for (size_t i = 0; i < c.size(); ++i)
    for (size_t j = 0; j < c[0].size(); ++j)
      if (c[i][j] >= 0) out[i][j] = label(static_cast<int64_t>(i), static_cast<int64_t>(c[i][j]) - (t3 - 1));
  return out;
}

RelativeIndexOptions seed_index(int64_t t3) {
  RelativeIndexOptions o;
  o.max_past = t3 - 1;
  o.max_future = t3 - 1;
  o.alignment = Alignment::Left;      // the seed's π(i) = i
  o.out_of_range = OutOfRange::Zero;  // what TF's diag_part pads with, when it is aligned correctly
  return o;
}

}  // namespace

int main() {
  const int64_t t3 = 4, R = 2 * t3 - 1, D = 2;

  // ---- 1. The seed's worked example with labels: t2 = t1 = t3 = 4 ----
  Matrix<std::string> QE_labels(t3, std::vector<std::string>(R));
  for (int64_t i = 0; i < t3; ++i)
    for (int64_t c = 0; c < R; ++c) {
      const int64_t t = t3 - 1 - c;           // the seed's column c ↔ relative time t
      if (t >= -i && t <= t3 - 1 - i) QE_labels[i][c] = label(i, t);  // the products S needs
    }
  print("QE (t3 = 4; columns t = +3 ... -3, only the entries S uses):", QE_labels);
  print("S-bar = diagonal(QE, lower = 0, upper = t3 - 1), main diagonal at the bottom:",
        tf_diag_part(QE_labels, t3 - 1, std::string()));
  print("S = transpose(S-bar), the seed's result:", seed_recipe(QE_labels, t3, t3, std::string()));
  print("relgrad: relative_index(4, 4, {max_past = max_future = 3, Left, Zero}) as labels:",
        relgrad_labels(relative_index(t3, t3, seed_index(t3)), t3));

  // ---- 2. The same with numbers: Q (5, D) and the seed's E (D, 2·t3 − 1) ----
  Tensor Q5 = from_vector<double>({1, 0, 0, 1, 1, 1, 2, -1, -1, 3}, {5, D});
  Tensor E_seed = from_vector<double>({3, 2, 1, 0, -1, -2, -3,    // column c holds e_t, t = 3 − c: e_t = (t, 1)
                                       1, 1, 1, 1, 1, 1, 1},
                                      {D, R});
  Tensor Q = narrow(Q5, 0, 0, t3);
  Matrix<double> QE = to_matrix(matmul(Q, E_seed));
  print("QE with Q = [[1,0],[0,1],[1,1],[2,-1]] and e_t = (t, 1) (small enough to check by hand):", QE);
  Matrix<double> S_seed = seed_recipe(QE, t3, t3, 0.0);
  print("S, the seed's recipe on QE:", S_seed);

  // relgrad: the same table, past first, then the primitive.
  auto scheme = std::make_shared<SeedRelativeEmbedding>(D, t3, 0, OutOfRange::Zero);
  scheme->to(kFloat64);
  scheme->load_seed_table(E_seed);
  auto relgrad_S = [&](const Tensor& q, int64_t t1) {
    Tensor P = matmul(q, scheme->table.transpose(0, 1));                // (t2, R), past first
    return relative_gather(P, relative_index(q.size(0), t1, seed_index(t3)), R);  // (t2, t1)
  };
  Matrix<double> S_relgrad = to_matrix(relgrad_S(Q, t3));
  print("S, relgrad (relative_gather of Q·tableᵀ):", S_relgrad);
  std::printf("relgrad's S equals the seed's S: %s\n\n", S_relgrad == S_seed ? "yes" : "NO");

  // ---- 3. t2 = 5 > t3 = 4: the seed's recipe mixes rows ----
  const int64_t t2 = 5, t1 = 4;
  Matrix<std::string> QE5_labels(t2, std::vector<std::string>(R));
  for (int64_t i = 0; i < t2; ++i)
    for (int64_t c = 0; c < R; ++c) QE5_labels[i][c] = label(i, t3 - 1 - c);
  print("t2 = 5 > t3 = 4, the seed's recipe (diag_part, default RIGHT_LEFT): column 0 is shifted down a row",
        seed_recipe(QE5_labels, t3, t1, std::string()));
  print("relgrad (Left, Zero policy): every row holds its own query; q4 at key 0 (delta = -4) is outside the table",
        relgrad_labels(relative_index(t2, t1, seed_index(t3)), t3));
  Matrix<double> S5_seed = seed_recipe(to_matrix(matmul(Q5, E_seed)), t3, t1, 0.0);
  Matrix<double> S5_relgrad = to_matrix(relgrad_S(Q5, t1));
  print("numbers, the seed's recipe:", S5_seed);
  print("numbers, relgrad:", S5_relgrad);
  int64_t differ = 0;
  for (int64_t i = 0; i < t2; ++i)
    for (int64_t j = 0; j < t1; ++j) differ += S5_seed[i][j] != S5_relgrad[i][j];
  // (Row 0, column 0 is padding in the seed's recipe; it matches only because q0·e0 = 0 here.)
  std::printf("entries that differ: %lld (column 0: row i holds query i-1's score in the seed's recipe)\n",
              static_cast<long long>(differ));

  // The scheme itself (what MultiHeadAttention calls) gives the same scores, and the Error policy
  // refuses these lengths instead of guessing.
  AttentionGeometry g;
  g.batch = g.heads = 1;
  g.head_dim = D;
  g.t2 = t2;
  g.t1 = t1;
  Tensor through_scheme = scheme->score_term(Q5.reshape({1, 1, t2, D}), g).reshape({t2, t1});
  std::printf("SeedRelativeEmbedding::score_term agrees: %s\n",
              to_matrix(through_scheme) == S5_relgrad ? "yes" : "NO");
  SeedRelativeEmbedding strict(D, t3, 0, OutOfRange::Error);
  try {
    strict.score_term(Q5.to(kFloat32).reshape({1, 1, t2, D}), g);
  } catch (const Error& e) {
    std::printf("with OutOfRange::Error: %s\n", e.what());
  }
  return 0;
}
