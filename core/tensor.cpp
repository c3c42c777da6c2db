// Tensor metadata, factories and raw copies. No autograd here (see autograd/).
#include "core/tensor.h"

#include <cmath>
#include <cstring>

#include "core/strided.h"
#include "cuda/runtime.h"

namespace relgrad {

void Tensor::check_defined(const char* what) const {
  RG_CHECK(impl_ != nullptr, what, "called on an undefined tensor");
}

const Shape& Tensor::shape() const { check_defined("shape"); return impl_->shape; }
const Shape& Tensor::strides() const { check_defined("strides"); return impl_->strides; }
int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[normalize_dim(d, dim(), "stride")]; }
int64_t Tensor::offset() const { check_defined("offset"); return impl_->offset; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::numel() const { return shape_numel(shape()); }
DType Tensor::dtype() const { check_defined("dtype"); return impl_->dtype; }
Device Tensor::device() const { check_defined("device"); return impl_->storage->device(); }

bool Tensor::is_contiguous() const {
  const Shape& sh = shape();
  // No elements: every layout is the same empty one (as PyTorch says). Without this, empty({3, 0})
  // was not contiguous, since contiguous_strides() counts a 0 dim as 1 (found by fuzz_safetensors).
  for (int64_t d : sh)
    if (d == 0) return true;
  int64_t expected = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;  // any stride is fine along a size-1 dim
    if (impl_->strides[i] != expected) return false;
    expected *= sh[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  check_defined("data_ptr");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(dtype_size(impl_->dtype));
}

template <class T>
T* Tensor::data_ptr() const {
  check_defined("data_ptr");
  RG_CHECK_T(DTypeError, impl_->dtype == dtype_of<T>::value, "data_ptr", "tensor has dtype ", dtype_name(impl_->dtype),
             ", asked for ", dtype_name(dtype_of<T>::value));
  RG_CHECK_T(DeviceError, device().is_cpu(), "data_ptr", "tensor is on ", device().str(),
             "; copy it to the CPU with .to(Device::cpu()) first");
  return static_cast<T*>(raw_data());
}
template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template int64_t* Tensor::data_ptr<int64_t>() const;
template bool* Tensor::data_ptr<bool>() const;
template BFloat16* Tensor::data_ptr<BFloat16>() const;
template Float16* Tensor::data_ptr<Float16>() const;

double Tensor::item() const {
  RG_CHECK_T(ShapeError, numel() == 1, "item", "only a one-element tensor can be converted to a scalar, got shape ",
             shape_str(shape()));
  Tensor host = device().is_cpu() ? *this : copy_as(*this, TensorOptions(dtype()));
  return dispatch_storage(dtype(), "item", [&](auto zero) {
    using T = decltype(zero);
    return static_cast<double>(*host.data_ptr<T>());
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = device().is_cpu() && is_contiguous() ? *this : copy_as(*this, TensorOptions(dtype()));
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

bool Tensor::requires_grad() const { check_defined("requires_grad"); return impl_->requires_grad; }
bool Tensor::is_leaf() const { check_defined("is_leaf"); return impl_->grad_fn == nullptr; }
Tensor& Tensor::requires_grad_(bool requires) {
  check_defined("requires_grad_");
  RG_CHECK(is_leaf() || requires, "requires_grad_", "can only change requires_grad of leaf tensors");
  RG_CHECK_T(DTypeError, !requires || is_floating(dtype()), "requires_grad_",
             "only floating tensors can require gradients, got ", dtype_name(dtype()));
  impl_->requires_grad = requires;
  return *this;
}
Tensor Tensor::grad() const { check_defined("grad"); return Tensor(impl_->grad); }
void Tensor::set_grad(const Tensor& g) {
  check_defined("set_grad");
  if (g.defined())
    RG_CHECK_T(ShapeError, g.shape() == shape(), "set_grad", "gradient shape ", shape_str(g.shape()),
               " differs from tensor shape ", shape_str(shape()));
  impl_->grad = g.impl_;
}
const std::shared_ptr<Node>& Tensor::grad_fn() const { check_defined("grad_fn"); return impl_->grad_fn; }
uint64_t Tensor::version() const { check_defined("version"); return impl_->storage->version(); }
void Tensor::bump_version() const { check_defined("bump_version"); impl_->storage->bump_version(); }

// ---------------------------------------------------------------------------------------------
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  RG_CHECK(shape.size() == strides.size(), "view", "shape ", shape_str(shape), " and strides ", shape_str(strides),
           " differ in length");
  // The view must stay inside the storage: check the lowest and highest element it can reach.
  int64_t lo = offset, hi = offset;
  bool empty_view = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    RG_CHECK_T(ShapeError, shape[i] >= 0, "view", "negative size in shape ", shape_str(shape));
    if (shape[i] == 0) empty_view = true;
    int64_t reach = (shape[i] - 1) * strides[i];
    (reach < 0 ? lo : hi) += reach;
  }
  int64_t capacity = static_cast<int64_t>(base.impl()->storage->nbytes() / dtype_size(base.dtype()));
  RG_CHECK_T(IndexError, empty_view || (lo >= 0 && hi < capacity), "view", "shape ", shape_str(shape), " strides ",
             shape_str(strides), " offset ", offset, " reaches outside a storage of ", capacity, " elements");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = base.dtype();
  return Tensor(impl);
}

Tensor empty(const Shape& shape, TensorOptions options) {
  // The byte count is computed with overflow checks: a huge shape is an error, not a wrapped size.
  int64_t nbytes = static_cast<int64_t>(dtype_size(options.dtype_));
  for (int64_t s : shape) {
    RG_CHECK_T(ShapeError, s >= 0, "empty", "negative size in shape ", shape_str(shape));
    RG_CHECK_T(ShapeError, !__builtin_mul_overflow(nbytes, s, &nbytes), "empty", "shape ", shape_str(shape),
               " of ", dtype_name(options.dtype_), " is too large to address");
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), options.device_);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype_;
  Tensor t(impl);
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

namespace {
// Fills a contiguous tensor with value(i) for i in [0, numel): computed on the host, then copied.
template <class Fn>
Tensor fill_with(const Shape& shape, TensorOptions options, Fn value) {
  Tensor host = empty(shape, options.device(Device::cpu()).requires_grad(false));
  dispatch_storage(options.dtype_, "fill", [&](auto zero) {
    using T = decltype(zero);
    T* p = host.data_ptr<T>();
    int64_t n = host.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value(i));
  });
  Tensor out = options.device_.is_cpu() ? host : copy_as(host, TensorOptions(host.dtype()).device(options.device_));
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}

// A constant: on a GPU filled there (no host copy, so scalar operands and zeros cost no transfer).
Tensor fill_constant(const Shape& shape, double v, TensorOptions o) {
  if (o.device_.is_cpu()) return fill_with(shape, o, [v](int64_t) { return v; });
  Tensor out = empty(shape, o.requires_grad(false));
  cuda::fill(out.raw_data(), o.dtype_, v, out.numel(), o.device_.index);
  if (o.requires_grad_) out.requires_grad_(true);
  return out;
}
}  // namespace

Tensor zeros(const Shape& shape, TensorOptions o) { return fill_constant(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return fill_constant(shape, 1.0, o); }
Tensor full(const Shape& shape, double v, TensorOptions o) { return fill_constant(shape, v, o); }
Tensor scalar_tensor(double v, TensorOptions o) { return full({}, v, o); }
Tensor arange(double end, TensorOptions o) { return arange(0.0, end, 1.0, o); }
Tensor arange(double start, double end, double step, TensorOptions o) {
  RG_CHECK(step != 0.0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
           "invalid range start=", start, " end=", end, " step=", step);
  RG_CHECK((end - start) * step >= 0, "arange", "step ", step, " goes away from end (start=", start, ", end=", end, ")");
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  return fill_with({n}, o, [=](int64_t i) { return start + step * static_cast<double>(i); });
}
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype()).device(t.device())); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), TensorOptions(t.dtype()).device(t.device())); }

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions options) {
  RG_CHECK_T(ShapeError, static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector", "got ",
             values.size(), " values for shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  return fill_with(shape, options.dtype(options.dtype_given_ ? options.dtype_ : dtype_of<T>::value),
                   [&](int64_t i) { return static_cast<double>(values[i]); });
}
// from_vector<float>/<double>/<int64_t> default to the element type's dtype unless options say otherwise.
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int>(const std::vector<int>&, const Shape&, TensorOptions);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, TensorOptions);

