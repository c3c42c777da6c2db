// Indexing ops: embedding, index_select and gather share one gather entry (forward) and the
// deterministic scatter-adds (backward) of core/backend/index.h (bitwise the same gradients on every
// device: each output element sums its contributions in the same order, no atomics). Index values are
// always checked on the host first (a CUDA index is copied down once, and not again while it is the
// same unchanged tensor: backend::check_index_values), so that a bad index gives the same IndexError
// on every device. Then the concatenation
// family: cat copies into slices of one output (backward: slices of g); stack is unsqueeze + cat;
// split and chunk are narrow views, so their gradients flow through narrow's backward.
#include <algorithm>
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/index.h"

namespace relgrad {

namespace {

// Index tensors must be int64 on the device of the tensor they index (`x`). Returns them contiguous,
// since the kernels read them as flat arrays (an alias when already contiguous, so SavedTensor's
// version check still guards it).
Tensor index_arg(const Tensor& index, const Tensor& x, const char* op, const char* name) {
  RG_CHECK(index.defined(), op, name, " is an undefined tensor");
  check_same_device(x, index, op);
  RG_CHECK_T(DTypeError, index.dtype() == kInt64, op, name, " must be int64, got ", dtype_name(index.dtype()), " ",
             shape_str(index.shape()));
  return index.detach().contiguous();
}

// Every value of idx in [0, size), or the IndexError naming `what`.
void check_range(const Tensor& idx, int64_t size, const char* op, const std::string& what) {
  backend::check_index_values(idx, 0, size, [&](const Tensor& host) { backend::check_indices(host, size, op, what); });
}

TensorOptions like(const Tensor& t, DType dtype) { return TensorOptions(dtype).device(t.device()); }

int64_t prod(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

}  // namespace

// ---- embedding: weight (V, C), indices (...) → out (..., C) --------------------------------------
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  RG_PROFILE_OP("embedding");
  const char* op = "embedding";
  RG_CHECK(weight.defined(), op, "weight is an undefined tensor");
  RG_CHECK_T(ShapeError, weight.dim() == 2, op, "weight must be 2-D (V, C), got ", shape_str(weight.shape()));
  Tensor idx = index_arg(indices, weight, op, "indices");
  const int64_t V = weight.size(0), C = weight.size(1);
  RG_CHECK_T(IndexError, padding_idx == -1 || (padding_idx >= 0 && padding_idx < V), op, "padding_idx ",
             padding_idx, " is out of range for weight ", shape_str(weight.shape()), " (use -1 for none)");
  check_range(idx, V, op, "weight " + shape_str(weight.shape()) + ", indices " + shape_str(indices.shape()));
  Shape out_shape = indices.shape();
  out_shape.push_back(C);
  // Gather along a new dim: each index picks a row of weight (step weight.stride(0)), C columns each.
  Shape w_strides(indices.dim(), 0), i_strides = contiguous_strides(indices.shape());
  w_strides.push_back(weight.stride(1));
  i_strides.push_back(0);
  Tensor out = backend::gather(weight, out_shape, w_strides, weight.stride(0), idx, i_strides, false, op);
  if (!needs_grad({weight})) return out;
  // Saves only the indices (on the weight's device, where the backward sorts them): the gradient of
  // a lookup does not depend on the weight's values.
  return record(out, op, {weight}, [V, C, padding_idx, idx = SavedTensor(idx)](const Tensor& g) -> TensorList {
    // g (N, C) with N = numel(indices); every row of gw written (padding_idx's with 0)
    return {backend::scatter_add_rows(g.contiguous(), idx.get(), padding_idx, {V, C}, 1, V, C, "embedding_backward")};
  });
}

// ---- index_select: x (O, n, I) along dim, index (K) → out (O, K, I) -------------------------------
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  RG_PROFILE_OP("index_select");
  const char* op = "index_select";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  Tensor idx = index_arg(index, x, op, "index");
  RG_CHECK_T(ShapeError, x.dim() >= 1, op, "cannot index a 0-d tensor");
  RG_CHECK_T(ShapeError, index.dim() <= 1, op, "index must be 1-D, got shape ", shape_str(index.shape()));
  const int64_t d = normalize_dim(dim, x.dim(), op);
  check_range(idx, x.size(d), op, "dim " + std::to_string(d) + " of x " + shape_str(x.shape()));
  Shape out_shape = x.shape();
  out_shape[d] = idx.numel();
  Shape x_strides = x.strides(), i_strides(x.dim(), 0);
  x_strides[d] = 0;  // the index value supplies the position along dim
  i_strides[d] = 1;  // one index per position along dim, shared by all other positions
  Tensor out = backend::gather(x, out_shape, x_strides, x.stride(d), idx, i_strides, true, op);  // any dtype
  if (!needs_grad({x})) return out;
  // Saves the index on x's device, where the backward sorts it.
  return record(out, op, {x}, [x_shape = x.shape(), d, idx = SavedTensor(idx)](const Tensor& g) -> TensorList {
    const int64_t O = prod(x_shape, 0, d), I = prod(x_shape, d + 1, x_shape.size());
    // g (O, K, I) → gx (O, n, I), every element written
    return {backend::scatter_add_rows(g.contiguous(), idx.get(), -1, x_shape, O, x_shape[d], I, "index_select_backward")};
  });
}

