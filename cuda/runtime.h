// The CUDA backend's raw interface: device memory, copies and kernels on plain pointers.
// It knows nothing of Tensor or autograd; core/ calls it. It includes only core/base/ headers.
// When relgrad is built without CUDA (RELGRAD_CUDA=OFF, or AUTO with no nvcc), cuda/no_cuda.cpp
// implements every function by throwing DeviceError, so callers need no #ifdefs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/dtype.h"

namespace relgrad::cuda {

bool built();        // compiled with CUDA support
int device_count();  // 0 when there is no usable GPU (never throws)
// cuBLAS is loaded at the first GEMM on a GPU, not linked (cuda/cublas_api.cu says why). load_cublas
// loads it now and resolves every entry point relgrad calls (no GPU needed), throwing DeviceError
// naming the library when it cannot; cublas_loaded says whether this process has it loaded.
void load_cublas();
bool cublas_loaded();

// Device memory through the caching allocator (cuda/allocator.cu). Throws DeviceError naming the
// byte count when the GPU is out of memory, or when CUDA is unavailable.
void* device_malloc(size_t nbytes, int device);
void device_free(void* ptr, int device);  // never throws
struct MemoryStats {
  size_t allocated_bytes = 0;       // handed out to tensors now
  size_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes
  size_t cached_bytes = 0;          // held by the allocator for reuse, not handed out
};
MemoryStats memory_stats(int device = 0);
void empty_cache(int device = 0);  // returns cached blocks to the driver
// The device's memory in bytes (cudaDeviceProp::totalGlobalMem, read once per device); 0 without CUDA.
size_t total_memory_bytes(int device = 0);
void synchronize(int device = 0);
// Test aid (tests/cuda_testing.h): while on, every new allocation gets guard zones of a known
// pattern before and after it (and bypasses the cache); check_guards throws Error naming each
// allocation whose zones a kernel overwrote. Both are no-ops in a build without CUDA.
void set_guard_checking(bool on);
void check_guards(const char* op);

void memcpy_host_to_device(void* dst, const void* src, size_t nbytes, int device);
void memcpy_device_to_host(void* dst, const void* src, size_t nbytes, int device);

// Every copy between host and device goes through the two functions above, which count them: calls
// and bytes per direction since the last reset (all devices together, copies of 0 bytes included).
// A training step after the first should copy to the device only its batch
// (tests/test_cuda_transfers.cpp). Zeros in a build without CUDA.
struct TransferStats {
  uint64_t to_device_calls = 0, to_device_bytes = 0;
  uint64_t to_host_calls = 0, to_host_bytes = 0;
};
TransferStats transfer_stats();
void reset_transfer_stats();  // also clears the trace
// Test aid: while tracing is on, each copy is also recorded with its caller's stack (demangled names
// of the exported functions on it: link the program with -rdynamic, CMake's ENABLE_EXPORTS, to get
// them), so a test can name an unexpected copy. At most 256 records are kept. Off by default.
struct TransferRecord {
  bool to_device = true;
  size_t bytes = 0;
  std::string where;  // the calling functions, innermost first, " < " between them
};
void set_transfer_trace(bool on);
std::vector<TransferRecord> transfer_trace();

// dst (n elements of dtype, contiguous, on device) = value converted to dtype: zeros, ones, full and
// scalar operands are made on the device by this instead of copied from the host.
void fill(void* dst, DType dtype, double value, int64_t n, int device);

// dst[i] = convert(src[i]) for every index i of `shape`, both operands strided (in elements) on the
// same device; dtypes may differ. Used for contiguous(), broadcast materialisation and to(dtype).
void strided_copy(void* dst, DType dst_dtype, const std::vector<int64_t>& dst_strides, const void* src,
                  DType src_dtype, const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                  int device);

// Elementwise kernels over contiguous arrays of n elements on `device`, generated from
// core/base/functors.h.
enum class UnaryOp {
#define RG_UNARY(name, Functor) Functor,
#include "core/base/unary_ops.def"
#undef RG_UNARY
};
enum class BinaryOp {
#define RG_BINARY(name, Functor, is_bool) Functor,
#include "core/base/binary_ops.def"
#undef RG_BINARY
};
void unary_forward(UnaryOp op, DType dtype, const void* x, void* y, int64_t n, int device);                // y = f(x)
void unary_backward(UnaryOp op, DType dtype, const void* x, const void* y, const void* gy, void* gx,
                    int64_t n, int device);                                                     // gx = gy f'(x)
void pow_forward(double p, DType dtype, const void* x, void* y, int64_t n, int device);
void pow_backward(double p, DType dtype, const void* x, const void* gy, void* gx, int64_t n, int device);
// out = a (op) b; out is bool for comparisons, else `dtype`.
void binary_forward(BinaryOp op, DType dtype, const void* a, const void* b, void* out, int64_t n, int device);

}  // namespace relgrad::cuda
