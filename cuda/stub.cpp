// The CUDA backend when relgrad is built without CUDA: every entry point throws DeviceError, so
// asking for a GPU gives a clear message instead of a crash, and callers need no #ifdefs.
#include "cuda/runtime.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

bool built() { return false; }
int device_count() { return 0; }
void* device_malloc(size_t, int) { unavailable("cuda_malloc"); }
void device_free(void*, int) {}
MemoryStats memory_stats(int) { return {}; }
void empty_cache(int) {}
void set_guard_checking(bool) {}
void check_guards(const char*) {}
void synchronize(int) { unavailable("cuda_synchronize"); }
void memcpy_host_to_device(void*, const void*, size_t, int) { unavailable("to(cuda)"); }
void memcpy_device_to_host(void*, const void*, size_t, int) { unavailable("to(cpu)"); }
void strided_copy(void*, DType, const std::vector<int64_t>&, const void*, DType, const std::vector<int64_t>&,
                  const std::vector<int64_t>&, int) { unavailable("cuda_copy"); }
void unary_forward(UnaryOp, DType, const void*, void*, int64_t, int) { unavailable("cuda_unary"); }
void unary_backward(UnaryOp, DType, const void*, const void*, const void*, void*, int64_t, int) { unavailable("cuda_unary"); }
void pow_forward(double, DType, const void*, void*, int64_t, int) { unavailable("cuda_pow"); }
void pow_backward(double, DType, const void*, const void*, void*, int64_t, int) { unavailable("cuda_pow"); }
void binary_forward(BinaryOp, DType, const void*, const void*, void*, int64_t, int) { unavailable("cuda_binary"); }

}  // namespace relgrad::cuda
