// Device discovery, host <-> device copies, synchronisation and the cuBLAS handle.
// Everything runs on the legacy default stream, so work on one device is ordered and a block freed
// to the caching allocator may be reused at once by the next kernel.
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {
struct DeviceInfo {
  int count = 0;
  std::string reason;  // why count is 0
};
// cudaGetDeviceCount is asked once; with no driver or no GPU it fails, and we report 0 devices.
const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    cudaError_t err = cudaGetDeviceCount(&d.count);
    if (err != cudaSuccess) {
      cudaGetLastError();
      d.count = 0;
      d.reason = cudaGetErrorString(err);
    } else if (d.count == 0) {
      d.reason = "the driver reports 0 devices";
    }
    return d;
  }();
  return info;
}
}  // namespace

bool built() { return true; }
int device_count() { return device_info().count; }
const char* no_device_reason() { return device_info().reason.c_str(); }

void check_device(int device, const char* op) {
  const DeviceInfo& d = device_info();
  if (d.count == 0)
    throw DeviceError(detail::concat("[", op, "] no CUDA device available (", d.reason,
                                     "); use Device::cpu(), or check nvidia-smi and CUDA_VISIBLE_DEVICES"));
  RG_CHECK_T(DeviceError, device >= 0 && device < d.count, op, "device cuda:", device, " does not exist (",
             d.count, " CUDA device", d.count == 1 ? "" : "s", " visible)");
}

void synchronize(int device) {
  check_device(device, "cuda_synchronize");
  DeviceGuard guard(device, "cuda_synchronize");
  RG_CUDA_CHECK(cudaDeviceSynchronize(), "cuda_synchronize");
}

// (nbytes) host -> (nbytes) device. cudaMemcpy from pageable memory returns once the host buffer
// may be reused, so the caller can free it at once.
void memcpy_host_to_device(void* dst, const void* src, size_t nbytes, int device) {
  check_device(device, "to(cuda)");
  if (nbytes == 0) return;
  DeviceGuard guard(device, "to(cuda)");
  RG_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice), "to(cuda)");
}

// (nbytes) device -> (nbytes) host; waits for the kernels that produce src.
void memcpy_device_to_host(void* dst, const void* src, size_t nbytes, int device) {
  check_device(device, "to(cpu)");
  if (nbytes == 0) return;
  DeviceGuard guard(device, "to(cpu)");
  RG_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost), "to(cpu)");
}

// ---- cuBLAS --------------------------------------------------------------------------------------
namespace {
std::atomic<bool> tf32_allowed{false};
std::mutex handle_mutex;
std::vector<cublasHandle_t>& handles() {
  static auto* h = new std::vector<cublasHandle_t>();  // never destroyed: the driver may be gone at exit
  return *h;
}
}  // namespace

void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }

cublasHandle_t cublas_handle(int device) {
  check_device(device, "cublas");
  std::lock_guard<std::mutex> lock(handle_mutex);
  std::vector<cublasHandle_t>& h = handles();
  if (h.empty()) h.assign(device_count(), nullptr);
  if (h[device] == nullptr) {
    DeviceGuard guard(device, "cublas");
    RG_CUBLAS_CHECK(cublas().cublasCreate_v2(&h[device]), "cublas");
  }
  RG_CUBLAS_CHECK(
      cublas().cublasSetMathMode(h[device], tf32_allowed ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublas");
  return h[device];
}

}  // namespace relgrad::cuda
