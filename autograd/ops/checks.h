// Argument checks shared by the op families, so every op words the same failure the same way.
#pragma once
#include <algorithm>

#include "core/tensor.h"

namespace relgrad {

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  RG_CHECK_T(DeviceError, a.device() == b.device(), op, "tensors are on different devices: ", a.device().str(),
             " and ", b.device().str());
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  RG_CHECK_T(DTypeError, a.dtype() == b.dtype(), op, "dtypes differ: ", dtype_name(a.dtype()), " ",
             shape_str(a.shape()), " and ", dtype_name(b.dtype()), " ", shape_str(b.shape()),
             " (convert one with .to(dtype))");
}

// True when `from` broadcasts to exactly `to` (NumPy rules, aligned from the right).
inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != to[lead + i] && from[i] != 1) return false;
  return true;
}

// The batch dims of a (.., n, k) and b (.., k, m) broadcast together (both at least 2-D).
inline Shape batch_shape(const Tensor& a, const Tensor& b, const char* op) {
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const size_t nb = std::max(ab.size(), bb.size());
  Shape out(nb);
  for (size_t i = 0; i < nb; ++i) {  // aligned from the right, as NumPy
    int64_t da = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1;
    int64_t db = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
    RG_CHECK_T(ShapeError, da == db || da == 1 || db == 1, op, "batch dimensions cannot be broadcast: ",
               shape_str(a.shape()), " @ ", shape_str(b.shape()));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace relgrad
