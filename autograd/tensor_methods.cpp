// Tensor's methods that need autograd, as thin forwards to the free functions of autograd/ops.h
// (declared in core/tensor.h so that x.reshape(...) reads as in PyTorch), and the in-place ops.
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace relgrad {

Tensor Tensor::reshape(const Shape& s) const { return relgrad::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return relgrad::view(*this, s); }
Tensor Tensor::flatten(int64_t a, int64_t b) const { return relgrad::flatten(*this, a, b); }
Tensor Tensor::permute(const Shape& d) const { return relgrad::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return relgrad::transpose(*this, a, b); }
Tensor Tensor::t() const {
  RG_CHECK_T(ShapeError, dim() <= 2, "t", "expects a tensor with <= 2 dims, got shape ", shape_str(shape()));
  return dim() < 2 ? *this : relgrad::transpose(*this, 0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return relgrad::narrow(*this, d, s, l); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const { return relgrad::slice(*this, d, s, e, st); }
Tensor Tensor::select(int64_t d, int64_t i) const { return relgrad::select(*this, d, i); }
Tensor Tensor::expand(const Shape& s) const { return relgrad::expand(*this, s); }
Tensor Tensor::squeeze() const { return relgrad::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return relgrad::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return relgrad::unsqueeze(*this, d); }
Tensor Tensor::contiguous() const { return relgrad::contiguous(*this); }
Tensor Tensor::clone() const { return relgrad::clone(*this); }
Tensor Tensor::to(DType dt) const { return relgrad::to_dtype(*this, dt); }
Tensor Tensor::to(Device d) const { return relgrad::to_device(*this, d); }
Tensor Tensor::sum() const { return relgrad::sum(*this); }
Tensor Tensor::mean() const { return relgrad::mean(*this); }
Tensor Tensor::matmul(const Tensor& o) const { return relgrad::matmul(*this, o); }

Tensor Tensor::detach() const {
  check_defined("detach");
  return make_view(*this, shape(), strides(), offset());  // same storage, no grad_fn, requires_grad off
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  check_defined("backward");
  run_backward(*this, gradient, retain_graph);
}

// ---- in-place ops ---------------------------------------------------------------------------------
// relgrad does not rewrite autograd history, so in-place ops are refused on tensors that take part in
// a graph while grad mode is on (PyTorch refuses the leaf case the same way). Optimizers and
// initialisers run them under NoGradGuard. Every in-place op bumps the storage version, which is what
// lets backward detect a saved tensor that was modified.
namespace {
void check_inplace(const Tensor& t, const char* op) {
  RG_CHECK(!(GradMode::is_enabled() && t.requires_grad()), op,
           "in-place operation on a tensor that requires grad (shape ", shape_str(t.shape()),
           ") while grad mode is on; wrap it in NoGradGuard or use the out-of-place op");
}
Tensor& assign(Tensor& self, const Tensor& value, const char* op) {
  copy_into(self, value, op);
  self.bump_version();
  return self;
}
Tensor scalar_like(double v, const Tensor& t) { return scalar_tensor(v, TensorOptions(t.dtype()).device(t.device())); }
}  // namespace

Tensor& Tensor::fill_(double v) { check_inplace(*this, "fill_"); return assign(*this, scalar_like(v, *this), "fill_"); }
Tensor& Tensor::zero_() { check_inplace(*this, "zero_"); return assign(*this, scalar_like(0.0, *this), "zero_"); }
Tensor& Tensor::copy_(const Tensor& src) { check_inplace(*this, "copy_"); return assign(*this, src.detach(), "copy_"); }

// The arithmetic in-place ops compute out of place under no-grad, then write back (checking that the
// result keeps self's shape, as PyTorch: a += b must not broadcast self).
#define RG_INPLACE(method, expr)                                                                         \
  Tensor& Tensor::method {                                                                               \
    check_inplace(*this, #method);                                                                       \
    NoGradGuard no_grad;                                                                                 \
    Tensor result = expr;                                                                                \
    RG_CHECK_T(ShapeError, result.shape() == shape(), #method, "result of shape ", shape_str(result.shape()), \
               " does not fit in-place into shape ", shape_str(shape()));                               \
    return assign(*this, result, #method);                                                               \
  }
RG_INPLACE(add_(const Tensor& o, double alpha), alpha == 1.0 ? relgrad::add(*this, o) : relgrad::add(*this, relgrad::mul(o, alpha)))
RG_INPLACE(add_(double v), relgrad::add(*this, v))
RG_INPLACE(sub_(const Tensor& o), relgrad::sub(*this, o))
RG_INPLACE(mul_(const Tensor& o), relgrad::mul(*this, o))
RG_INPLACE(mul_(double v), relgrad::mul(*this, v))
RG_INPLACE(div_(const Tensor& o), relgrad::div(*this, o))
RG_INPLACE(div_(double v), relgrad::div(*this, v))
#undef RG_INPLACE

}  // namespace relgrad
