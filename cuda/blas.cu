// cuBLAS GEMMs for matmul / bmm / addmm (the plan is in cuda/blas.h). Written as thin calls into
// cuBLAS: the *Ex entry points take the compute type explicitly, so float32 runs with full-precision
// FP32 accumulation (CUBLAS_COMPUTE_32F) unless TF32 was opted into, float64 with
// CUBLAS_COMPUTE_64F, and autocast's bfloat16 / float16 operands on the tensor cores with a float32
// result and CUBLAS_COMPUTE_32F (exact 16-bit products, float32 sums). cuBLAS GEMMs are bitwise reproducible run to run on one GPU model and toolkit.
#include <climits>
#include <vector>

#include "cuda/blas.h"
#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

constexpr const char* kOp = "cuda_matmul";

int as_int(int64_t v, const char* what) {
  RG_CHECK(v >= 0 && v <= INT_MAX, kOp, what, " = ", v, " does not fit the 32-bit int cuBLAS takes");
  return static_cast<int>(v);
}

cublasOperation_t op_of(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// c (count, n, m) = 0: the empty sum when k == 0 (cudaMemset writes zero bits = +0.0 in both dtypes).
void zero_fill(void* c, int64_t count, int64_t n, int64_t m, DType dtype) {
  RG_CUDA_CHECK(cudaMemset(c, 0, static_cast<size_t>(count * n * m) * dtype_size(dtype)), kOp);
}

// Batch offsets as an affine function of a multi-index: entry e = Σ_d idx_d · stride_d with idx the
// digits of e over `extent` (dim 0 fastest). Attention's permuted heads, (B, H) over a (B, T, H, D)
// buffer, are two such dims. Passed by value to the kernel below, so no offsets cross the bus.
constexpr int kMaxBatchDims = 6;
struct BatchAffine {
  int ndim = 0;
  int64_t extent[kMaxBatchDims] = {};
  int64_t a_stride[kMaxBatchDims] = {}, b_stride[kMaxBatchDims] = {};
};

// The affine form of both operands' offsets (the same extents), or false when there is none within
// kMaxBatchDims dims. Greedy, innermost first: each dim takes the longest run of blocks whose starts
// step evenly in both operands, and the whole form is checked against every offset at the end.
bool affine_batch(const std::vector<int64_t>& a, const std::vector<int64_t>& b, BatchAffine* L) {
  const int64_t count = static_cast<int64_t>(a.size());
  int64_t block = 1;
  L->ndim = 0;
  while (block < count) {
    if (L->ndim == kMaxBatchDims) return false;
    const int64_t sa = a[block] - a[0], sb = b[block] - b[0];
    int64_t n = 1;
    while (n * block < count && a[n * block] - a[0] == n * sa && b[n * block] - b[0] == n * sb) ++n;
    while (count % (n * block) != 0) --n;  // a dim must tile the batch
    if (n < 2) return false;
    L->extent[L->ndim] = n, L->a_stride[L->ndim] = sa, L->b_stride[L->ndim] = sb;
    ++L->ndim;
    block *= n;
  }
  for (int64_t e = 0; e < count; ++e) {
    int64_t rem = e, oa = a[0], ob = b[0];
    for (int d = 0; d < L->ndim; ++d) {
      const int64_t i = rem % L->extent[d];
      rem /= L->extent[d];
      oa += i * L->a_stride[d], ob += i * L->b_stride[d];
    }
    if (oa != a[e] || ob != b[e]) return false;
  }
  return true;
}

// ptrs (3 · count): [0, count) the first operand (B) at b + offset_b(e), [count, 2 count) the second
// (A), [2 count, 3 count) C at c + e · c_step; operand offsets in elements of esize bytes, C's of
// c_esize (larger than esize for 16-bit operands: C is float32). One thread per e.
__global__ void batch_pointers_kernel(const char* a, const char* b, char* c, BatchAffine L, int64_t esize,
                                      int64_t c_esize, int64_t c_step, int64_t count, const void** ptrs) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += stride) {
    int64_t rem = e, oa = 0, ob = 0;
    for (int d = 0; d < L.ndim; ++d) {
      const int64_t i = rem % L.extent[d];
      rem /= L.extent[d];
      oa += i * L.a_stride[d], ob += i * L.b_stride[d];
    }
    ptrs[e] = b + ob * esize;
    ptrs[count + e] = a + oa * esize;
    ptrs[2 * count + e] = c + e * c_step * c_esize;
  }
}

}  // namespace

