// The CUDA backend when relgrad is built without CUDA (cuda/CMakeLists.txt compiles this file
// instead of the .cu files): every kernel entry point throws DeviceError, so asking for a GPU gives
// a clear message instead of a crash, and the floors above need no #ifdefs. Adding a CUDA entry
// point = one RG_NO_CUDA line here (return type, name, parameter types, the op named in the error).
#include "core/base/error.h"
#include "cuda/adam.h"
#include "cuda/blas.h"
#include "cuda/flash_attention.h"
#include "cuda/fused.h"
#include "cuda/index.h"
#include "cuda/norm.h"
#include "cuda/random.h"
#include "cuda/reduce.h"
#include "cuda/runtime.h"
#include "cuda/softmax.h"
#include "cuda/timer.h"

namespace relgrad::cuda {
namespace {
[[noreturn]] void unavailable(const char* op) {
  throw DeviceError(detail::concat("[", op, "] relgrad was built without CUDA support (configure with -DRELGRAD_CUDA=ON ",
                                   "on a machine with the CUDA toolkit)"));
}
}  // namespace

#define RG_NO_CUDA(ret, name, params, op) \
  ret name params { unavailable(op); }

// ---- runtime (cuda/runtime.h): queries answer "no GPU"; what needs one throws ----
bool built() { return false; }
int device_count() { return 0; }
bool cublas_loaded() { return false; }
RG_NO_CUDA(void, load_cublas, (), "cublas")
void device_free(void*, int) {}
MemoryStats memory_stats(int) { return {}; }
void empty_cache(int) {}
size_t total_memory_bytes(int) { return 0; }
void set_guard_checking(bool) {}
void check_guards(const char*) {}
void set_allow_tf32(bool) {}  // nothing to switch: there are no GPU matmuls
bool allow_tf32() { return false; }
RG_NO_CUDA(void*, device_malloc, (size_t, int), "cuda_malloc")
RG_NO_CUDA(void, synchronize, (int), "cuda_synchronize")
RG_NO_CUDA(void, memcpy_host_to_device, (void*, const void*, size_t, int), "to(cuda)")
RG_NO_CUDA(void, memcpy_device_to_host, (void*, const void*, size_t, int), "to(cpu)")
TransferStats transfer_stats() { return {}; }  // nothing crosses a bus that is not there
void reset_transfer_stats() {}
void set_transfer_trace(bool) {}
std::vector<TransferRecord> transfer_trace() { return {}; }
RG_NO_CUDA(void, fill, (void*, DType, double, int64_t, int), "cuda_fill")
RG_NO_CUDA(void, strided_copy, (void*, DType, const std::vector<int64_t>&, const void*, DType,
                                const std::vector<int64_t>&, const std::vector<int64_t>&, int), "cuda_copy")

// ---- elementwise (cuda/runtime.h) ----
RG_NO_CUDA(void, unary_forward, (UnaryOp, DType, const void*, void*, int64_t, int), "cuda_unary")
RG_NO_CUDA(void, unary_backward, (UnaryOp, DType, const void*, const void*, const void*, void*, int64_t, int), "cuda_unary")
RG_NO_CUDA(void, pow_forward, (double, DType, const void*, void*, int64_t, int), "cuda_pow")
RG_NO_CUDA(void, pow_backward, (double, DType, const void*, const void*, void*, int64_t, int), "cuda_pow")
RG_NO_CUDA(void, binary_forward, (BinaryOp, DType, const void*, const void*, void*, int64_t, int), "cuda_binary")

// ---- reductions and where (cuda/reduce.h) ----
RG_NO_CUDA(void, reduce_sum, (DType, const void*, void*, int64_t, int64_t, int64_t, double, int), "cuda_sum")
RG_NO_CUDA(void, reduce_var, (DType, const void*, void*, void*, int64_t, int64_t, int64_t, int64_t, int), "cuda_var")
RG_NO_CUDA(void, reduce_logsumexp, (DType, const void*, void*, int64_t, int64_t, int64_t, int), "cuda_logsumexp")
RG_NO_CUDA(void, reduce_extremum, (bool, DType, const void*, void*, int64_t*, int64_t, int64_t, int64_t, int), "cuda_max")
RG_NO_CUDA(void, scatter_to_index, (DType, const void*, const int64_t*, void*, int64_t, int64_t, int64_t, int),
           "cuda_max_backward")
RG_NO_CUDA(void, where_select, (DType, const std::vector<int64_t>&, void*, const bool*, const std::vector<int64_t>&,
                                const void*, const std::vector<int64_t>&, const void*, const std::vector<int64_t>&, int),
           "cuda_where")

// ---- softmax family (cuda/softmax.h) ----
RG_NO_CUDA(void, softmax_forward, (DType, const void*, void*, const SoftmaxLayout&, int), "cuda_softmax")
RG_NO_CUDA(void, softmax_backward, (DType, const void*, const void*, void*, const SoftmaxLayout&, int),
           "cuda_softmax_backward")
RG_NO_CUDA(void, masked_softmax_forward, (DType, const void*, double, const void*, const std::vector<int64_t>&,
                                          const bool*, const std::vector<int64_t>&, void*, const std::vector<int64_t>&,
                                          int), "cuda_masked_softmax")
RG_NO_CUDA(void, masked_softmax_backward, (DType, const void*, const void*, double, void*, void*, int64_t, int64_t, int),
           "cuda_masked_softmax_backward")
RG_NO_CUDA(void, cross_entropy_forward, (DType, const void*, const int64_t*, void*, void*, const CrossEntropyLayout&,
                                         int), "cuda_cross_entropy")
RG_NO_CUDA(void, cross_entropy_backward, (DType, const void*, const int64_t*, const void*, const void*, bool, double,
                                          void*, const CrossEntropyLayout&, int),
           "cuda_cross_entropy_backward")

// ---- normalisation (cuda/norm.h) ----
RG_NO_CUDA(void, norm_forward, (DType, const void*, const void*, const void*, void*, void*, void*, int64_t, int64_t,
                                double, int), "cuda_layer_norm")
RG_NO_CUDA(void, norm_backward, (DType, const void*, const void*, const void*, const void*, const void*, void*, void*,
                                 void*, int64_t, int64_t, int), "cuda_layer_norm_backward")

// ---- fused elementwise chains (cuda/fused.h) ----
RG_NO_CUDA(void, bias_activation_forward, (Activation, DType, const void*, const void*, void*, int64_t, int64_t, int),
           "cuda_bias_activation")
RG_NO_CUDA(void, bias_activation_backward, (Activation, DType, const void*, const void*, const void*, void*, void*,
                                            int64_t, int64_t, int), "cuda_bias_activation_backward")
RG_NO_CUDA(void, residual_norm_forward, (DType, const void*, const void*, const void*, const void*, void*, void*, void*,
                                         void*, int64_t, int64_t, double, int), "cuda_residual_layer_norm")

// ---- matmul (cuda/blas.h; the planning helpers are inline there and work everywhere) ----
RG_NO_CUDA(void, gemm_batched, (DType, const void*, const MatrixLayout&, const std::vector<int64_t>&, const void*,
                                const MatrixLayout&, const std::vector<int64_t>&, void*, int64_t, int64_t, int64_t,
                                double, bool, int), "cuda_matmul")

// ---- indexing (cuda/index.h) ----
RG_NO_CUDA(void, gather, (DType, const std::vector<int64_t>&, void*, const void*, const std::vector<int64_t>&, int64_t,
                          const int64_t*, const std::vector<int64_t>&, int), "cuda_gather")
RG_NO_CUDA(void, scatter_add_rows, (DType, const void*, const int64_t*, int64_t, void*, int64_t, int64_t, int64_t,
                                    int64_t, int), "cuda_scatter_add")
RG_NO_CUDA(void, scatter_add_columns, (DType, const void*, const int64_t*, int64_t, int64_t, int64_t, void*, int64_t,
                                       int64_t, int64_t, int64_t, int), "cuda_scatter_add")
RG_NO_CUDA(void, relative_gather, (DType, const RelativeLayout&, const void*, const int64_t*, void*, int),
           "cuda_relative_gather")
RG_NO_CUDA(void, relative_scatter, (DType, const RelativeLayout&, const void*, const int64_t*, void*, int),
           "cuda_relative_scatter")
RG_NO_CUDA(void, csr_by_key_on_device, (const int64_t*, int64_t, int64_t, int64_t*, int64_t*, int), "cuda_csr")

// ---- random (cuda/random.h) ----
RG_NO_CUDA(void, dropout_forward, (DType, const void*, void*, void*, int64_t, uint64_t, uint64_t, uint64_t, double,
                                   double, bool, int), "cuda_dropout")
RG_NO_CUDA(void, rand_uniform, (DType, void*, int64_t, uint64_t, uint64_t, int), "cuda_rand")
RG_NO_CUDA(void, rand_int, (DType, void*, int64_t, uint64_t, uint64_t, int64_t, int64_t, int), "cuda_randint")

// ---- fused relative attention (cuda/flash_attention.h) ----
RG_NO_CUDA(void, flash_attention_forward, (const FlashArgs&, void*, void*), "flash_relative_attention")
RG_NO_CUDA(void, flash_attention_backward, (const FlashArgs&, const void*, const void*, const void*, void*, void*,
                                            void*, void*, void*, void*), "flash_relative_attention")

// ---- fused Adam (cuda/adam.h) ----
RG_NO_CUDA(void, adam_step, (DType, void*, const void*, void*, void*, int64_t, const AdamParams&, int), "cuda_adam_step")

// ---- profiler events (cuda/timer.h) ----
RG_NO_CUDA(void*, event_create, (int), "profile")
void event_destroy(void*, int) {}
RG_NO_CUDA(void, event_record, (void*, int), "profile")
RG_NO_CUDA(void, event_synchronize, (void*, int), "profile")
RG_NO_CUDA(float, event_elapsed_ms, (void*, void*, int), "profile")

#undef RG_NO_CUDA

}  // namespace relgrad::cuda
