// Reductions (sum, mean, var, logsumexp, max/min with indices) and the where select on the GPU.
// Each reduction is a small reducer struct run by the deterministic driver of
// cuda/reduce_common.cuh (one block per row, or one thread per column, with a fixed-order second
// stage for long rows/columns; no atomics). The arithmetic follows the CPU kernels of
// core/cpu/reduce.h: sums in double, two passes for var and logsumexp, NaN-sticky maxima.
#include <type_traits>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/reduce.h"
#include "cuda/reduce_common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

using red::run_reduce;
using red::Scratch;

// ---- reducers on x (outer, R, inner) --------------------------------------------------------------
template <class T>
struct SumRed {  // -> out (outer, inner) = scale * sum
  using V = double;
  const T* x;
  T* out;
  int64_t R, inner;
  double scale;
  __device__ V identity() const { return 0.0; }
  __device__ V load(int64_t o, int64_t r, int64_t i) const { return static_cast<double>(x[(o * R + r) * inner + i]); }
  __device__ V combine(V a, V b) const { return a + b; }
  __device__ void finish(int64_t o, int64_t i, V v) const { out[o * inner + i] = static_cast<T>(v * scale); }
};

template <class T>
struct MeanRed {  // -> mean (outer, inner) in double, the first pass of var
  using V = double;
  const T* x;
  double* mean;
  int64_t R, inner;
  __device__ V identity() const { return 0.0; }
  __device__ V load(int64_t o, int64_t r, int64_t i) const { return static_cast<double>(x[(o * R + r) * inner + i]); }
  __device__ V combine(V a, V b) const { return a + b; }
  __device__ void finish(int64_t o, int64_t i, V v) const { mean[o * inner + i] = v / static_cast<double>(R); }
};

template <class T>
struct SquaredDeviationRed {  // mean (double) -> var and mean (outer, inner) in T
  using V = double;
  const T* x;
  const double* mean_d;
  T* var;
  T* mean;
  int64_t R, inner;
  double divisor;
  __device__ V identity() const { return 0.0; }
  __device__ V load(int64_t o, int64_t r, int64_t i) const {
    const double d = static_cast<double>(x[(o * R + r) * inner + i]) - mean_d[o * inner + i];
    return d * d;
  }
  __device__ V combine(V a, V b) const { return a + b; }
  __device__ void finish(int64_t o, int64_t i, V v) const {
    var[o * inner + i] = static_cast<T>(v / divisor);
    mean[o * inner + i] = static_cast<T>(mean_d[o * inner + i]);
  }
};

template <class T>
struct ExpSumRed {  // column max m (double) -> out (outer, inner) = m + log sum exp(x - m)
  using V = double;
  const T* x;
  const double* m;
  T* out;
  int64_t R, inner;
  __device__ V identity() const { return 0.0; }
  __device__ V load(int64_t o, int64_t r, int64_t i) const {
    return exp(static_cast<double>(x[(o * R + r) * inner + i]) - m[o * inner + i]);
  }
  __device__ V combine(V a, V b) const { return a + b; }
  __device__ void finish(int64_t o, int64_t i, V v) const {
    const double mx = m[o * inner + i];
    // m = ±inf (all terms -inf, or some +inf; also R = 0) is the answer itself; there x - m was NaN.
    out[o * inner + i] = static_cast<T>(isinf(mx) ? mx : mx + log(v));
  }
};

// A candidate extremum: its value and index r; index < 0 marks the empty reduction.
template <class T>
struct Arg {
  T v;
  int64_t i;
};

