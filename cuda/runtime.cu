// Device discovery, host <-> device copies, synchronisation and the cuBLAS handle.
// Everything runs on the legacy default stream, so work on one device is ordered and a block freed
// to the caching allocator may be reused at once by the next kernel.
#include <cxxabi.h>
#include <execinfo.h>

#include <atomic>
#include <cstdlib>
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

// ---- the transfer counter ------------------------------------------------------------------------
namespace {
std::atomic<uint64_t> to_device_calls{0}, to_device_bytes{0}, to_host_calls{0}, to_host_bytes{0};
std::atomic<bool> tracing{false};
std::mutex trace_mutex;
std::vector<TransferRecord>& trace_records() {
  static auto* r = new std::vector<TransferRecord>();  // never destroyed, like the allocator
  return *r;
}
constexpr size_t kMaxTraceRecords = 256;

// The demangled function names on the caller's stack, innermost first, without this file's frames.
// backtrace_symbols gives "binary(mangled+0x1f) [0x...]"; names exist for exported symbols only.
std::string caller_stack() {
  void* frames[24];
  const int n = backtrace(frames, 24);
  char** symbols = backtrace_symbols(frames, n);
  if (symbols == nullptr) return "(no stack)";
  std::string out;
  for (int k = 2; k < n; ++k) {  // 0: this function, 1: record_transfer
    std::string line = symbols[k], name;
    const size_t open = line.find('('), plus = line.find('+', open == std::string::npos ? 0 : open);
    if (open != std::string::npos && plus != std::string::npos && plus > open + 1) {
      std::string mangled = line.substr(open + 1, plus - open - 1);
      int status = 0;
      char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
      name = status == 0 && demangled ? demangled : mangled;
      std::free(demangled);
    }
    if (name.empty() || name.rfind("relgrad::cuda::memcpy_", 0) == 0) continue;
    if (name.rfind("doctest::", 0) == 0 || name.find("DOCTEST_ANON") != std::string::npos) break;
    const size_t paren = name.find('(');  // drop the parameter list: the function's name suffices
    if (!out.empty()) out += " < ";
    out += paren == std::string::npos ? name : name.substr(0, paren);
  }
  std::free(symbols);
  return out.empty() ? "(no names: link with -rdynamic)" : out;
}

void record_transfer(bool to_device, size_t nbytes) {
  (to_device ? to_device_calls : to_host_calls) += 1;
  (to_device ? to_device_bytes : to_host_bytes) += nbytes;
  if (!tracing) return;
  TransferRecord r{to_device, nbytes, caller_stack()};
  std::lock_guard<std::mutex> lock(trace_mutex);
  if (trace_records().size() < kMaxTraceRecords) trace_records().push_back(std::move(r));
}
}  // namespace

TransferStats transfer_stats() {
  TransferStats s;
  s.to_device_calls = to_device_calls, s.to_device_bytes = to_device_bytes;
  s.to_host_calls = to_host_calls, s.to_host_bytes = to_host_bytes;
  return s;
}

void reset_transfer_stats() {
  to_device_calls = 0, to_device_bytes = 0, to_host_calls = 0, to_host_bytes = 0;
  std::lock_guard<std::mutex> lock(trace_mutex);
  trace_records().clear();
}

void set_transfer_trace(bool on) { tracing = on; }

std::vector<TransferRecord> transfer_trace() {
  std::lock_guard<std::mutex> lock(trace_mutex);
  return trace_records();
}

// (nbytes) host -> (nbytes) device. cudaMemcpy from pageable memory returns once the host buffer
// may be reused, so the caller can free it at once.
void memcpy_host_to_device(void* dst, const void* src, size_t nbytes, int device) {
  check_device(device, "to(cuda)");
  record_transfer(true, nbytes);
  if (nbytes == 0) return;
  DeviceGuard guard(device, "to(cuda)");
  RG_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice), "to(cuda)");
}

// (nbytes) device -> (nbytes) host; waits for the kernels that produce src.
void memcpy_device_to_host(void* dst, const void* src, size_t nbytes, int device) {
  check_device(device, "to(cpu)");
  record_transfer(false, nbytes);
  if (nbytes == 0) return;
  DeviceGuard guard(device, "to(cpu)");
  RG_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost), "to(cpu)");
}

// ---- fill ----------------------------------------------------------------------------------------
namespace {
// dst (n), contiguous: every element = value.
template <class T>
__global__ void fill_kernel(T* dst, T value, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) dst[e] = value;
}
}  // namespace

void fill(void* dst, DType dtype, double value, int64_t n, int device) {
  const char* op = "cuda_fill";
  check_device(device, op);
  if (n == 0) return;
  DeviceGuard guard(device, op);
  dispatch_all(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    // The host's conversion (as the CPU's fill), so a device fill holds the bits a host fill copied.
    fill_kernel<T><<<grid_size(n), kBlockSize>>>(static_cast<T*>(dst), static_cast<T>(value), n);
    RG_CUDA_CHECK_LAUNCH(op);
  });
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
