// where(cond, a, b) and masked_fill(x, mask, value): a three-way select with NumPy broadcasting
// (kernels: cpu::where_kernel in core/cpu/index.h, cuda::where_select in cuda/reduce.h; both read the
// operands in place through their broadcast strides). The gradient goes to whichever operand was picked,
// then sum_to folds it back over the dims that broadcasting added.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/cpu/elementwise.h"
#include "core/cpu/index.h"
#include "cuda/reduce.h"

namespace relgrad {

namespace {

void check_mask(const Tensor& mask, const char* op, const char* name) {
  RG_CHECK(mask.defined(), op, name, " is an undefined tensor");
  RG_CHECK_T(DTypeError, mask.dtype() == kBool, op, name, " must be bool, got ", dtype_name(mask.dtype()), " ",
             shape_str(mask.shape()), " (make one with a comparison, e.g. gt(x, 0))");
}

// out (shape) = cond ? a : b, all three broadcast to `shape`; a and b share a dtype.
Tensor select_forward(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, const char* op) {
  Tensor out = empty(shape, TensorOptions(a.dtype()).device(a.device()));
  Shape cs = cpu::broadcast_strides(cond, shape), as = cpu::broadcast_strides(a, shape),
        bs = cpu::broadcast_strides(b, shape);
  dispatch_all(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    if (a.device().is_cuda()) {
      cuda::where_select(a.dtype(), shape, out.raw_data(), static_cast<const bool*>(cond.raw_data()), cs, a.raw_data(),
                         as, b.raw_data(), bs, a.device().index);
      return;
    }
    cpu::where_kernel<T>(shape, out.data_ptr<T>(), cond.data_ptr<bool>(), cs, static_cast<const T*>(a.raw_data()), as,
                         static_cast<const T*>(b.raw_data()), bs);
  });
  return out;
}

// A 0-d zero of g's dtype on g's device (where needs all operands on one device).
Tensor zero_like_scalar(const Tensor& g) { return scalar_tensor(0.0, TensorOptions(g.dtype()).device(g.device())); }

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const char* op = "where";
  check_mask(cond, op, "condition");
  RG_CHECK(a.defined() && b.defined(), op, "a and b must be defined tensors");
  check_same_device(cond, a, op);
  check_same_device(cond, b, op);
  RG_CHECK_T(DTypeError, a.dtype() == b.dtype(), op, "a and b must have the same dtype, got ", dtype_name(a.dtype()),
             " ", shape_str(a.shape()), " and ", dtype_name(b.dtype()), " ", shape_str(b.shape()));
  Shape shape;
  try {
    shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), op), b.shape(), op);
  } catch (const ShapeError&) {  // name all three shapes, not the intermediate one
    throw ShapeError(detail::concat("[where] shapes cannot be broadcast: condition ", shape_str(cond.shape()),
                                    ", a ", shape_str(a.shape()), ", b ", shape_str(b.shape())));
  }
  Tensor out = select_forward(cond, a, b, shape, op);
  if (!needs_grad({a, b})) return out;
  // Saves only the condition: the gradient of a select does not depend on the selected values.
  return record(out, op, {a, b},
                [need_a = a.requires_grad(), need_b = b.requires_grad(), sa = a.shape(), sb = b.shape(),
                 cond = SavedTensor(cond)](const Tensor& g) -> TensorList {
                  const Tensor& c = cond.get();
                  Tensor zero = zero_like_scalar(g);
                  return {need_a ? sum_to(where(c, g, zero), sa) : Tensor(),
                          need_b ? sum_to(where(c, zero, g), sb) : Tensor()};
                });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  const char* op = "masked_fill";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  check_mask(mask, op, "mask");
  check_same_device(x, mask, op);
  Shape shape = broadcast_shapes(x.shape(), mask.shape(), op);
  Tensor out = select_forward(mask, scalar_tensor(value, TensorOptions(x.dtype()).device(x.device())), x, shape, op);
  if (!needs_grad({x})) return out;
  // Masked positions were overwritten by a constant: they get no gradient.
  return record(out, op, {x}, [sx = x.shape(), mask = SavedTensor(mask)](const Tensor& g) -> TensorList {
    return {sum_to(where(mask.get(), zero_like_scalar(g), g), sx)};
  });
}

}  // namespace relgrad
