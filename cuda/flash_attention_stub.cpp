// cuda/flash_attention.h when relgrad is built without CUDA: every entry point throws DeviceError.
#include "cuda/flash_attention.h"

#include "core/base/error.h"

namespace relgrad::cuda {

namespace {
[[noreturn]] void unavailable() {
  throw DeviceError(detail::concat("[flash_relative_attention] relgrad was built without CUDA support (configure ",
                                   "with -DRELGRAD_CUDA=ON on a machine with the CUDA toolkit)"));
}
}  // namespace

void flash_attention_forward(const FlashArgs&, void*, void*) { unavailable(); }
void flash_attention_backward(const FlashArgs&, const void*, const void*, const void*, void*, void*, void*, void*,
                              void*, void*) {
  unavailable();
}

}  // namespace relgrad::cuda