// ---- gather: out[..., k, ...] = x[..., index[..., k, ...], ...] along dim; out has index's shape ----
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  RG_PROFILE_OP("gather");
  const char* op = "gather";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  Tensor idx = index_arg(index, x, op, "index");
  RG_CHECK_T(ShapeError, x.dim() >= 1, op, "cannot gather from a 0-d tensor");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  RG_CHECK_T(ShapeError, index.dim() == x.dim(), op, "index ", shape_str(index.shape()),
             " must have as many dims as x ", shape_str(x.shape()));
  for (int64_t k = 0; k < x.dim(); ++k)
    RG_CHECK_T(ShapeError, k == d || index.size(k) <= x.size(k), op, "index ", shape_str(index.shape()),
               " is larger than x ", shape_str(x.shape()), " in dim ", k, " (gather is along dim ", d, ")");
  check_range(idx, x.size(d), op, "dim " + std::to_string(d) + " of x " + shape_str(x.shape()));
  Shape x_strides = x.strides();
  x_strides[d] = 0;  // the index value supplies the position along dim
  Tensor out = backend::gather(x, index.shape(), x_strides, x.stride(d), idx, contiguous_strides(index.shape()), true,
                               op);  // any dtype
  if (!needs_grad({x})) return out;
  return record(out, op, {x}, [x_shape = x.shape(), d, idx = SavedTensor(idx)](const Tensor& g) -> TensorList {
    const Tensor& ix = idx.get();
    const Shape& is = ix.shape();
    const int64_t O = prod(is, 0, d), K = is[d], I = prod(is, d + 1, is.size()), n = x_shape[d];
    // The index only reaches the leading corner of x (index's sizes, all of dim d): scatter into a
    // contiguous (O, n, I) block for that corner, then place it in x's shape when it is smaller.
    Shape corner = is;
    corner[d] = n;
    // g (O, K, I); the index stays on g's device
    Tensor gr = backend::scatter_add_columns(g.contiguous(), ix, corner, O, K, n, I, "gather_backward");
    if (corner == x_shape) return {gr};
    Tensor gx = zeros(x_shape, like(g, g.dtype()));
    copy_into(make_view(gx, corner, gx.strides(), 0), gr, "gather_backward");
    return {gx};
  });
}

// ---- cat / stack ----------------------------------------------------------------------------------
namespace {
// Every tensor defined, on tensors[0]'s device, of its dtype.
void check_list(const TensorList& tensors, const char* op) {
  RG_CHECK(!tensors.empty(), op, "expected a non-empty list of tensors");
  for (size_t k = 0; k < tensors.size(); ++k) {
    RG_CHECK(tensors[k].defined(), op, "tensor ", k, " is an undefined tensor");
    check_same_device(tensors[0], tensors[k], op);
    RG_CHECK_T(DTypeError, tensors[k].dtype() == tensors[0].dtype(), op, "tensor ", k, " has dtype ",
               dtype_name(tensors[k].dtype()), " but tensor 0 has ", dtype_name(tensors[0].dtype()),
               " (convert with .to(dtype))");
  }
}
}  // namespace

