#include "core/shape.h"

#include "core/base/error.h"

namespace relgrad {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> strided_offsets(const Shape& shape, const Shape& strides) {
  std::vector<int64_t> offsets(shape_numel(shape));
  // An odometer over the index, last dim fastest: each step adds one stride, or rolls dims back to 0
  // (the division of each element's number by each dim, 2 integer divisions an element and dim, was
  // a sixth of attention's fused softmax at the main job's sizes: docs/benchmarks.md, "The roofline").
  Shape index(shape.size(), 0);
  int64_t off = 0;
  for (size_t e = 0; e < offsets.size(); ++e) {
    offsets[e] = off;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= (shape[d] - 1) * strides[d];
      index[d] = 0;
    }
  }
  return offsets;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + ")";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = a.size() > b.size() ? a.size() : b.size();
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    RG_CHECK_T(ShapeError, da == db || da == 1 || db == 1, op, "shapes cannot be broadcast: ", shape_str(a), " and ",
               shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t range = ndim > 0 ? ndim : 1;  // a scalar accepts dim 0 / -1, as PyTorch
  RG_CHECK_T(IndexError, dim >= -range && dim < range, op, "dim ", dim, " out of range for a tensor of ", ndim,
             " dimensions");
  return dim < 0 ? dim + range : dim;
}

}  // namespace relgrad
