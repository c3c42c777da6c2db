// Shapes and strides are plain vectors of int64 (strides counted in elements, not bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace relgrad {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
// Row-major (C-order) strides for `shape`.
Shape contiguous_strides(const Shape& shape);
// The element offset of every index of `shape`, in row-major order of the index, for a view with
// these `strides` (0 along a broadcast dim): the start of each batch entry or row of a strided tensor.
std::vector<int64_t> strided_offsets(const Shape& shape, const Shape& strides);
// "(2,3,4)"; "()" for a scalar.
std::string shape_str(const Shape& shape);
// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a negative dim (-1 = last) and checks it lies in [0, ndim); throws IndexError naming `op`.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace relgrad
