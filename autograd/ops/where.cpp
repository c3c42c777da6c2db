// where(cond, a, b) and masked_fill(x, mask, value): a three-way select with NumPy broadcasting
// (backend::where_select, core/backend/elementwise.h, reads the operands in place through their
// broadcast strides on either device). The gradient goes to whichever operand was picked,
// then sum_to folds it back over the dims that broadcasting added.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/elementwise.h"

namespace relgrad {

namespace {

void check_mask(const Tensor& mask, const char* op, const char* name) {
  RG_CHECK(mask.defined(), op, name, " is an undefined tensor");
  RG_CHECK_T(DTypeError, mask.dtype() == kBool, op, name, " must be bool, got ", dtype_name(mask.dtype()), " ",
             shape_str(mask.shape()), " (make one with a comparison, e.g. gt(x, 0))");
}

// A 0-d zero of g's dtype on g's device (where needs all operands on one device).
Tensor zero_like_scalar(const Tensor& g) { return scalar_tensor(0.0, TensorOptions(g.dtype()).device(g.device())); }

}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const char* op = "where";
  RG_PROFILE_OP(op);
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
  Tensor out = backend::where_select(cond, a, b, shape, op);
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
  RG_PROFILE_OP(op);
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  check_mask(mask, op, "mask");
  check_same_device(x, mask, op);
  Shape shape = broadcast_shapes(x.shape(), mask.shape(), op);
  Tensor out = backend::where_select(mask, scalar_tensor(value, TensorOptions(x.dtype()).device(x.device())), x, shape, op);
  if (!needs_grad({x})) return out;
  // Masked positions were overwritten by a constant: they get no gradient.
  return record(out, op, {x}, [sx = x.shape(), mask = SavedTensor(mask)](const Tensor& g) -> TensorList {
    return {sum_to(where(mask.get(), zero_like_scalar(g), g), sx)};
  });
}

}  // namespace relgrad
