// A window over a matrix X: the entries of X that may be nonzero, row i keeping columns [lo[i], hi[i]).
// Products with such an X (attention's causal scores and weights) skip what lies outside:
// core/backend/window_matmul.h, and the ops window_scores, window_apply, window_apply_t (autograd/ops.h).
#pragma once
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace relgrad {

// Where X stands in a product C = A @ B: C itself, A, or Aᵀ (A is a transposed view of X).
enum class WindowOn { Output, Left, LeftTransposed };

// Which entries of a (rows, cols) matrix are inside: row i keeps [lo[i], hi[i]), 0 ≤ lo ≤ hi ≤ cols.
struct MatrixWindow {
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> lo, hi;
  std::vector<int64_t> col_lo, col_hi;  // column j: the rows that keep it lie in [col_lo[j], col_hi[j])

  // Checked (a ShapeError naming `op` and the row): sizes, and 0 ≤ lo[i] ≤ hi[i] ≤ cols.
  static std::shared_ptr<const MatrixWindow> make(int64_t rows, int64_t cols, std::vector<int64_t> lo,
                                                  std::vector<int64_t> hi, const char* op);
  // Causal attention's: query i (at position positions[i]) sees keys [0, min(positions[i] + 1, cols)).
  static std::shared_ptr<const MatrixWindow> causal(const std::vector<int64_t>& positions, int64_t cols,
                                                    const char* op);
  // The entries inside / all entries.
  double density() const;
  // bool (rows, cols) on `device`, true outside the window: the composite's mask.
  Tensor outside(const Device& device) const;
};

}  // namespace relgrad
