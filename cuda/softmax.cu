// The softmax family on the GPU: softmax / log_softmax (forward, backward), attention's fused
// masked_softmax, and cross_entropy fused with log_softmax.
//
// Why it is written this way:
//   - Rows (the class dim last, inner == 1; always the case for masked_softmax): one block per row,
//     the block's threads striding over the row and combining the max and the sum in the fixed tree
//     of red::block_combine. Each thread rereads only the elements it wrote itself, so the passes
//     over a row need no synchronisation beyond the reductions. The arithmetic is the CPU row path's
//     (core/cpu/softmax.h): max and exp in T, the sum in double.
//   - Columns (inner > 1): one thread per column (o, i), serial over C: neighbouring threads read
//     neighbouring addresses, and the arithmetic is the CPU column path's (double throughout).
//   - cross_entropy is two generic reductions (column max, then the sums of exp(x - m) and of x) of
//     cuda/reduce_common.cuh, which handle any (N, C, D) and long class rows (multi-block, fixed
//     order); its backward is elementwise.
// No atomics anywhere: results are bit-for-bit the same run to run.
#include <vector>

#include "core/base/fast_math.h"
#include "cuda/common.cuh"
#include "cuda/reduce_common.cuh"
#include "cuda/runtime.h"
#include "cuda/softmax.h"

namespace relgrad::cuda {

namespace {

using red::block_combine;
using red::kMaxThreads;

// ---- softmax / log_softmax -----------------------------------------------------------------------------
// x, y (rows, C): one block per row.
template <class T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t C, bool log_) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    double m = -INFINITY;  // NaN is ignored here; it reaches every output through the sum
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = fmax(m, static_cast<double>(xr[c]));
    m = block_combine(m, smem, red::FmaxOp{});
    const T mt = static_cast<T>(m);  // exact: m is one of the row's values (or -inf)
    double s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const T e = fn::rg_exp(T(xr[c] - mt));
      if (!log_) yr[c] = e;  // kept, so exp runs once per element
      s += static_cast<double>(e);
    }
    s = block_combine(s, smem, red::SumOp{});
    if (log_) {
      const T l = static_cast<T>(m + log(s));
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = xr[c] - l;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] *= inv;
    }
  }
}

// x, y (outer, C, inner): one thread per column (o, i), in double (the CPU's column path).
template <class T>
__global__ void softmax_cols_kernel(const T* x, T* y, int64_t outer, int64_t C, int64_t inner, bool log_) {
  const int64_t cols = outer * inner, stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += stride) {
    const int64_t base = (col / inner) * C * inner + col % inner;  // element (o, c, i) at base + c * inner
    double m = -INFINITY;
    for (int64_t c = 0; c < C; ++c) {
      const double v = x[base + c * inner];
      if (v > m || v != v) m = v;  // NaN sticks, as block_max
    }
    double s = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double e = exp(static_cast<double>(x[base + c * inner]) - m);
      s += e;
      if (!log_) y[base + c * inner] = static_cast<T>(e);
    }
    s = log_ ? m + log(s) : 1.0 / s;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t k = base + c * inner;
      y[k] = static_cast<T>(log_ ? x[k] - s : y[k] * s);
    }
  }
}

// y, g, gx (rows, C): one block per row.
template <class T>
__global__ void softmax_backward_rows_kernel(const T* y, const T* g, T* gx, int64_t rows, int64_t C, bool log_) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * C;
    const T* gr = g + r * C;
    T* gxr = gx + r * C;
    double s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      s += log_ ? static_cast<double>(gr[c]) : static_cast<double>(gr[c] * yr[c]);
    const T st = static_cast<T>(block_combine(s, smem, red::SumOp{}));
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      gxr[c] = log_ ? gr[c] - fn::rg_exp(yr[c]) * st : yr[c] * (gr[c] - st);
  }
}

