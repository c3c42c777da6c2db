// Small helpers shared by the backend entries (core/backend/*.cpp): contiguous copies and broadcast
// views made with core's raw copies, never with the differentiable Tensor methods of autograd/.
#pragma once
#include "core/cpu/elementwise.h"
#include "core/tensor.h"

namespace relgrad::backend {

// A new uninitialised tensor of `dtype` on t's device.
inline Tensor empty_on(const Tensor& t, const Shape& shape, DType dtype) {
  return empty(shape, TensorOptions(dtype).device(t.device()));
}

// t itself when contiguous (an alias: no copy), else one contiguous copy on its device; undefined stays undefined.
inline Tensor dense(const Tensor& t) {
  if (!t.defined() || t.is_contiguous()) return t;
  return copy_as(t, TensorOptions(t.dtype()).device(t.device()));
}

// t broadcast to `shape` (a view, stride 0 along broadcast dims) and made contiguous: the CUDA
// elementwise kernels take flat arrays.
inline Tensor dense_as(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return dense(t);
  return dense(make_view(t, shape, cpu::broadcast_strides(t, shape), t.offset()));
}

// The untyped pointer of an optional tensor (nullptr when undefined), for the CUDA entry points.
inline void* raw_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }
// The same, typed, for the CPU kernels.
template <class T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

}  // namespace relgrad::backend