void gemm_batched(DType dtype, const void* a, const MatrixLayout& la, const std::vector<int64_t>& a_offsets,
                  const void* b, const MatrixLayout& lb, const std::vector<int64_t>& b_offsets, void* c, int64_t n,
                  int64_t k, int64_t m, double alpha, bool accumulate, int device) {
  check_device(device, kOp);
  RG_CHECK(dtype == DType::Float32 || dtype == DType::Float64 || is_16bit_float(dtype), kOp,
           "expected float32, float64, bfloat16 or float16 operands, got ", dtype_name(dtype));
  const DType c_dtype = gemm_output_dtype(dtype);  // float32 for 16-bit operands
  RG_CHECK(la.order != MatrixOrder::Neither && lb.order != MatrixOrder::Neither, kOp,
           "an operand is neither row- nor column-major (the caller must copy it first)");
  RG_CHECK(a_offsets.size() == b_offsets.size(), kOp, "batch offsets differ in length: ", a_offsets.size(), " and ",
           b_offsets.size());
  const int64_t count = static_cast<int64_t>(a_offsets.size());
  if (count == 0 || n == 0 || m == 0) return;
  DeviceGuard guard(device, kOp);
  if (k == 0) {  // an empty sum: zeros, or the init already in c
    if (!accumulate) zero_fill(c, count, n, m, c_dtype);
    return;
  }
  const GemmPlan p = plan_gemm(la, lb, n, k, m);
  const int M = as_int(p.M, "m"), N = as_int(p.N, "n"), K = as_int(p.K, "k");
  const int ld_first = as_int(p.ld_first, "ld(b)"), ld_second = as_int(p.ld_second, "ld(a)");
  const int ldc = as_int(p.ldc, "ldc"), batch = as_int(count, "batch count");
  // A, B in `type`, C in `c_type`. 16-bit operands: exact products, float32 sums and result on the
  // tensor cores (the handle's default math mode allows them); TF32 concerns float32 operands only.
  const bool f32 = c_dtype == DType::Float32;
  const cudaDataType_t c_type = f32 ? CUDA_R_32F : CUDA_R_64F;
  const cudaDataType_t type = dtype == DType::BFloat16 ? CUDA_R_16BF : dtype == DType::Float16 ? CUDA_R_16F : c_type;
  const cublasComputeType_t compute = !f32                              ? CUBLAS_COMPUTE_64F
                                      : dtype == DType::Float32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                : CUBLAS_COMPUTE_32F;
  // alpha and beta in the compute type's precision, read from host memory (the default pointer mode).
  const float alpha_f = static_cast<float>(alpha), beta_f = accumulate ? 1.0f : 0.0f;
  const double alpha_d = alpha, beta_d = accumulate ? 1.0 : 0.0;
  const void* alpha_p = f32 ? static_cast<const void*>(&alpha_f) : static_cast<const void*>(&alpha_d);
  const void* beta_p = f32 ? static_cast<const void*>(&beta_f) : static_cast<const void*>(&beta_d);
  const size_t esize = dtype_size(dtype), c_esize = dtype_size(c_dtype);
  const char* a_bytes = static_cast<const char*>(a);
  const char* b_bytes = static_cast<const char*>(b);
  char* c_bytes = static_cast<char*>(c);
  cublasHandle_t handle = cublas_handle(device);
  const cublasOperation_t op_first = op_of(p.trans_first), op_second = op_of(p.trans_second);

  int64_t a_stride = 0, b_stride = 0;
  if (uniform_stride(a_offsets, &a_stride) && uniform_stride(b_offsets, &b_stride)) {
    // One strided-batched call; the first batch entry of each operand is at offset 0. Per entry:
    // Cᵀ (m, n) column-major = op(B) (m, k) · op(A) (k, n), i.e. row-major C (n, m) = A (n, k) · B (k, m).
    RG_CUBLAS_CHECK(cublas().cublasGemmStridedBatchedEx(handle, op_first, op_second, M, N, K, alpha_p, b_bytes, type,
                                                        ld_first, b_stride, a_bytes, type, ld_second, a_stride, beta_p,
                                                        c_bytes, c_type, ldc, static_cast<long long>(n) * m, batch,
                                                        compute, CUBLAS_GEMM_DEFAULT),
                    kOp);
    return;
  }
  // Irregular batch offsets (several batch dims): pointer arrays. When the offsets are an affine
  // function of a few batch dims (every layout matmul makes), a kernel writes them on the device;
  // otherwise they are uploaded. The block goes back to the caching allocator right after the call;
  // the default stream orders any reuse after this GEMM.
  const size_t nbytes = 3 * static_cast<size_t>(count) * sizeof(void*);
  void* dev = device_malloc(nbytes, device);
  try {
    BatchAffine L;
    if (affine_batch(a_offsets, b_offsets, &L)) {
      batch_pointers_kernel<<<grid_size(count), kBlockSize>>>(a_bytes + a_offsets[0] * esize,
                                                              b_bytes + b_offsets[0] * esize, c_bytes, L,
                                                              static_cast<int64_t>(esize),
                                                              static_cast<int64_t>(c_esize), n * m, count,
                                                              static_cast<const void**>(dev));
      RG_CUDA_CHECK_LAUNCH(kOp);
    } else {
      std::vector<const void*> host_ptrs(3 * static_cast<size_t>(count));
      for (int64_t e = 0; e < count; ++e) {
        host_ptrs[e] = b_bytes + b_offsets[e] * esize;                                // first  (B)
        host_ptrs[count + e] = a_bytes + a_offsets[e] * esize;                        // second (A)
        host_ptrs[2 * count + e] = c_bytes + static_cast<size_t>(e * n * m) * c_esize;  // C
      }
      memcpy_host_to_device(dev, host_ptrs.data(), nbytes, device);
    }
    const void* const* dev_ptrs = static_cast<const void* const*>(dev);
    RG_CUBLAS_CHECK(cublas().cublasGemmBatchedEx(handle, op_first, op_second, M, N, K, alpha_p, dev_ptrs, type,
                                                 ld_first, dev_ptrs + count, type, ld_second, beta_p,
                                                 const_cast<void* const*>(dev_ptrs + 2 * count), c_type, ldc, batch,
                                                 compute, CUBLAS_GEMM_DEFAULT),
                    kOp);
  } catch (...) {
    device_free(dev, device);
    throw;
  }
  device_free(dev, device);
}

}  // namespace relgrad::cuda