// y, g, gx (outer, C, inner): one thread per column, in double.
template <class T>
__global__ void softmax_backward_cols_kernel(const T* y, const T* g, T* gx, int64_t outer, int64_t C, int64_t inner,
                                             bool log_) {
  const int64_t cols = outer * inner, stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += stride) {
    const int64_t base = (col / inner) * C * inner + col % inner;
    double s = 0;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t k = base + c * inner;
      s += log_ ? static_cast<double>(g[k]) : static_cast<double>(g[k]) * y[k];
    }
    for (int64_t c = 0; c < C; ++c) {
      const int64_t k = base + c * inner;
      gx[k] = static_cast<T>(log_ ? g[k] - exp(static_cast<double>(y[k])) * s : y[k] * (g[k] - s));
    }
  }
}

// ---- masked_softmax --------------------------------------------------------------------------------------
constexpr int kMaxLeadDims = 8;
// Where row r of a broadcast operand starts: the row-major unravelling of r over the leading dims
// (all but the last) of x's shape, dotted with the operand's strides; `step` is its last-dim stride.
struct RowLayout {
  int ndim = 0;
  int64_t shape[kMaxLeadDims] = {};
  int64_t strides[kMaxLeadDims] = {};
  int64_t step = 0;
  __device__ int64_t row_offset(int64_t r) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      off += (r % shape[d]) * strides[d];
      r /= shape[d];
    }
    return off;
  }
};

RowLayout row_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  RG_CHECK(strides.size() == shape.size() && !shape.empty(), "masked_softmax", "the operand strides have ",
           strides.size(), " dims, x has ", shape.size());
  RG_CHECK(shape.size() - 1 <= static_cast<size_t>(kMaxLeadDims), "masked_softmax", "x has ", shape.size(),
           " dims; the CUDA kernel supports up to ", kMaxLeadDims + 1);
  RowLayout L;
  L.ndim = static_cast<int>(shape.size()) - 1;
  for (int d = 0; d < L.ndim; ++d) {
    L.shape[d] = shape[d];
    L.strides[d] = strides[d];
  }
  L.step = strides.back();
  return L;
}

// x, y (rows, C); bias (dtype) and mask (bool) broadcast, through their RowLayouts, or null.
template <class T>
__global__ void masked_softmax_kernel(const T* x, T scale, const T* bias, RowLayout bl, const bool* mask, RowLayout ml,
                                      T* y, int64_t rows, int64_t C) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    const T* br = bias ? bias + bl.row_offset(r) : nullptr;
    const bool* mr = mask ? mask + ml.row_offset(r) : nullptr;
    // z = scale * x + bias, written to y; masked entries become -inf (exp gives exactly 0).
    double m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      T z = scale * xr[c];
      if (br) z += br[c * bl.step];
      if (mr && mr[c * ml.step]) z = T(-INFINITY);
      yr[c] = z;
      m = fmax(m, static_cast<double>(z));  // ignores NaN, as the CPU's lane_max
    }
    m = block_combine(m, smem, red::FmaxOp{});
    if (m == -INFINITY) {  // the same for every thread: every entry masked (-> 0), unless some are NaN (-> NaN)
      double nan = 0;
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) nan += yr[c] != yr[c] ? 1.0 : 0.0;
      nan = block_combine(nan, smem, red::SumOp{});
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] = nan > 0 ? T(NAN) : T(0);
      continue;
    }
    const T mt = static_cast<T>(m);
    double s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const T e = fn::rg_exp(T(yr[c] - mt));
      yr[c] = e;
      s += static_cast<double>(e);
    }
    const T inv = static_cast<T>(1.0 / block_combine(s, smem, red::SumOp{}));
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) yr[c] *= inv;
  }
}

