// cuda/blas.h when relgrad is built without CUDA: the GEMM throws DeviceError (the planning helpers
// are inline in the header and work everywhere).
#include "cuda/blas.h"

#include "core/base/error.h"

namespace relgrad::cuda {

void set_allow_tf32(bool) {}  // nothing to switch: there are no GPU matmuls
bool allow_tf32() { return false; }

void gemm_batched(DType, const void*, const MatrixLayout&, const std::vector<int64_t>&, const void*,
                  const MatrixLayout&, const std::vector<int64_t>&, void*, int64_t, int64_t, int64_t, double, bool,
                  int) {
  throw DeviceError(detail::concat("[cuda_matmul] relgrad was built without CUDA support (configure with ",
                                   "-DRELGRAD_CUDA=ON on a machine with the CUDA toolkit)"));
}

}  // namespace relgrad::cuda