// is_max is a run-time flag rather than a template parameter: half the kernel instantiations (nvcc
// compile time counts against CI) for one well-predicted branch.
template <class T>
struct ExtremumRed {  // -> values and/or indices (outer, inner)
  using V = Arg<T>;
  const T* x;
  T* values;
  int64_t* indices;
  int64_t R, inner;
  bool is_max;
  __device__ V identity() const { return V{T(0), -1}; }
  __device__ V load(int64_t o, int64_t r, int64_t i) const { return V{x[(o * R + r) * inner + i], r}; }
  // The tree meets candidates in no particular index order, so ties are broken by index explicitly:
  // NaN beats numbers, then the larger (smaller) value, then the lower index. This picks the first
  // NaN, else the first extremum: the CPU's answer (beats() in core/cpu/reduce.h).
  __device__ V combine(V a, V b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool a_nan = a.v != a.v, b_nan = b.v != b.v;  // never true for int64
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.v != b.v) return (is_max ? a.v > b.v : a.v < b.v) ? a : b;
    return a.i < b.i ? a : b;
  }
  __device__ void finish(int64_t o, int64_t i, V v) const {
    if (values) values[o * inner + i] = v.v;
    if (indices) indices[o * inner + i] = v.i;
  }
};

// ---- elementwise kernels ------------------------------------------------------------------------------
template <class Body>
__global__ void for_each_kernel(Body body, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) body(k);
}
template <class Body>
void for_each(const Body& body, int64_t n, const char* op) {
  if (n <= 0) return;
  for_each_kernel<<<grid_size(n), kBlockSize>>>(body, n);
  RG_CUDA_CHECK_LAUNCH(op);
}

template <class T>
struct ScatterToIndex {  // g, indices (outer, inner) -> gx (outer, R, inner), one thread per element of gx
  const T* g;
  const int64_t* indices;
  T* gx;
  int64_t R, inner;
  __device__ void operator()(int64_t k) const {
    const int64_t i = k % inner, r = (k / inner) % R, o = k / (R * inner);
    gx[k] = indices[o * inner + i] == r ? g[o * inner + i] : T(0);
  }
};

constexpr int kMaxDims = 8;
// Geometry of the where select, by value: (d0, ..., d{ndim-1}) after merging, and the strides of
// cond, a and b in elements (out is contiguous). ndim 0 is a single element.
struct SelectLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};
};

template <class T>
struct Select {  // cond, a, b (d0, ..., dk) strided -> out (d0, ..., dk) contiguous
  T* out;
  const bool* cond;
  const T* a;
  const T* b;
  SelectLayout L;
  __device__ void operator()(int64_t k) const {
    int64_t off[3] = {0, 0, 0}, rem = k;
    for (int d = L.ndim - 1; d >= 0; --d) {  // unravel the row-major index, last dim fastest
      const int64_t idx = rem % L.shape[d];
      rem /= L.shape[d];
      for (int j = 0; j < 3; ++j) off[j] += idx * L.strides[j][d];
    }
    out[k] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
};

// Drops size-1 dims and merges neighbours that every operand steps over as one (out is contiguous,
// so its strides merge whenever the inputs' do).
SelectLayout plan_select(const std::vector<int64_t>& shape, const std::vector<const std::vector<int64_t>*>& strides) {
  for (const auto* s : strides)
    RG_CHECK(s->size() == shape.size(), "cuda_where", "shape has ", shape.size(), " dims but a stride list has ",
             s->size());
  std::vector<int64_t> sh;
  std::vector<std::vector<int64_t>> st(3);
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    bool merge = !sh.empty();
    for (int j = 0; j < 3 && merge; ++j) merge = st[j].back() == (*strides[j])[k] * shape[k];
    if (merge) {
      sh.back() *= shape[k];
      for (int j = 0; j < 3; ++j) st[j].back() = (*strides[j])[k];
    } else {
      sh.push_back(shape[k]);
      for (int j = 0; j < 3; ++j) st[j].push_back((*strides[j])[k]);
    }
  }
  RG_CHECK(sh.size() <= static_cast<size_t>(kMaxDims), "where", "a select over ", shape.size(), " dims (",
           sh.size(), " after merging) is more than the ", kMaxDims, " the CUDA kernel supports");
  SelectLayout L;
  L.ndim = static_cast<int>(sh.size());
  for (size_t d = 0; d < sh.size(); ++d) {
    L.shape[d] = sh[d];
    for (int j = 0; j < 3; ++j) L.strides[j][d] = st[j][d];
  }
  return L;
}

