// cuda/reduce.h when relgrad is built without CUDA: every entry point throws DeviceError (as cuda/stub.cpp).
#include "core/base/error.h"
#include "cuda/reduce.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

void reduce_sum(DType, const void*, void*, int64_t, int64_t, int64_t, double, int) { unavailable("cuda_sum"); }
void reduce_var(DType, const void*, void*, void*, int64_t, int64_t, int64_t, int64_t, int) { unavailable("cuda_var"); }
void reduce_logsumexp(DType, const void*, void*, int64_t, int64_t, int64_t, int) { unavailable("cuda_logsumexp"); }
void reduce_extremum(bool, DType, const void*, void*, int64_t*, int64_t, int64_t, int64_t, int) {
  unavailable("cuda_max");
}
void scatter_to_index(DType, const void*, const int64_t*, void*, int64_t, int64_t, int64_t, int) {
  unavailable("cuda_max_backward");
}
void where_select(DType, const std::vector<int64_t>&, void*, const bool*, const std::vector<int64_t>&, const void*,
                  const std::vector<int64_t>&, const void*, const std::vector<int64_t>&, int) {
  unavailable("cuda_where");
}

}  // namespace relgrad::cuda
