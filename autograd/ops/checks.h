// Argument checks shared by the op families, so every op words the same failure the same way.
#pragma once
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

}  // namespace relgrad