Tensor from_blob(const void* data, const Shape& shape, DType dtype, TensorOptions options) {
  RG_CHECK(data != nullptr || shape_numel(shape) == 0, "from_blob", "null data pointer");
  Tensor host = empty(shape, TensorOptions(dtype));
  if (host.numel() > 0) std::memcpy(host.raw_data(), data, host.numel() * dtype_size(dtype));
  Tensor out = options.device_.is_cpu() ? host : copy_as(host, TensorOptions(dtype).device(options.device_));
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}

Tensor copy_as(const Tensor& src, TensorOptions options) {
  RG_CHECK(src.defined(), "copy_as", "source is an undefined tensor");
  Tensor out = empty(src.shape(), options.requires_grad(false));
  copy_into(out, src, "copy_as");
  return out;
}

void Tensor::set_data(const Tensor& src) {
  check_defined("set_data");
  RG_CHECK(src.defined(), "set_data", "source is an undefined tensor");
  RG_CHECK(is_leaf(), "set_data", "only leaf tensors can change their data");
  impl_->storage = src.impl()->storage;
  impl_->offset = src.impl()->offset;
  impl_->shape = src.impl()->shape;
  impl_->strides = src.impl()->strides;
  impl_->dtype = src.impl()->dtype;
  impl_->grad.reset();
}

