// cuda/softmax.h when relgrad is built without CUDA: every entry point throws DeviceError (as cuda/stub.cpp).
#include "core/base/error.h"
#include "cuda/softmax.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

void softmax_forward(DType, const void*, void*, int64_t, int64_t, int64_t, bool, int) { unavailable("cuda_softmax"); }
void softmax_backward(DType, const void*, const void*, void*, int64_t, int64_t, int64_t, bool, int) {
  unavailable("cuda_softmax_backward");
}
void masked_softmax_forward(DType, const void*, double, const void*, const std::vector<int64_t>&, const bool*,
                            const std::vector<int64_t>&, void*, const std::vector<int64_t>&, int) {
  unavailable("cuda_masked_softmax");
}
void masked_softmax_backward(DType, const void*, const void*, double, void*, void*, int64_t, int64_t, int) {
  unavailable("cuda_masked_softmax_backward");
}
void cross_entropy_forward(DType, const void*, const int64_t*, void*, void*, int64_t, int64_t, int64_t, int64_t, double,
                           int) {
  unavailable("cuda_cross_entropy");
}
void cross_entropy_backward(DType, const void*, const int64_t*, const void*, const void*, bool, double, void*, int64_t,
                            int64_t, int64_t, int64_t, double, int) {
  unavailable("cuda_cross_entropy_backward");
}

}  // namespace relgrad::cuda
