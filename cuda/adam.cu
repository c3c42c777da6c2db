// The fused Adam / AdamW kernel (see cuda/adam.h). One thread per element, grid-stride; elements are
// independent, so there is nothing to order. The per-step scalars are rounded to the dtype on the
// host exactly as core/cpu/adam.cpp does (compiled -ffp-contract=off, CMakeLists.txt; here every product
// that feeds a sum goes through a volatile so no compiler can fuse it into an FMA).
#include <cmath>

#include "cuda/adam.h"
#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

// IEEE round-to-nearest operations, one per CPU operation.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrt_rn(double a) { return __dsqrt_rn(a); }

// The step's scalars in the tensor's dtype (the CPU kernel's names).
template <class T>
struct AdamScalars {
  T shrink, wd, b1, one_minus_b1, b2, one_minus_b2, sqrt_bc2, eps, neg_step;
  bool decoupled, l2;
};

template <class T>
AdamScalars<T> scalars(const AdamParams& s) {
  volatile double lr_wd = s.lr * s.weight_decay;  // rounded before the subtraction, as on the CPU
  volatile double step = s.lr / s.bias_correction1;
  AdamScalars<T> c;
  c.shrink = static_cast<T>(1 - lr_wd);
  c.wd = static_cast<T>(s.weight_decay);
  c.b1 = static_cast<T>(s.beta1);
  c.one_minus_b1 = static_cast<T>(1 - s.beta1);
  c.b2 = static_cast<T>(s.beta2);
  c.one_minus_b2 = static_cast<T>(1 - s.beta2);
  c.sqrt_bc2 = static_cast<T>(std::sqrt(s.bias_correction2));
  c.eps = static_cast<T>(s.eps);
  c.neg_step = static_cast<T>(-step);
  c.decoupled = s.decoupled;
  c.l2 = !s.decoupled && s.weight_decay != 0;
  return c;
}

// p, g, m, v (n), contiguous; p, m, v updated in place.
template <class T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, int64_t n, AdamScalars<T> c) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T pi = p[i], gi = g[i];
    if (c.decoupled) pi = mul_rn(pi, c.shrink);
    if (c.l2) gi = add_rn(gi, mul_rn(pi, c.wd));
    const T mi = add_rn(mul_rn(m[i], c.b1), mul_rn(gi, c.one_minus_b1));
    const T vi = add_rn(mul_rn(v[i], c.b2), mul_rn(mul_rn(gi, c.one_minus_b2), gi));
    const T denom = add_rn(div_rn(sqrt_rn(vi), c.sqrt_bc2), c.eps);
    p[i] = add_rn(pi, mul_rn(div_rn(mi, denom), c.neg_step));
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void adam_step(DType dtype, void* param, const void* grad, void* m, void* v, int64_t n, const AdamParams& s,
               int device) {
  const char* op = "cuda_adam_step";
  check_device(device, op);
  if (n <= 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    adam_kernel<T><<<grid_size(n), kBlockSize>>>(static_cast<T*>(param), static_cast<const T*>(grad),
                                                 static_cast<T*>(m), static_cast<T*>(v), n, scalars<T>(s));
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace relgrad::cuda
