// View ops: a new TensorImpl over the same storage with other shape/strides/offset (no data copied),
// plus the copies contiguous/clone/to. Each view's backward maps the gradient back to the input's
// geometry: reshape back, permute back, pad a slice with zeros, sum an expansion.
#include <algorithm>
#include <numeric>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"

namespace relgrad {

namespace {

// Strides that let `shape` view the same elements as x (row-major order), or empty if impossible
// without a copy (the rule of PyTorch's computeStride: each run of merged dims must be contiguous).
std::vector<int64_t> view_strides(const Tensor& x, const Shape& shape) {
  const Shape& old_shape = x.shape();
  const Shape& old_strides = x.strides();
  Shape new_strides(shape.size());
  if (x.numel() == 0 || x.dim() == 0) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return {};
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return {};
  return new_strides;
}

// Replaces one -1 by the size that keeps numel; checks the element count.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      RG_CHECK_T(ShapeError, infer_at < 0, op, "only one dimension can be -1, got ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      RG_CHECK_T(ShapeError, out[i] >= 0, op, "invalid size in shape ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    RG_CHECK_T(ShapeError, known != 0 && numel % known == 0, op, "shape ", shape_str(shape),
               " is invalid for input of shape ", shape_str(from));
    out[infer_at] = numel / known;
    known *= out[infer_at];
  }
  RG_CHECK_T(ShapeError, known == numel, op, "shape ", shape_str(shape), " is invalid for input of shape ",
             shape_str(from), " (", numel, " elements)");
  return out;
}

