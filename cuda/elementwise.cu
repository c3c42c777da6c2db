// Elementwise kernels: one grid-stride kernel template, `elementwise_kernel`, runs a small "body"
// struct for every index i in [0, n). The bodies wrap the functors of core/base/functors.h (the same
// ones the CPU kernels use), and the X-macro lists unary_ops.def / binary_ops.def instantiate one
// per op and dtype. Adding an op to a list adds its CUDA kernel; nothing here needs editing.
//
// Kernels run on the default stream of the operands' device (each entry point makes it current).
#include <type_traits>
#include <vector>

#include "core/base/functors.h"
#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

// body(i) for every i in [0, n): one thread per element, striding over the grid when n is larger.
template <class Body>
__global__ void elementwise_kernel(Body body, int64_t n) {
  int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) body(i);
}

template <class Body>
void launch(const Body& body, int64_t n, const char* op) {
  if (n <= 0) return;
  elementwise_kernel<<<grid_size(n), kBlockSize>>>(body, n);
  RG_CUDA_CHECK_LAUNCH(op);
}

// ---- bodies (n elements, all arrays contiguous) ----------------------------------------------------
template <class F, class T>
struct UnaryForward {  // x (n) -> y (n)
  F f;
  const T* x;
  T* y;
  __device__ void operator()(int64_t i) const { y[i] = f(x[i]); }
};

template <class F, class T>
struct UnaryBackward {  // x, y, gy (n) -> gx (n)
  F f;
  const T* x;
  const T* y;
  const T* gy;
  T* gx;
  __device__ void operator()(int64_t i) const { gx[i] = f.grad(x[i], y[i], gy[i]); }
};

template <class F, class T, class R>
struct BinaryForward {  // a, b (n) -> out (n), of type R (bool for comparisons, else T)
  F f;
  const T* a;
  const T* b;
  R* out;
  __device__ void operator()(int64_t i) const { out[i] = f(a[i], b[i]); }
};

// ---- typed dispatch over the X-macro lists ---------------------------------------------------------
template <class T>
void unary_forward_typed(UnaryOp op, const T* x, T* y, int64_t n) {
  switch (op) {
#define RG_UNARY(name, Functor) \
  case UnaryOp::Functor: return launch(UnaryForward<fn::Functor, T>{fn::Functor{}, x, y}, n, "cuda_" #name);
#include "core/base/unary_ops.def"
#undef RG_UNARY
  }
  throw Error("[cuda_unary] unknown unary op");
}

template <class T>
void unary_backward_typed(UnaryOp op, const T* x, const T* y, const T* gy, T* gx, int64_t n) {
  switch (op) {
#define RG_UNARY(name, Functor)                                                                         \
  case UnaryOp::Functor:                                                                                \
    return launch(UnaryBackward<fn::Functor, T>{fn::Functor{}, x, y, gy, gx}, n, "cuda_" #name "_backward");
#include "core/base/unary_ops.def"
#undef RG_UNARY
  }
  throw Error("[cuda_unary] unknown unary op");
}

template <class T>
void binary_forward_typed(BinaryOp op, const T* a, const T* b, void* out, int64_t n) {
  switch (op) {
#define RG_BINARY(name, Functor, is_bool)                                                           \
  case BinaryOp::Functor: {                                                                         \
    using R = std::conditional_t<is_bool, bool, T>;                                                 \
    return launch(BinaryForward<fn::Functor, T, R>{fn::Functor{}, a, b, static_cast<R*>(out)}, n, \
                  "cuda_" #name);                                                                   \
  }
#include "core/base/binary_ops.def"
#undef RG_BINARY
  }
  throw Error("[cuda_binary] unknown binary op");
}

// ---- strided copy with conversion -------------------------------------------------------------------
constexpr int kMaxDims = 8;

// The geometry of a copy, passed to the kernel by value: (d0, ..., d{ndim-1}) and both operands'
// strides in elements. ndim is 0 for a single element.
struct CopyLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t dst_strides[kMaxDims] = {};
  int64_t src_strides[kMaxDims] = {};
};

template <class D, class S>
struct StridedCopy {  // src (d0, ..., dk) strided, of type S -> dst (d0, ..., dk) strided, of type D
  D* dst;
  const S* src;
  CopyLayout layout;
  __device__ void operator()(int64_t i) const {
    int64_t dst_offset = 0, src_offset = 0;
    for (int k = layout.ndim - 1; k >= 0; --k) {  // unravel the row-major index i, last dim fastest
      int64_t index = i % layout.shape[k];
      i /= layout.shape[k];
      dst_offset += index * layout.dst_strides[k];
      src_offset += index * layout.src_strides[k];
    }
    dst[dst_offset] = static_cast<D>(src[src_offset]);
  }
};

// Drops size-1 dims and merges neighbours that both operands step over as one (a contiguous tensor
// becomes 1-d), so that most copies need few divisions and any rank whose merged form has at most
// kMaxDims dims is accepted.
CopyLayout plan_copy(const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& src_strides,
                     const std::vector<int64_t>& shape) {
  RG_CHECK(dst_strides.size() == shape.size() && src_strides.size() == shape.size(), "cuda_copy", "shape has ",
           shape.size(), " dims but the strides have ", dst_strides.size(), " (dst) and ", src_strides.size(),
           " (src)");
  std::vector<int64_t> sh, ds, ss;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!sh.empty() && ds.back() == dst_strides[k] * shape[k] && ss.back() == src_strides[k] * shape[k]) {
      sh.back() *= shape[k];
      ds.back() = dst_strides[k];
      ss.back() = src_strides[k];
    } else {
      sh.push_back(shape[k]);
      ds.push_back(dst_strides[k]);
      ss.push_back(src_strides[k]);
    }
  }
  RG_CHECK(sh.size() <= static_cast<size_t>(kMaxDims), "cuda_copy", "a strided copy of ", shape.size(),
           " dims (", sh.size(), " after merging) is more than the ", kMaxDims, " the CUDA kernel supports");
  CopyLayout layout;
  layout.ndim = static_cast<int>(sh.size());
  for (size_t k = 0; k < sh.size(); ++k) {
    layout.shape[k] = sh[k];
    layout.dst_strides[k] = ds[k];
    layout.src_strides[k] = ss[k];
  }
  return layout;
}

}  // namespace

