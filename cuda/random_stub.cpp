// cuda/random.h when relgrad is built without CUDA: every entry point throws DeviceError.
#include "cuda/random.h"

#include "core/base/error.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

void dropout_forward(DType, const void*, void*, void*, int64_t, uint64_t, uint64_t, uint64_t, double, double, bool,
                     int) {
  unavailable("cuda_dropout");
}
void rand_uniform(DType, void*, int64_t, uint64_t, uint64_t, int) { unavailable("cuda_rand"); }
void rand_int(DType, void*, int64_t, uint64_t, uint64_t, int64_t, int64_t, int) { unavailable("cuda_randint"); }

}  // namespace relgrad::cuda