// Records `y` as a view of x whose gradient is reshaped back to x's shape.
Tensor record_reshape_like(Tensor y, const Tensor& x, const char* op) {
  if (!needs_grad({x})) return y;
  Shape in_shape = x.shape();
  return record(y, op, {x}, [in_shape](const Tensor& g) -> TensorList { return {reshape(g, in_shape)}; });
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  Shape target = infer_shape(shape, x.numel(), "view", x.shape());
  Shape strides = view_strides(x, target);
  RG_CHECK_T(ShapeError, !strides.empty() || target.empty(), "view", "cannot view a tensor of shape ",
             shape_str(x.shape()), " strides ", shape_str(x.strides()), " as ", shape_str(target),
             " without a copy; use reshape()");
  return record_reshape_like(make_view(x, target, strides, x.offset()), x, "view");
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = infer_shape(shape, x.numel(), "reshape", x.shape());
  Shape strides = view_strides(x, target);
  if (strides.empty() && !target.empty()) return view(contiguous(x), target);  // copy, then view
  return record_reshape_like(make_view(x, target, strides, x.offset()), x, "reshape");
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = normalize_dim(start_dim, x.dim(), "flatten");
  end_dim = normalize_dim(end_dim, x.dim(), "flatten");
  RG_CHECK(start_dim <= end_dim, "flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(x.shape().begin(), x.shape().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + end_dim + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor permute(const Tensor& x, const Shape& dims) {
  RG_CHECK_T(ShapeError, static_cast<int64_t>(dims.size()) == x.dim(), "permute", "got ", dims.size(),
             " dims ", shape_str(dims), " for a tensor of shape ", shape_str(x.shape()));
  Shape shape(dims.size()), strides(dims.size()), inverse(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = normalize_dim(dims[i], x.dim(), "permute");
    RG_CHECK_T(IndexError, !used[d], "permute", "repeated dim in ", shape_str(dims));
    used[d] = true;
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  Tensor y = make_view(x, shape, strides, x.offset());
  if (!needs_grad({x})) return y;
  return record(y, "permute", {x}, [inverse](const Tensor& g) -> TensorList { return {permute(g, inverse)}; });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  if (x.dim() == 0) return x;
  Shape dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[normalize_dim(dim0, x.dim(), "transpose")], dims[normalize_dim(dim1, x.dim(), "transpose")]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  RG_CHECK_T(ShapeError, x.dim() > 0, "slice", "cannot slice a 0-d tensor");
  dim = normalize_dim(dim, x.dim(), "slice");
  RG_CHECK(step > 0, "slice", "step must be positive, got ", step);
  const int64_t n = x.shape()[dim];
  // Python slice semantics: negative indices count from the end, out-of-range ones clamp.
  auto clamp = [n](int64_t i) { return std::min(std::max(i < 0 ? i + n : i, int64_t(0)), n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape shape = x.shape(), strides = x.strides();
  shape[dim] = (end - start + step - 1) / step;
  strides[dim] *= step;
  Tensor y = make_view(x, shape, strides, x.offset() + start * x.strides()[dim]);
  if (!needs_grad({x})) return y;
  // Backward: the gradient lands in the sliced positions of a zero tensor of x's shape.
  return record(y, "slice", {x}, [in_shape = x.shape(), dim, start, end, step](const Tensor& g) -> TensorList {
    Tensor gx = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
    copy_into(slice(gx, dim, start, end, step), g, "slice_backward");
    return {gx};
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  RG_CHECK_T(ShapeError, x.dim() > 0, "narrow", "cannot narrow a 0-d tensor");
  int64_t d = normalize_dim(dim, x.dim(), "narrow");
  int64_t n = x.shape()[d];
  if (start < 0) start += n;
  RG_CHECK_T(IndexError, start >= 0 && length >= 0 && start + length <= n, "narrow", "start ", start, " length ",
             length, " out of range for dim ", d, " of size ", n, " (shape ", shape_str(x.shape()), ")");
  return slice(x, d, start, start + length);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  RG_CHECK_T(ShapeError, x.dim() > 0, "select", "cannot select from a 0-d tensor");
  int64_t d = normalize_dim(dim, x.dim(), "select");
  int64_t n = x.shape()[d];
  RG_CHECK_T(IndexError, index >= -n && index < n, "select", "index ", index, " out of range for dim ", d,
             " of size ", n, " (shape ", shape_str(x.shape()), ")");
  if (index < 0) index += n;
  return squeeze(slice(x, d, index, index + 1), d);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  RG_CHECK_T(ShapeError, static_cast<int64_t>(shape.size()) >= x.dim(), "expand", "cannot expand shape ",
             shape_str(x.shape()), " to ", shape_str(shape), " (fewer dims)");
  const int64_t lead = static_cast<int64_t>(shape.size()) - x.dim();
  Shape out_shape(shape.size()), strides(shape.size(), 0);
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    int64_t want = shape[i];
    if (i < lead) {
      RG_CHECK_T(ShapeError, want >= 0, "expand", "size -1 not allowed in a new leading dim: ", shape_str(shape));
      out_shape[i] = want;
      continue;
    }
    int64_t have = x.shape()[i - lead];
    if (want == -1) want = have;
    RG_CHECK_T(ShapeError, want == have || have == 1, "expand", "cannot expand shape ", shape_str(x.shape()), " to ",
               shape_str(shape));
    out_shape[i] = want;
    strides[i] = want == have ? x.strides()[i - lead] : 0;
  }
  Tensor y = make_view(x, out_shape, strides, x.offset());
  if (!needs_grad({x})) return y;
  return record(y, "expand", {x}, [in_shape = x.shape()](const Tensor& g) -> TensorList { return {sum_to(g, in_shape)}; });
}

Tensor squeeze(const Tensor& x) {
  Shape shape, strides;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (x.shape()[i] != 1) {
      shape.push_back(x.shape()[i]);
      strides.push_back(x.strides()[i]);
    }
  return record_reshape_like(make_view(x, shape, strides, x.offset()), x, "squeeze");
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return x;
  int64_t d = normalize_dim(dim, x.dim(), "squeeze");
  if (x.shape()[d] != 1) return x;  // as PyTorch: squeezing a dim that is not 1 is a no-op
  Shape shape = x.shape(), strides = x.strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return record_reshape_like(make_view(x, shape, strides, x.offset()), x, "squeeze");
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  int64_t d = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape(), strides = x.strides();
  int64_t stride = d < x.dim() ? x.strides()[d] * x.shape()[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return record_reshape_like(make_view(x, shape, strides, x.offset()), x, "unsqueeze");
}

// ---- copies ----------------------------------------------------------------------------------------
Tensor clone(const Tensor& x) {
  RG_PROFILE_OP("clone");
  Tensor y = empty(x.shape(), TensorOptions(x.dtype()).device(x.device()));
  copy_into(y, x, "clone");
  if (!needs_grad({x})) return y;
  return record(y, "clone", {x}, [](const Tensor& g) -> TensorList { return {g}; });
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor to_dtype(const Tensor& x, DType dtype) {
  RG_PROFILE_OP("to");
  if (x.dtype() == dtype) return x;
  Tensor y = empty(x.shape(), TensorOptions(dtype).device(x.device()));
  copy_into(y, x, "to");
  // A cast between floating dtypes (the 16-bit storage ones too) is differentiable: its backward casts
  // the gradient back, so float32 → bfloat16 → float32 hands the float32 input a rounded gradient.
  if (!needs_grad({x}) || !(is_floating(dtype) || is_16bit_float(dtype))) return y;
  return record(y, "to", {x}, [from = x.dtype()](const Tensor& g) -> TensorList { return {to_dtype(g, from)}; });
}

Tensor to_device(const Tensor& x, Device device) {
  RG_PROFILE_OP("to");
  if (x.device() == device) return x;
  Tensor y = empty(x.shape(), TensorOptions(x.dtype()).device(device));
  copy_into(y, x, "to");
  if (!needs_grad({x})) return y;
  return record(y, "to", {x}, [from = x.device()](const Tensor& g) -> TensorList { return {to_device(g, from)}; });
}

}  // namespace relgrad
