// Tensor: a cheap handle (shared_ptr) to a TensorImpl, a strided view over a shared Storage.
//
//   element (i0, i1, ...) lives at  storage.data + (offset + i0*strides[0] + i1*strides[1] + ...) * dtype_size
//
// Views (reshape, permute, narrow, expand, ...) make a new TensorImpl over the same Storage; no data
// moves. Autograd metadata is kept here as an opaque handle (`Node` is defined in autograd/), so core
// never includes autograd. The differentiable ops are free functions declared in autograd/ops.h; the
// methods marked "(autograd)" below are thin forwards to them, defined in autograd/tensor_methods.cpp
// and linked from the autograd library: core itself never calls them (it uses copy_into / copy_as),
// which the link check in tests/CMakeLists.txt enforces.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <vector>

#include "core/base/dtype.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/storage.h"

namespace relgrad {

struct Node;  // autograd/node.h
class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;       // in elements; 0 for broadcast (expanded) dims
  DType dtype = DType::Float32;
  // autograd metadata
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient of a leaf
  std::shared_ptr<Node> grad_fn;     // the op that produced this tensor (null for leaves)
};

// Options for factories, with chained setters as in libtorch: TensorOptions().dtype(kFloat64).
struct TensorOptions {
  DType dtype_ = DType::Float32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
  bool dtype_given_ = false;  // from_vector<T> uses T's dtype unless one was given
  TensorOptions() = default;
  TensorOptions(DType dt) : dtype_(dt), dtype_given_(true) {}  // NOLINT: implicit, so zeros({2}, kFloat64) reads naturally
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  TensorOptions dtype(DType dt) const { auto o = *this; o.dtype_ = dt; o.dtype_given_ = true; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};

using TensorList = std::vector<Tensor>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata (core) ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t offset() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  // Pointer to element 0 of this view (CPU only; T must match the dtype, both checked).
  template <class T> T* data_ptr() const;
  void* raw_data() const;  // any device, no checks on T

  // ---- values (core) ----
  double item() const;                              // one-element tensor → double
  template <class T> T item() const { return static_cast<T>(item()); }
  template <class T> std::vector<T> to_vector() const;  // copies in row-major order (dtype must match T)

  // ---- autograd metadata (core) ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires = true);  // only on leaves, as PyTorch
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  const std::shared_ptr<Node>& grad_fn() const;
  uint64_t version() const;  // bumped by in-place ops on any view of the same storage
  void bump_version() const;
  // Makes this tensor (every handle to it) refer to src's data, shape and dtype; keeps requires_grad
  // and drops .grad. For moving parameters between devices and dtypes in place (Module::to).
  void set_data(const Tensor& src);

  // ---- views and copies (autograd) ----
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a matrix
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor detach() const;  // same storage, no autograd history
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  // ---- a few common ops as methods (autograd) ----
  Tensor sum() const;
  Tensor mean() const;
  Tensor matmul(const Tensor& other) const;
  // ---- autograd (autograd) ----
  // Accumulates d(this)/d(leaf) into every leaf's .grad(). `gradient` may be omitted for a
  // one-element tensor. Frees the graph unless retain_graph.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // ---- in-place (autograd; refused on tensors that need grad while grad mode is on) ----
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // broadcasts src, converts dtype
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& add_(double value);
  Tensor& sub_(const Tensor& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double value);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double value);

 private:
  void check_defined(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

// ---- construction (core) ----
// A tensor over existing storage with explicit geometry (checked to stay inside the storage).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor scalar_tensor(double value, TensorOptions options = {});  // 0-d
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);  // contiguous, same dtype and device
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options = {});
// Copies numel(shape) elements of `dtype` from `data` (a raw host buffer).
Tensor from_blob(const void* data, const Shape& shape, DType dtype, TensorOptions options = {});

std::ostream& operator<<(std::ostream& out, const Tensor& t);
std::string to_string(const Tensor& t);

// Raw copy of src's elements into dst (same shape after broadcasting src; dtypes and devices may
// differ). No autograd: used by contiguous(), clone(), to(), copy_().
void copy_into(const Tensor& dst, const Tensor& src, const char* op);
// A new contiguous tensor holding src's values, in options' dtype and on its device. No autograd:
// this is core's own copy (core never calls the differentiable x.to() / x.contiguous(), which are
// autograd's; docs/design.md).
Tensor copy_as(const Tensor& src, TensorOptions options);

}  // namespace relgrad
