// CPU matrix products through a single-threaded GEMM per tile (Eigen's, OpenBLAS's or BLIS's, chosen by
// measurement: core/cpu/gemm_library.h), over the tensors' own memory.
//
// Each matrix operand is read in place when it has unit stride along one of its two last dims:
// row-major with an outer stride (the usual case), or column-major (a transposed view,
// x.transpose(-1, -2)). Only other layouts (both strides > 1) get one contiguous copy.
// Broadcast batch dims are read with stride 0, so an expanded operand is never materialised.
// No autograd here: core/backend/matmul.cpp picks it or its CUDA twin; autograd/ops/matmul.cpp
// records the op and its backward.
#pragma once
#include <string>

#include "core/cpu/sgemm.h"
#include "core/tensor.h"

namespace relgrad::cpu {

// a (a_batch..., n, k) @ b (b_batch..., k, m) → out (batch..., n, m), a fresh contiguous tensor,
// where batch = broadcast(a_batch, b_batch) (checked by the caller, like the inner dims and the
// dtypes: a and b are float32 or float64, both the same, both on the CPU, both at least 2-D).
//
// Threads: the product is cut into row or column tiles of out by its shape and the machine's core
// count, never the thread count; the OpenMP threads take tiles one at a time and each tile is one
// single-threaded GEMM of the library gemm_library() names. So results do not depend on the thread
// count (each element is the same sum in the same order).
//
// With `init` defined (the addmm form): out = init + alpha · (a @ b), init broadcast to out's shape.
// relgrad's kernel reads init in place as the values C starts from (sgemm's c_in) where its matrices
// have unit column stride (a bias, a positional term); otherwise init is copied into out first and the
// GEMM accumulates onto it — the same bits either way, and no zero fill plus separate add pass.
// Without: out = alpha · (a @ b).
// `into` (optional, without init): out is written there instead of a fresh contiguous tensor, and
// returned: its shape (batch..., n, m), its last dim of unit stride, its rows and batch entries at any
// strides (a gradient laid out as its operand is: autograd/ops/matmul.cpp). The same elements on
// relgrad's kernel; Eigen's small products round an element by where its row starts (aligned or not).
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const char* op, const Tensor& init = Tensor(),
              double alpha = 1.0, const Tensor& into = Tensor());

// The windowed product of core/backend/window_matmul.h on the CPU: float32 operands as matmul's, through
// relgrad's kernel (sgemm_window), one call per batch entry, entries shared out over the threads, so
// results do not depend on the thread count. With WindowOn::Output the elements outside the window are
// set to zero (also over init, which is read as matmul reads it). Only where
// window_kernel_available(): core/backend/window_matmul.cpp computes the composite elsewhere.
bool window_kernel_available(DType dtype);
Tensor window_matmul(const Tensor& a, const Tensor& b, const Shape& batch, const GemmWindow& window, const char* op,
                     const Tensor& init = Tensor(), double alpha = 1.0);

// The processor's model name (/proc/cpuinfo), or "unknown CPU".
std::string cpu_model_name();

// The product's shape: (batch..., n, m) for a (.., n, k) @ b (.., k, m). Any device.
inline Shape matmul_shape(const Shape& batch, int64_t n, int64_t m) {
  Shape out = batch;
  out.push_back(n);
  out.push_back(m);
  return out;
}

// The element offset of each batch entry of x (x_batch..., rows, cols) over `batch`, in row-major
// order of the batch index: 0 steps along dims x lacks or has of size 1 (broadcast). Any device
// (the CUDA matmul plans its batches with it too).
std::vector<int64_t> batch_offsets(const Tensor& x, const Shape& batch);

}  // namespace relgrad::cpu
