#include "core/window.h"

#include <algorithm>

namespace relgrad {

std::shared_ptr<const MatrixWindow> MatrixWindow::make(int64_t rows, int64_t cols, std::vector<int64_t> lo,
                                                       std::vector<int64_t> hi, const char* op) {
  RG_CHECK_T(ShapeError, rows >= 0 && cols >= 0 && int64_t(lo.size()) == rows && int64_t(hi.size()) == rows, op,
             "a window over (", rows, ", ", cols, ") needs ", rows, " row ranges, got ", lo.size(), " and ",
             hi.size());
  auto w = std::make_shared<MatrixWindow>();
  w->rows = rows, w->cols = cols;
  w->col_lo.assign(static_cast<size_t>(cols), rows);
  w->col_hi.assign(static_cast<size_t>(cols), 0);
  for (int64_t i = 0; i < rows; ++i) {
    RG_CHECK_T(ShapeError, 0 <= lo[i] && lo[i] <= hi[i] && hi[i] <= cols, op, "window row ", i, " keeps columns [",
               lo[i], ", ", hi[i], "), which is not within [0, ", cols, "]");
    for (int64_t j = lo[i]; j < hi[i]; ++j) {  // O(entries inside), once per window
      w->col_lo[j] = std::min(w->col_lo[j], i);
      w->col_hi[j] = std::max(w->col_hi[j], i + 1);
    }
  }
  w->lo = std::move(lo), w->hi = std::move(hi);
  return w;
}

std::shared_ptr<const MatrixWindow> MatrixWindow::causal(const std::vector<int64_t>& positions, int64_t cols,
                                                         const char* op) {
  const int64_t rows = static_cast<int64_t>(positions.size());
  std::vector<int64_t> lo(static_cast<size_t>(rows), 0), hi(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) hi[i] = std::clamp<int64_t>(positions[i] + 1, 0, cols);
  return make(rows, cols, std::move(lo), std::move(hi), op);
}

double MatrixWindow::density() const {
  double inside = 0;
  for (int64_t i = 0; i < rows; ++i) inside += double(hi[i] - lo[i]);
  return rows * cols == 0 ? 1.0 : inside / (double(rows) * double(cols));
}

Tensor MatrixWindow::outside(const Device& device) const {
  Tensor mask = empty({rows, cols}, TensorOptions(kBool));
  bool* p = mask.data_ptr<bool>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) p[i * cols + j] = j < lo[i] || j >= hi[i];
  return device.is_cuda() ? copy_as(mask, TensorOptions(kBool).device(device)) : mask;
}

}  // namespace relgrad