void strided_copy(void* dst, DType dst_dtype, const std::vector<int64_t>& dst_strides, const void* src,
                  DType src_dtype, const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                  int device) {
  check_device(device, "cuda_copy");
  CopyLayout layout = plan_copy(dst_strides, src_strides, shape);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n == 0) return;
  DeviceGuard guard(device, "cuda_copy");
  bool dense = layout.ndim == 0 || (layout.ndim == 1 && layout.dst_strides[0] == 1 && layout.src_strides[0] == 1);
  if (dense && dst_dtype == src_dtype) {  // same bytes, contiguous on both sides
    RG_CUDA_CHECK(cudaMemcpy(dst, src, n * dtype_size(dst_dtype), cudaMemcpyDeviceToDevice), "cuda_copy");
    return;
  }
  dispatch_storage(dst_dtype, "cuda_copy", [&](auto dzero) {
    using D = decltype(dzero);
    dispatch_storage(src_dtype, "cuda_copy", [&](auto szero) {
      using S = decltype(szero);
      launch(StridedCopy<D, S>{static_cast<D*>(dst), static_cast<const S*>(src), layout}, n, "cuda_copy");
    });
  });
}

void unary_forward(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, int device) {
  DeviceGuard guard(device, "cuda_unary");
  dispatch_float(dtype, "cuda_unary", [&](auto zero) {
    using T = decltype(zero);
    unary_forward_typed<T>(op, static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}

void unary_backward(UnaryOp op, DType dtype, const void* x, const void* y, const void* gy, void* gx, int64_t n,
                    int device) {
  DeviceGuard guard(device, "cuda_unary_backward");
  dispatch_float(dtype, "cuda_unary_backward", [&](auto zero) {
    using T = decltype(zero);
    unary_backward_typed<T>(op, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
                            static_cast<T*>(gx), n);
  });
}

// x (n) -> y (n) = x^p
void pow_forward(double p, DType dtype, const void* x, void* y, int64_t n, int device) {
  DeviceGuard guard(device, "cuda_pow");
  dispatch_float(dtype, "cuda_pow", [&](auto zero) {
    using T = decltype(zero);
    launch(UnaryForward<fn::PowScalar, T>{fn::PowScalar{p}, static_cast<const T*>(x), static_cast<T*>(y)}, n,
           "cuda_pow");
  });
}

// x, gy (n) -> gx (n) = gy p x^(p-1); PowScalar::grad ignores y, so x is passed in its place.
void pow_backward(double p, DType dtype, const void* x, const void* gy, void* gx, int64_t n, int device) {
  DeviceGuard guard(device, "cuda_pow_backward");
  dispatch_float(dtype, "cuda_pow_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* xt = static_cast<const T*>(x);
    launch(UnaryBackward<fn::PowScalar, T>{fn::PowScalar{p}, xt, xt, static_cast<const T*>(gy), static_cast<T*>(gx)},
           n, "cuda_pow_backward");
  });
}

// Every dtype, as on the CPU: float and double for arithmetic, int64 and bool for masks and indices.
void binary_forward(BinaryOp op, DType dtype, const void* a, const void* b, void* out, int64_t n, int device) {
  DeviceGuard guard(device, "cuda_binary");
  dispatch_all(dtype, "cuda_binary", [&](auto zero) {
    using T = decltype(zero);
    binary_forward_typed<T>(op, static_cast<const T*>(a), static_cast<const T*>(b), out, n);
  });
}

}  // namespace relgrad::cuda