// ---------------------------------------------------------------------------------------------
namespace {
// Copies involving a CUDA tensor. Strided and converting copies happen on one side (the device's
// strided kernel, or the CPU loop in copy_into); only contiguous bytes cross the bus.
void copy_across_devices(const Tensor& dst, const Tensor& src, const Shape& src_strides, const char* op) {
  TensorOptions dst_kind = TensorOptions(dst.dtype());
  if (dst.device().is_cuda() && src.device().is_cuda()) {
    cuda::strided_copy(dst.raw_data(), dst.dtype(), dst.strides(), src.raw_data(), src.dtype(), src_strides,
                       dst.shape(), dst.device().index);
    return;
  }
  if (dst.device().is_cuda()) {  // host -> device: convert and pack on the host, then one memcpy
    Tensor packed = empty(dst.shape(), dst_kind);
    copy_into(packed, src, op);
    Tensor staged = dst.is_contiguous() ? dst : empty(dst.shape(), dst_kind.device(dst.device()));
    cuda::memcpy_host_to_device(staged.raw_data(), packed.raw_data(), packed.numel() * dtype_size(dst.dtype()),
                                dst.device().index);
    if (!staged.same(dst)) copy_into(dst, staged, op);
    return;
  }
  // device -> host: pack (and broadcast, convert) on the device, then one memcpy, then scatter on the host.
  Tensor packed = empty(dst.shape(), dst_kind.device(src.device()));
  cuda::strided_copy(packed.raw_data(), packed.dtype(), packed.strides(), src.raw_data(), src.dtype(), src_strides,
                     dst.shape(), src.device().index);
  Tensor host = dst.is_contiguous() ? dst : empty(dst.shape(), dst_kind);
  cuda::memcpy_device_to_host(host.raw_data(), packed.raw_data(), packed.numel() * dtype_size(dst.dtype()),
                              src.device().index);
  if (!host.same(dst)) copy_into(dst, host, op);
}
}  // namespace

void copy_into(const Tensor& dst, const Tensor& src, const char* op) {
  // src broadcasts to dst's shape (expand = stride 0 along new or size-1 dims).
  Shape bshape = broadcast_shapes(dst.shape(), src.shape(), op);
  RG_CHECK_T(ShapeError, bshape == dst.shape(), op, "cannot copy a tensor of shape ", shape_str(src.shape()),
             " into one of shape ", shape_str(dst.shape()));
  Shape src_strides(dst.dim(), 0);
  for (int64_t i = 0; i < src.dim(); ++i) {
    int64_t d = dst.dim() - src.dim() + i;
    src_strides[d] = src.shape()[i] == 1 ? 0 : src.strides()[i];
  }
  if (dst.device().is_cuda() || src.device().is_cuda()) {
    copy_across_devices(dst, src, src_strides, op);
    return;
  }
  // Any pair of dtypes, the 16-bit ones included: a copy into BFloat16 or Float16 is the cast, rounded
  // to nearest even (core/base/half.h); float64 goes there through float32, as in PyTorch.
  dispatch_storage(dst.dtype(), op, [&](auto dzero) {
    using D = decltype(dzero);
    dispatch_storage(src.dtype(), op, [&](auto szero) {
      using S = decltype(szero);
      D* d = static_cast<D*>(dst.raw_data());
      const S* s = static_cast<const S*>(src.raw_data());
      cpu::strided_for_each<2>(dst.shape(), {&dst.strides(), &src_strides},
                               [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                                 D* dp = d + off[0];
                                 const S* sp = s + off[1];
                                 for (int64_t i = 0; i < n; ++i) dp[i * st[0]] = static_cast<D>(sp[i * st[1]]);
                               });
    });
  });
}

}  // namespace relgrad
