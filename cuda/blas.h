// Matrix products on the GPU through cuBLAS: the raw interface (plain pointers, no Tensor) that
// core/backend/matmul.cpp calls for CUDA operands, and the host-side planning it needs.
//
// cuBLAS is column-major; relgrad's matrices are row-major views with arbitrary strides. The plan:
//   * each operand's last two dims are classified (classify_matrix) as row-major (unit stride along
//     cols), column-major (unit stride along rows: a transposed view) or neither; only "neither"
//     is copied (by the caller), so x.transpose(-1, -2) costs nothing;
//   * the row-major product C (n, m) = A (n, k) · B (k, m) is computed as the column-major product
//     Cᵀ (m, n) = Bᵀ (m, k) · Aᵀ (k, n): a row-major operand read column-major is already its own
//     transpose (op N), a column-major one needs op T (plan_gemm);
//   * the batch: each operand gives the element offset of every batch entry (0 steps for broadcast
//     dims). When both offset lists are arithmetic progressions, one strided-batched GEMM runs;
//     otherwise (several broadcast batch dims) one pointer-array batched GEMM.
// The planning functions are inline host code, so the CPU-only build and tests can check them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/base/dtype.h"

namespace relgrad::cuda {

enum class MatrixOrder { RowMajor, ColMajor, Neither };

struct MatrixLayout {
  MatrixOrder order = MatrixOrder::RowMajor;
  int64_t ld = 1;  // outer stride: between rows (row-major) or between columns (column-major)
};

// A (rows, cols) matrix with strides (row_stride, col_stride) in elements, read as cuBLAS can. A
// size-1 dim may have any stride (it is never stepped along), so it spoils neither order. The same
// rule as the CPU's plan_operand (core/cpu/matmul.cpp), plus ld >= 1 as cuBLAS requires.
inline MatrixLayout classify_matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  MatrixLayout L;
  if ((col_stride == 1 || cols == 1) && (rows == 1 || row_stride >= cols)) {
    L.order = MatrixOrder::RowMajor;
    L.ld = rows == 1 ? cols : row_stride;
  } else if ((row_stride == 1 || rows == 1) && (cols == 1 || col_stride >= rows)) {
    L.order = MatrixOrder::ColMajor;
    L.ld = cols == 1 ? rows : col_stride;
  } else {
    L.order = MatrixOrder::Neither;
    L.ld = 0;
  }
  if (L.order != MatrixOrder::Neither && L.ld < 1) L.ld = 1;  // an empty dim: cuBLAS still wants ld >= 1
  return L;
}

// The column-major cuBLAS arguments for row-major C (n, m) = A (n, k) · B (k, m), C contiguous:
// gemm(trans_first, trans_second, M = m, N = n, K = k, first = B (ld_first), second = A (ld_second),
// C with ldc = m). Both layouts must be RowMajor or ColMajor.
struct GemmPlan {
  bool trans_first = false, trans_second = false;  // op T (true) or op N (false)
  int64_t M = 0, N = 0, K = 0;
  int64_t ld_first = 1, ld_second = 1, ldc = 1;
};
inline GemmPlan plan_gemm(const MatrixLayout& a, const MatrixLayout& b, int64_t n, int64_t k, int64_t m) {
  GemmPlan p;
  p.M = m;
  p.N = n;
  p.K = k;
  // B row-major (k, m) with ld is, read column-major, Bᵀ (m, k) with the same ld: op N. B column-major
  // is B (k, m) column-major: op T. Likewise A row-major is Aᵀ (k, n): op N; column-major: op T.
  p.trans_first = b.order == MatrixOrder::ColMajor;
  p.trans_second = a.order == MatrixOrder::ColMajor;
  p.ld_first = b.ld;
  p.ld_second = a.ld;
  p.ldc = m < 1 ? 1 : m;
  return p;
}

// True when offsets[e] = e * stride for every e (stride may be 0: a broadcast operand).
inline bool uniform_stride(const std::vector<int64_t>& offsets, int64_t* stride) {
  *stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t e = 0; e < offsets.size(); ++e)
    if (offsets[e] != static_cast<int64_t>(e) * *stride) return false;
  return true;
}

// The dtype of a GEMM's result for operands of `operands`: float32 for bfloat16/float16 operands
// (autocast's products accumulate and return float32), else the operands' own.
inline DType gemm_output_dtype(DType operands) { return is_16bit_float(operands) ? DType::Float32 : operands; }

// TF32 tensor-core math for float32 GEMMs: off by default, so float32 products match the CPU to
// ~1e-6 rather than ~1e-3 (the same functions cuda/common.cuh declares for the .cu files; defined in
// cuda/runtime.cu, and in cuda/no_cuda.cpp as "never" for a build without CUDA).
void set_allow_tf32(bool allow);
bool allow_tf32();

// c (count, n, m), contiguous = alpha · a_e @ b_e for every batch entry e, or c += alpha · a_e @ b_e
// (accumulate: c already holds the addmm init). a_e starts at a + a_offsets[e] (elements) and has
// layout `la` (RowMajor or ColMajor), likewise b. a_offsets and b_offsets have `count` entries.
// `dtype` is the operands' dtype: float32 or float64 (c the same; float32 uses TF32 tensor cores
// only when allow_tf32()), or bfloat16 / float16 (autocast, autograd/autocast.h): then c is float32
// and the tensor cores multiply the 16-bit values exactly and accumulate in float32
// (CUBLAS_COMPUTE_32F), the contract the CPU emulates with a float32 GEMM of rounded operands.
// k == 0 is handled (c = 0, or c unchanged when accumulating). Runs on `device`'s default stream.
void gemm_batched(DType dtype, const void* a, const MatrixLayout& la, const std::vector<int64_t>& a_offsets,
                  const void* b, const MatrixLayout& lb, const std::vector<int64_t>& b_offsets, void* c, int64_t n,
                  int64_t k, int64_t m, double alpha, bool accumulate, int device);

}  // namespace relgrad::cuda