// max/min are defined for float32, float64 and int64 (as on the CPU); bool is refused.
template <class F>
void dispatch_ordered(DType dtype, const char* op, F f) {
  RG_CHECK_T(DTypeError, dtype != kBool, op, "not supported for bool tensors");
  dispatch_all(dtype, op, [&](auto zero) {
    if constexpr (!std::is_same_v<decltype(zero), bool>) f(zero);
  });
}

}  // namespace

void reduce_sum(DType dtype, const void* x, void* out, int64_t outer, int64_t R, int64_t inner, double scale,
                int device) {
  const char* op = "cuda_sum";
  check_device(device, op);
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    run_reduce(SumRed<T>{static_cast<const T*>(x), static_cast<T*>(out), R, inner, scale}, outer, R, inner, device, op);
  });
}

void reduce_var(DType dtype, const void* x, void* var, void* mean, int64_t outer, int64_t R, int64_t inner,
                int64_t correction, int device) {
  const char* op = "cuda_var";
  check_device(device, op);
  if (outer * inner == 0) return;
  DeviceGuard guard(device, op);
  const double divisor = static_cast<double>(R - correction > 0 ? R - correction : 0);
  Scratch mean_d(static_cast<size_t>(outer * inner) * sizeof(double), device);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* xt = static_cast<const T*>(x);
    run_reduce(MeanRed<T>{xt, mean_d.as<double>(), R, inner}, outer, R, inner, device, op);
    run_reduce(SquaredDeviationRed<T>{xt, mean_d.as<double>(), static_cast<T*>(var), static_cast<T*>(mean), R, inner,
                                      divisor},
               outer, R, inner, device, op);
  });
}

void reduce_logsumexp(DType dtype, const void* x, void* out, int64_t outer, int64_t R, int64_t inner, int device) {
  const char* op = "cuda_logsumexp";
  check_device(device, op);
  if (outer * inner == 0) return;
  DeviceGuard guard(device, op);
  Scratch m(static_cast<size_t>(outer * inner) * sizeof(double), device);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    const T* xt = static_cast<const T*>(x);
    run_reduce(red::ColumnMax<T>{xt, m.as<double>(), R, inner}, outer, R, inner, device, op);
    run_reduce(ExpSumRed<T>{xt, m.as<double>(), static_cast<T*>(out), R, inner}, outer, R, inner, device, op);
  });
}

void reduce_extremum(bool is_max, DType dtype, const void* x, void* values, int64_t* indices, int64_t outer,
                     int64_t R, int64_t inner, int device) {
  const char* op = is_max ? "cuda_max" : "cuda_min";
  check_device(device, op);
  RG_CHECK_T(IndexError, R > 0, op, "cannot reduce over a dimension of size 0");
  DeviceGuard guard(device, op);
  dispatch_ordered(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    run_reduce(ExtremumRed<T>{static_cast<const T*>(x), static_cast<T*>(values), indices, R, inner, is_max}, outer, R,
               inner, device, op);
  });
}

void scatter_to_index(DType dtype, const void* g, const int64_t* indices, void* gx, int64_t outer, int64_t R,
                      int64_t inner, int device) {
  const char* op = "cuda_max_backward";
  check_device(device, op);
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    for_each(ScatterToIndex<T>{static_cast<const T*>(g), indices, static_cast<T*>(gx), R, inner}, outer * R * inner,
             op);
  });
}

void where_select(DType dtype, const std::vector<int64_t>& shape, void* out, const bool* cond,
                  const std::vector<int64_t>& cond_strides, const void* a, const std::vector<int64_t>& a_strides,
                  const void* b, const std::vector<int64_t>& b_strides, int device) {
  const char* op = "cuda_where";
  check_device(device, op);
  SelectLayout L = plan_select(shape, {&cond_strides, &a_strides, &b_strides});
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n == 0) return;
  DeviceGuard guard(device, op);
  dispatch_all(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    for_each(Select<T>{static_cast<T*>(out), cond, static_cast<const T*>(a), static_cast<const T*>(b), L}, n, op);
  });
}

}  // namespace relgrad::cuda
