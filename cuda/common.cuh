// Shared by the .cu files of the CUDA backend (never included from outside cuda/): error checks
// that throw relgrad::DeviceError, launch geometry, the device guard and the cuBLAS handle.
//
// Shapes in kernel comments use n for the element count of a flat (contiguous) array, and
// (d0, ..., dk) for a strided view of up to kMaxDims dims.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/base/error.h"

namespace relgrad::cuda {

// ---- errors --------------------------------------------------------------------------------------
[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* op, const char* call) {
  cudaGetLastError();  // clear a non-sticky error so that the next launch check does not see it again
  throw DeviceError(detail::concat("[", op, "] CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err),
                                   " from ", call, ")"));
}
// ---- cuBLAS, loaded on first use (cuda/cublas_api.cu explains why) ------------------------------
// The entry points relgrad calls, each under cuBLAS's own name, so that a call reads
// `cublas().cublasSetMathMode(h, mode)` and tools/check_cuda_calls.sh checks it like a direct one.
struct CublasApi {
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using SetMathMode = cublasStatus_t (*)(cublasHandle_t, cublasMath_t);
  using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long int,
                                                  const void*, cudaDataType, int, long long int, const void*, void*,
                                                  cudaDataType, int, long long int, int, cublasComputeType_t,
                                                  cublasGemmAlgo_t);
  using GemmBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                           const void*, const void* const[], cudaDataType, int, const void* const[],
                                           cudaDataType, int, const void*, void* const[], cudaDataType, int, int,
                                           cublasComputeType_t, cublasGemmAlgo_t);
  using StatusText = const char* (*)(cublasStatus_t);
  Create cublasCreate_v2 = nullptr;
  SetMathMode cublasSetMathMode = nullptr;
  GemmStridedBatchedEx cublasGemmStridedBatchedEx = nullptr;
  GemmBatchedEx cublasGemmBatchedEx = nullptr;
  StatusText cublasGetStatusString = nullptr;
  StatusText cublasGetStatusName = nullptr;
};
// Loads cuBLAS at the first call; throws DeviceError naming the library when it cannot.
const CublasApi& cublas();

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* op, const char* call) {
  // A status exists only after a call through the loaded API, so cublas() cannot fail here.
  throw DeviceError(detail::concat("[", op, "] cuBLAS error: ", cublas().cublasGetStatusString(status), " (",
                                   cublas().cublasGetStatusName(status), " from ", call, ")"));
}

}  // namespace relgrad::cuda

// RG_CUDA_CHECK(cudaMemcpy(...), "to(cuda)"): throws DeviceError("[to(cuda)] CUDA error: ...").
#define RG_CUDA_CHECK(call, op)                                                            \
  do {                                                                                     \
    cudaError_t rg_cuda_err = (call);                                                      \
    if (rg_cuda_err != cudaSuccess) ::relgrad::cuda::throw_cuda_error(rg_cuda_err, op, #call); \
  } while (0)
#define RG_CUBLAS_CHECK(call, op)                                                                   \
  do {                                                                                              \
    cublasStatus_t rg_cublas_status = (call);                                                       \
    if (rg_cublas_status != CUBLAS_STATUS_SUCCESS)                                                  \
      ::relgrad::cuda::throw_cublas_error(rg_cublas_status, op, #call);                             \
  } while (0)
// After every kernel launch: a bad configuration is reported here, a fault at the next sync.
#define RG_CUDA_CHECK_LAUNCH(op) RG_CUDA_CHECK(cudaGetLastError(), op)

namespace relgrad::cuda {

// ---- launch geometry -----------------------------------------------------------------------------
// Elementwise kernels use grid-stride loops, so the grid can be capped: 256 threads per block and
// at most kMaxBlocks blocks (enough to fill an H100's 132 SMs many times over).
constexpr int kBlockSize = 256;
constexpr int64_t kMaxBlocks = 65535;
inline unsigned int grid_size(int64_t n) {
  int64_t blocks = (n + kBlockSize - 1) / kBlockSize;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// ---- devices -------------------------------------------------------------------------------------
// Why device_count() is 0, e.g. "no CUDA-capable device is detected" (empty when there are GPUs).
const char* no_device_reason();
// Throws DeviceError when CUDA has no device, or `device` is not one of them.
void check_device(int device, const char* op);

// Makes `device` current for the lifetime of the guard, then restores the previous one.
class DeviceGuard {
 public:
  DeviceGuard(int device, const char* op) {
    RG_CUDA_CHECK(cudaGetDevice(&previous_), op);
    if (previous_ == device) {
      previous_ = -1;
    } else {
      RG_CUDA_CHECK(cudaSetDevice(device), op);
    }
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);  // best effort: destructors never throw
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// ---- cuBLAS (for matmul) -------------------------------------------------------------------------
// One handle per device, created on first use and kept for the life of the process. TF32 tensor-core
// math is off unless set_allow_tf32(true): float32 matmuls then match the CPU to ~1e-6, not ~1e-3.
cublasHandle_t cublas_handle(int device);
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace relgrad::cuda