Tensor cat(const TensorList& tensors, int64_t dim) {
  RG_PROFILE_OP("cat");
  const char* op = "cat";
  check_list(tensors, op);
  const Tensor& first = tensors[0];
  RG_CHECK_T(ShapeError, first.dim() > 0, op, "zero-dimensional tensors cannot be concatenated (use stack)");
  const int64_t d = normalize_dim(dim, first.dim(), op);
  Shape out_shape = first.shape(), sizes;
  out_shape[d] = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Shape& s = tensors[k].shape();
    bool match = s.size() == first.shape().size();
    for (size_t i = 0; match && i < s.size(); ++i) match = static_cast<int64_t>(i) == d || s[i] == first.shape()[i];
    RG_CHECK_T(ShapeError, match, op, "sizes must match except in dim ", d, ": tensor 0 is ",
               shape_str(first.shape()), ", tensor ", k, " is ", shape_str(s));
    sizes.push_back(s[d]);
    out_shape[d] += s[d];
  }
  // Each input is copied into its slice of the output, a view at offset `start` along dim.
  Tensor out = empty(out_shape, like(first, first.dtype()));  // slices filled by copy_into, on any device
  int64_t start = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    copy_into(make_view(out, tensors[k].shape(), out.strides(), start * out.stride(d)), tensors[k], op);
    start += sizes[k];
  }
  if (!needs_grad(tensors)) return out;
  return record(out, op, tensors, [d, sizes](const Tensor& g) -> TensorList {
    TensorList grads;
    int64_t begin = 0;
    for (int64_t s : sizes) {
      grads.push_back(narrow(g, d, begin, s));
      begin += s;
    }
    return grads;
  });
}

Tensor stack(const TensorList& tensors, int64_t dim) {
  RG_PROFILE_OP("stack");
  const char* op = "stack";
  check_list(tensors, op);
  for (size_t k = 0; k < tensors.size(); ++k)
    RG_CHECK_T(ShapeError, tensors[k].shape() == tensors[0].shape(), op, "all tensors must have the same shape: tensor 0 is ",
               shape_str(tensors[0].shape()), ", tensor ", k, " is ", shape_str(tensors[k].shape()));
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, op);
  TensorList parts;
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

// ---- split / chunk: narrow views (no copy) ----------------------------------------------------------
TensorList split(const Tensor& x, const Shape& split_sizes, int64_t dim) {
  const char* op = "split";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  RG_CHECK_T(ShapeError, x.dim() > 0, op, "cannot split a 0-d tensor");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    RG_CHECK(s >= 0, op, "split sizes must be non-negative, got ", shape_str(split_sizes));
    total += s;
  }
  RG_CHECK_T(ShapeError, total == x.size(d), op, "split sizes ", shape_str(split_sizes), " sum to ", total,
             " but dim ", d, " of x ", shape_str(x.shape()), " has size ", x.size(d));
  TensorList parts;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    parts.push_back(narrow(x, d, start, s));
    start += s;
  }
  return parts;
}

TensorList split(const Tensor& x, int64_t split_size, int64_t dim) {
  const char* op = "split";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  RG_CHECK_T(ShapeError, x.dim() > 0, op, "cannot split a 0-d tensor");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  const int64_t n = x.size(d);
  RG_CHECK(split_size > 0 || (split_size == 0 && n == 0), op, "split_size must be positive, got ", split_size,
           " for dim ", d, " of x ", shape_str(x.shape()));
  if (n == 0) return {narrow(x, d, 0, 0)};  // as PyTorch: one empty piece
  Shape sizes;
  for (int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
  return split(x, sizes, d);
}

TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const char* op = "chunk";
  RG_CHECK(x.defined(), op, "x is an undefined tensor");
  RG_CHECK_T(ShapeError, x.dim() > 0, op, "cannot chunk a 0-d tensor");
  RG_CHECK(chunks > 0, op, "chunks must be positive, got ", chunks);
  const int64_t d = normalize_dim(dim, x.dim(), op);
  const int64_t n = x.size(d);
  // As PyTorch: chunks of ceil(n / chunks), so there may be fewer than `chunks` pieces; a size-0 dim
  // gives `chunks` empty pieces.
  if (n == 0) return split(x, Shape(chunks, 0), d);
  return split(x, (n + chunks - 1) / chunks, d);
}

}  // namespace relgrad
