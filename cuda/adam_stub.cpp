// cuda/adam.h when relgrad is built without CUDA: the fused step throws DeviceError.
#include "cuda/adam.h"

#include "core/base/error.h"

namespace relgrad::cuda {

void adam_step(DType, void*, const void*, void*, void*, int64_t, const AdamParams&, int) {
  throw DeviceError(detail::concat("[cuda_adam_step] relgrad was built without CUDA support (configure with ",
                                   "-DRELGRAD_CUDA=ON on a machine with the CUDA toolkit)"));
}

}  // namespace relgrad::cuda