// y, g (rows, C) -> gz = y * (g - sum g y), gx = scale * gz (either may be null); one block per row.
template <class T>
__global__ void masked_softmax_backward_kernel(const T* y, const T* g, T scale, T* gx, T* gz, int64_t rows, int64_t C) {
  __shared__ double smem[kMaxThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * C;
    const T* gr = g + r * C;
    double s = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += static_cast<double>(gr[c] * yr[c]);
    const T st = static_cast<T>(block_combine(s, smem, red::SumOp{}));
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const T v = yr[c] * (gr[c] - st);
      if (gz) gz[r * C + c] = v;
      if (gx) gx[r * C + c] = scale * v;
    }
  }
}

// ---- cross_entropy ---------------------------------------------------------------------------------------
struct ExpSums {
  double s;   // sum_c exp(x - m)
  double sx;  // sum_c x
};

// The second pass over logits (N, C, D) seen as (outer N, R C, inner D): the sums, then loss and lse.
template <class T>
struct CrossEntropyRed {
  using V = ExpSums;
  const T* x;
  const double* m;  // (N, D) column max
  const int64_t* target;
  T* loss;
  T* lse;
  int64_t C, D, ignore_index;
  double eps;
  __device__ V identity() const { return V{0.0, 0.0}; }
  __device__ V load(int64_t n, int64_t c, int64_t d) const {
    const double v = static_cast<double>(x[(n * C + c) * D + d]);
    return V{exp(v - m[n * D + d]), v};
  }
  __device__ V combine(V a, V b) const { return V{a.s + b.s, a.sx + b.sx}; }
  __device__ void finish(int64_t n, int64_t d, V v) const {
    const int64_t pos = n * D + d, t = target[pos];
    if (t == ignore_index) {
      loss[pos] = lse[pos] = T(0);
      return;
    }
    const double l = m[pos] + log(v.s);
    const double nll = l - static_cast<double>(x[(n * C + t) * D + d]), smooth = l - v.sx / static_cast<double>(C);
    loss[pos] = static_cast<T>((1 - eps) * nll + eps * smooth);
    lse[pos] = static_cast<T>(l);
  }
};

template <class T>
__global__ void cross_entropy_backward_kernel(const T* x, const int64_t* target, const T* lse, const T* g,
                                              bool g_is_scalar, double scale, T* gx, int64_t N, int64_t C, int64_t D,
                                              int64_t ignore_index, double eps) {
  const int64_t n_all = N * C * D, stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n_all; k += stride) {
    const int64_t d = k % D, c = (k / D) % C, n = k / (C * D), pos = n * D + d, t = target[pos];
    // Ignored positions are written as 0 outright: their lse is a placeholder and scale may be inf.
    if (t == ignore_index) {
      gx[k] = T(0);
      continue;
    }
    const double w = static_cast<double>(g_is_scalar ? g[0] : g[pos]) * scale;
    const double p = exp(static_cast<double>(x[k]) - static_cast<double>(lse[pos]));
    gx[k] = static_cast<T>(w * (p - (c == t ? 1 - eps : 0.0) - eps / static_cast<double>(C)));
  }
}

}  // namespace

void softmax_forward(DType dtype, const void* x, void* y, const SoftmaxLayout& L, int device) {
  const int64_t outer = L.outer, C = L.C, inner = L.inner;
  const bool log_ = L.log;
  const char* op = log_ ? "cuda_log_softmax" : "cuda_softmax";
  check_device(device, op);
  if (outer * C * inner == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (inner == 1) {
      softmax_rows_kernel<<<red::row_grid(outer), red::row_threads(C)>>>(xt, yt, outer, C, log_);
      RG_CUDA_CHECK_LAUNCH(op);
    } else {
      softmax_cols_kernel<<<grid_size(outer * inner), kBlockSize>>>(xt, yt, outer, C, inner, log_);
      RG_CUDA_CHECK_LAUNCH(op);
    }
  });
}

