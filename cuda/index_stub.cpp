// cuda/index.h when relgrad is built without CUDA: every kernel throws DeviceError (csr_by_key is
// inline host code in the header and works everywhere).
#include "cuda/index.h"

#include "core/base/error.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

void gather(DType, const std::vector<int64_t>&, void*, const void*, const std::vector<int64_t>&, int64_t,
            const int64_t*, const std::vector<int64_t>&, int) {
  unavailable("cuda_gather");
}
void scatter_add_rows(DType, const void*, const int64_t*, int64_t, void*, int64_t, int64_t, int64_t, int64_t, int) {
  unavailable("cuda_scatter_add");
}
void scatter_add_columns(DType, const void*, const int64_t*, int64_t, int64_t, int64_t, void*, int64_t, int64_t, int64_t,
                         int64_t, int) {
  unavailable("cuda_scatter_add");
}
void relative_gather(DType, const void*, int64_t, int64_t, const int64_t*, void*, int64_t, int64_t, int64_t, int) {
  unavailable("cuda_relative_gather");
}
void relative_scatter(DType, const void*, const int64_t*, void*, int64_t, int64_t, int64_t, int64_t, int) {
  unavailable("cuda_relative_scatter");
}

}  // namespace relgrad::cuda
