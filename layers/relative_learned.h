// The learned-table relative schemes: a table E of relative embeddings, one row per relative
// position δ = j − π(i), and the score term q_i · e_δ added to q·k before the 1/√D scaling
// (docs/relative-attention.md, "The primitive"; every one of them is one GEMM and one relative_gather):
//
//   P = q · Eᵀ           (B,H,t2,D) @ (R,D)ᵀ → (B,H,t2,R)     (per head: (H,R,D), one table per head)
//   S = relative_gather(P, C)                  → (B,H,t2,t1)   C = relative_index(t2, t1, ...)
//
// No (t2, t1, D) tensor is ever built. The schemes differ only in the table's extent and the
// out-of-range policy:
//
//   scheme                    rows       δ covered            policy (default)  attention
//   SeedRelativeEmbedding     2·t3 − 1   [−(t3−1), t3−1]      Zero              self/cross, causal or not
//   HuangRelativeEmbedding    t3         [−(t3−1), 0]         Zero              causal only
//   ShawRelativeEmbedding     2k + 1     [−k, k]              Clip              self/cross, causal or not
//                                                                               (+ the a^V value term)
//
// Orientation: relgrad tables run past first, row r ↔ δ = r − max_past. Under causal attention
// future pairs (δ > 0) get no entry at all (they are masked), so a causal layer never reads or
// trains the future rows.
//
// Initialisation (all three): E ~ N(0, σ = D^−1/2), as tensor2tensor's get_relative_embeddings_left
// (the Music Transformer code, stddev = depth^−0.5). It keeps q·e_δ on the scale of q·k for unit
// queries. The seed's Keras code uses glorot_uniform instead; load_seed_table() imports such a table.
#pragma once
#include <string>

#include "layers/positional.h"

namespace relgrad {

// The seed's generalised diagonal method (Ukhov 2024), done right for any t1,
// t2 and alignment: S[i, j] = q_i · e_{j − π(i)}, and for |δ| > t3 − 1 zero (Zero), the edge row
// (Clip) or a clear error (Error). The seed's TF recipe (diag_part with its default RIGHT_LEFT
// alignment) silently mixes other queries' scores into a row when t2 > t3; here the index map is
// computed explicitly, so a row only ever holds its own query's products.
//
// Seed orientation: the seed stores E_seed (D, 2·t3 − 1) with column c ↔ δ = t3 − 1 − c (future
// first). relgrad's row r ↔ δ = r − (t3 − 1), so row r = column 2·t3 − 2 − r, transposed:
//   table[r, :] = E_seed[:, 2·t3 − 2 − r]        (seed_column(δ) = t3 − 1 − δ)
struct PositionalConfig;  // layers/schemes.h
struct SchemeCheck;
// seed, huang (their registry entries, layers/schemes.cpp): max_length ≥ 1, the table covering
// |δ| ≤ max_length − 1. "" when fine, else the config error naming the key.
std::string check_table_length(const SchemeCheck& c);

class SeedRelativeEmbedding : public PositionalScheme {
 public:
  // num_heads = 0: one table (2·t3 − 1, D) shared by all heads; else one per head (H, 2·t3 − 1, D).
  SeedRelativeEmbedding(int64_t head_dim, int64_t max_length, int64_t num_heads = 0,
                        OutOfRange policy = OutOfRange::Zero, Generator* generator = nullptr);
  std::string name() const override { return "seed"; }
  Tensor score_term(const Tensor& q, const AttentionGeometry& g) const override;  // (B,H,t2,t1)
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  // (1/√D)·q̄_h·e_{h,δ} (positional.h: table_response).
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  RelativeIndexOptions index_options(const AttentionGeometry& g) const;
  int64_t table_rows() const { return 2 * max_length - 1; }
  // The seed's column for relative position δ (its E is future first).
  static int64_t seed_column(int64_t delta, int64_t t3) { return t3 - 1 - delta; }
  // At least (2·t3 − 1)·D elements per layer (one shared table; per-head tables hold H times as many).
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);
  // Copies a seed-oriented table, (D, 2·t3 − 1) shared or (H, D, 2·t3 − 1) per head, into `table`.
  void load_seed_table(const Tensor& seed_table);

  int64_t head_dim, max_length, num_heads;
  OutOfRange policy;
  Tensor table;  // (2·t3 − 1, D) or (H, 2·t3 − 1, D); row r ↔ δ = r − (t3 − 1)
};

// Music Transformer's memory-efficient causal relative attention (Huang et al. 2018): only the
// past half of the table, t3 rows for δ ∈ [−(t3 − 1), 0]. The paper's "skew" (pad, reshape, slice)
// is just one layout of the index map, so relgrad computes the same scores through relative_gather
// and writes nothing into the masked triangle. Needs causal attention (a clear error otherwise).
// Default policy Zero: tensor2tensor's get_relative_embeddings_left pads zero rows for distances
// beyond the table (no clipping), which is what the Music Transformer models were trained with;
// Clip (reuse the most distant row) and Error are available.
class HuangRelativeEmbedding : public PositionalScheme {
 public:
  HuangRelativeEmbedding(int64_t head_dim, int64_t max_length, int64_t num_heads = 0,
                         OutOfRange policy = OutOfRange::Zero, Generator* generator = nullptr);
  std::string name() const override { return "huang"; }
  Tensor score_term(const Tensor& q, const AttentionGeometry& g) const override;  // (B,H,t2,t1)
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  RelativeIndexOptions index_options(const AttentionGeometry& g) const;
  int64_t table_rows() const { return max_length; }
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // ≥ t3·D

  int64_t head_dim, max_length, num_heads;
  OutOfRange policy;
  Tensor table;  // (t3, D) or (H, t3, D); row r ↔ δ = r − (t3 − 1), the last row is δ = 0
};

// Shaw, Uszkoreit, Vaswani 2018: tables w^K (and w^V) of 2k + 1 rows, distances clipped to
// [−k, k] (the edge rows absorb everything further, the paper's clip). The paper shares the tables
// across heads (num_heads = 0); per-head tables are the t2t option. With `values`, the value term
//   out += relative_scatter(weights, C) · w^V      (B,H,t2,t1) → (B,H,t2,R) @ (R,D) → (B,H,t2,D)
// uses the weights after dropout, as tensor2tensor does.
class ShawRelativeEmbedding : public PositionalScheme {
 public:
  ShawRelativeEmbedding(int64_t head_dim, int64_t clip, int64_t num_heads = 0, bool values = true,
                        Generator* generator = nullptr);
  std::string name() const override { return "shaw"; }
  Tensor score_term(const Tensor& q, const AttentionGeometry& g) const override;      // (B,H,t2,t1)
  Tensor value_term(const Tensor& weights, const AttentionGeometry& g) const override;  // (B,H,t2,D)
  bool fuse(FusedCall& call, const AttentionGeometry& g) const override;  // not with values (a^V)
  // The key term only: the value term is not a logit.
  std::vector<std::vector<double>> response(const ResponseInput& in, int64_t reach) const override;

  RelativeIndexOptions index_options(const AttentionGeometry& g) const;
  int64_t table_rows() const { return 2 * clip + 1; }
  static std::string check(const SchemeCheck& c);  // clip ≥ 0
  static double parameters(const PositionalConfig& p, double n_heads, double head_dim);  // ≥ (2k + 1)·D

  int64_t head_dim, clip, num_heads;
  bool values;
  Tensor key_table;    // (2k + 1, D) or (H, 2k + 1, D); row r ↔ δ = r − k
  Tensor value_table;  // same shape, or undefined without values
};

}  // namespace relgrad