void softmax_backward(DType dtype, const void* y, const void* g, void* gx, const SoftmaxLayout& L, int device) {
  const int64_t outer = L.outer, C = L.C, inner = L.inner;
  const bool log_ = L.log;
  const char* op = log_ ? "cuda_log_softmax_backward" : "cuda_softmax_backward";
  check_device(device, op);
  if (outer * C * inner == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* yt = static_cast<const T*>(y);
    const T* gt = static_cast<const T*>(g);
    T* gxt = static_cast<T*>(gx);
    if (inner == 1) {
      softmax_backward_rows_kernel<<<red::row_grid(outer), red::row_threads(C)>>>(yt, gt, gxt, outer, C, log_);
      RG_CUDA_CHECK_LAUNCH(op);
    } else {
      softmax_backward_cols_kernel<<<grid_size(outer * inner), kBlockSize>>>(yt, gt, gxt, outer, C, inner, log_);
      RG_CUDA_CHECK_LAUNCH(op);
    }
  });
}

void masked_softmax_forward(DType dtype, const void* x, double scale, const void* bias,
                            const std::vector<int64_t>& bias_strides, const bool* mask,
                            const std::vector<int64_t>& mask_strides, void* y, const std::vector<int64_t>& shape,
                            int device) {
  const char* op = "cuda_masked_softmax";
  check_device(device, op);
  RG_CHECK(!shape.empty(), op, "x needs at least one dim");
  const int64_t C = shape.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  if (rows * C == 0) return;
  RowLayout bl = bias ? row_layout(shape, bias_strides) : RowLayout{};
  RowLayout ml = mask ? row_layout(shape, mask_strides) : RowLayout{};
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    masked_softmax_kernel<<<red::row_grid(rows), red::row_threads(C)>>>(
        static_cast<const T*>(x), static_cast<T>(scale), static_cast<const T*>(bias), bl, mask, ml, static_cast<T*>(y),
        rows, C);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void masked_softmax_backward(DType dtype, const void* y, const void* g, double scale, void* gx, void* gz, int64_t rows,
                             int64_t C, int device) {
  const char* op = "cuda_masked_softmax_backward";
  check_device(device, op);
  if (rows * C == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    masked_softmax_backward_kernel<<<red::row_grid(rows), red::row_threads(C)>>>(
        static_cast<const T*>(y), static_cast<const T*>(g), static_cast<T>(scale), static_cast<T*>(gx),
        static_cast<T*>(gz), rows, C);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void cross_entropy_forward(DType dtype, const void* x, const int64_t* target, void* loss, void* lse,
                           const CrossEntropyLayout& L, int device) {
  const int64_t N = L.N, C = L.C, D = L.D, ignore_index = L.ignore_index;
  const double eps = L.label_smoothing;
  const char* op = "cuda_cross_entropy";
  check_device(device, op);
  if (N * D == 0) return;
  DeviceGuard guard(device, op);
  red::Scratch m(static_cast<size_t>(N * D) * sizeof(double), device);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* xt = static_cast<const T*>(x);
    red::run_reduce(red::ColumnMax<T>{xt, m.as<double>(), C, D}, N, C, D, device, op);
    red::run_reduce(CrossEntropyRed<T>{xt, m.as<double>(), target, static_cast<T*>(loss), static_cast<T*>(lse), C, D,
                                       ignore_index, eps},
                    N, C, D, device, op);
  });
}

void cross_entropy_backward(DType dtype, const void* x, const int64_t* target, const void* lse, const void* g,
                            bool g_is_scalar, double scale, void* gx, const CrossEntropyLayout& L, int device) {
  const int64_t N = L.N, C = L.C, D = L.D, ignore_index = L.ignore_index;
  const double eps = L.label_smoothing;
  const char* op = "cuda_cross_entropy_backward";
  check_device(device, op);
  const int64_t n = N * C * D;
  if (n == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    cross_entropy_backward_kernel<<<grid_size(n), kBlockSize>>>(
        static_cast<const T*>(x), target, static_cast<const T*>(lse), static_cast<const T*>(g), g_is_scalar, scale,
        static_cast<T*>(gx), N, C, D, ignore_index, eps);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace relgrad::cuda
