// cuda/norm.h when relgrad is built without CUDA: every entry point throws DeviceError (as cuda/stub.cpp).
#include "core/base/error.h"
#include "cuda/norm.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

void norm_forward(DType, const void*, const void*, const void*, void*, void*, void*, int64_t, int64_t, double, int) {
  unavailable("cuda_layer_norm");
}
void norm_backward(DType, const void*, const void*, const void*, const void*, const void*, void*, void*, void*, int64_t,
                   int64_t, int) {
  unavailable("cuda_layer_norm_backward");
}

}  // namespace relgrad::cuda
