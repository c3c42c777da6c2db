// Deterministic reductions shared by cuda/reduce.cu, cuda/softmax.cu and cuda/norm.cu (never
// included from outside cuda/).
//
// Every reduction is over a contiguous (outer, R, inner) block: "column" (o, i) is the R values
// x[(o * R + r) * inner + i], r = 0 .. R-1, and gives one output. One generic driver, run_reduce,
// takes a small "reducer" struct that says how to read a term, how to combine two partial results
// and where to write the final one:
//
//   struct Reducer {
//     using V = ...;                                          // accumulator (trivially copyable)
//     __device__ V identity() const;                          // the empty reduction
//     __device__ V load(int64_t o, int64_t r, int64_t i) const;  // the term of element (o, r, i)
//     __device__ V combine(V a, V b) const;                   // associative, up to rounding
//     __device__ void finish(int64_t o, int64_t i, V v) const;   // writes output (o, i)
//   };
//
// Why it is written this way: results must be bit-for-bit reproducible run to run, so there are no
// atomics. Every thread accumulates a fixed set of terms in a fixed order, and partial results are
// combined in a fixed tree (shared memory, blockDim a power of two) or in a fixed serial order. The
// shape alone (outer, R, inner) decides the launch geometry, so the same input gives the same bits.
//   - inner == 1 (reducing the last dims, the common case): one block per row. Rows longer than
//     kRowChunk are cut into chunks of kRowChunk; one block per (row, chunk) writes a partial, and a
//     second kernel combines each row's partials, in chunk order, with one block per row.
//   - inner > 1: one thread per column (neighbouring threads read neighbouring addresses, so loads
//     coalesce), serial over r. Columns longer than kColChunk are cut into chunks the same way: one
//     thread per (chunk, column) writes a partial, a second kernel adds them in chunk order.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda::red {

constexpr int kMaxThreads = 256;        // threads per block of the row kernels (a power of two)
constexpr int64_t kRowChunk = 8192;     // elements per block in the two-stage row reduction
constexpr int64_t kColChunk = 256;      // rows per thread in the two-stage column reduction

// Threads per block for rows of n terms: the smallest power of two >= n, between 32 and kMaxThreads,
// so short rows do not leave most of a 256-thread block idle.
inline int row_threads(int64_t n) {
  int t = 32;
  while (t < n && t < kMaxThreads) t *= 2;
  return t;
}
// Blocks for `rows` rows, one block per row; kernels stride over rows beyond the cap.
inline unsigned int row_grid(int64_t rows) {
  if (rows < 1) return 1;
  return static_cast<unsigned int>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

// Scratch memory from the caching allocator, freed at scope exit. Kernels run on the default stream,
// so a block freed here is reused only by work queued after the kernels that read it.
class Scratch {
 public:
  Scratch(size_t nbytes, int device) : ptr_(device_malloc(nbytes, device)), device_(device) {}
  ~Scratch() { device_free(ptr_, device_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class V>
  V* as() const { return static_cast<V*>(ptr_); }

 private:
  void* ptr_;
  int device_;
};

// ---- combining within a block ---------------------------------------------------------------------
// Every thread passes its value; every thread gets the combination of all of them, formed in a fixed
// tree: (0 + s), (1 + s + 1), ... halving s. blockDim.x must be a power of two <= kMaxThreads, and
// every thread of the block must call it (it synchronises).
template <class V, class Combine>
__device__ V block_combine(V v, V* smem, const Combine& combine) {
  const int tid = threadIdx.x;
  smem[tid] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) smem[tid] = combine(smem[tid], smem[tid + s]);
    __syncthreads();
  }
  V out = smem[0];
  __syncthreads();  // smem may be written again right after the return
  return out;
}

struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};
// max that ignores NaN (fmax), as the CPU's lane_max in core/cpu/softmax.h.
struct FmaxOp {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};
// max where a NaN, once met, wins (block_max in core/cpu/reduce.h): NaN in gives NaN out.
struct NanMaxOp {
  __device__ double operator()(double a, double b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
};

// ---- the generic driver ------------------------------------------------------------------------------
// x rows (inner == 1), one stage: block per row o, every thread takes r = tid, tid + blockDim, ...
template <class Red>
__global__ void row_reduce_kernel(Red red, int64_t outer, int64_t R) {
  using V = typename Red::V;
  __shared__ V smem[kMaxThreads];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    V acc = red.identity();
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) acc = red.combine(acc, red.load(o, r, 0));
    acc = block_combine(acc, smem, [&](V a, V b) { return red.combine(a, b); });
    if (threadIdx.x == 0) red.finish(o, 0, acc);
  }
}

// Stage 1 of long rows: block b = (o, c) reduces r in [c * chunk, min(R, (c + 1) * chunk)) into
// partial[o * chunks + c].
template <class Red>
__global__ void row_partial_kernel(Red red, int64_t outer, int64_t R, int64_t chunk, int64_t chunks,
                                   typename Red::V* partial) {
  using V = typename Red::V;
  __shared__ V smem[kMaxThreads];
  for (int64_t b = blockIdx.x; b < outer * chunks; b += gridDim.x) {
    const int64_t o = b / chunks, c = b % chunks;
    const int64_t begin = c * chunk, end = begin + chunk < R ? begin + chunk : R;
    V acc = red.identity();
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) acc = red.combine(acc, red.load(o, r, 0));
    acc = block_combine(acc, smem, [&](V a, V b2) { return red.combine(a, b2); });
    if (threadIdx.x == 0) partial[b] = acc;
  }
}

// Stage 2 of long rows: partial (outer, chunks) -> finish(o, 0, ...), one block per row.
template <class Red>
__global__ void row_finish_kernel(Red red, int64_t outer, int64_t chunks, const typename Red::V* partial) {
  using V = typename Red::V;
  __shared__ V smem[kMaxThreads];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    V acc = red.identity();
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) acc = red.combine(acc, partial[o * chunks + c]);
    acc = block_combine(acc, smem, [&](V a, V b) { return red.combine(a, b); });
    if (threadIdx.x == 0) red.finish(o, 0, acc);
  }
}

// Columns (inner > 1): thread k = (c, o, i) reduces r in chunk c of column (o, i), serially in r
// order. With chunks == 1 it finishes the column itself; otherwise it writes partial[k], laid out
// (chunks, outer * inner) so that neighbouring threads write neighbouring addresses.
template <class Red>
__global__ void col_reduce_kernel(Red red, int64_t outer, int64_t R, int64_t inner, int64_t chunk, int64_t chunks,
                                  typename Red::V* partial) {
  using V = typename Red::V;
  const int64_t cols = outer * inner, n = cols * chunks;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const int64_t c = k / cols, col = k % cols, o = col / inner, i = col % inner;
    const int64_t begin = c * chunk, end = begin + chunk < R ? begin + chunk : R;
    V acc = red.identity();
    for (int64_t r = begin; r < end; ++r) acc = red.combine(acc, red.load(o, r, i));
    if (chunks == 1)
      red.finish(o, i, acc);
    else
      partial[k] = acc;
  }
}

// Stage 2 of long columns: partial (chunks, outer * inner) -> finish, one thread per column, in chunk order.
template <class Red>
__global__ void col_finish_kernel(Red red, int64_t outer, int64_t inner, int64_t chunks, const typename Red::V* partial) {
  using V = typename Red::V;
  const int64_t cols = outer * inner;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += stride) {
    V acc = red.identity();
    for (int64_t c = 0; c < chunks; ++c) acc = red.combine(acc, partial[c * cols + col]);
    red.finish(col / inner, col % inner, acc);
  }
}

// Runs `red` over the (outer, R, inner) block on the current device (the caller holds a DeviceGuard
// for `device`, which is also where scratch memory comes from). R may be 0: every output is then
// finish(identity).
template <class Red>
void run_reduce(const Red& red, int64_t outer, int64_t R, int64_t inner, int device, const char* op) {
  using V = typename Red::V;
  if (outer * inner == 0) return;
  if (inner == 1) {
    if (R <= kRowChunk) {
      row_reduce_kernel<<<row_grid(outer), row_threads(R)>>>(red, outer, R);
      RG_CUDA_CHECK_LAUNCH(op);
      return;
    }
    const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
    Scratch partial(static_cast<size_t>(outer * chunks) * sizeof(V), device);
    row_partial_kernel<<<row_grid(outer * chunks), kMaxThreads>>>(red, outer, R, kRowChunk, chunks, partial.as<V>());
    RG_CUDA_CHECK_LAUNCH(op);
    row_finish_kernel<<<row_grid(outer), row_threads(chunks)>>>(red, outer, chunks, partial.as<V>());
    RG_CUDA_CHECK_LAUNCH(op);
    return;
  }
  const int64_t cols = outer * inner;
  if (R <= kColChunk) {
    col_reduce_kernel<<<grid_size(cols), kBlockSize>>>(red, outer, R, inner, R, 1, static_cast<V*>(nullptr));
    RG_CUDA_CHECK_LAUNCH(op);
    return;
  }
  const int64_t chunks = (R + kColChunk - 1) / kColChunk;
  Scratch partial(static_cast<size_t>(cols * chunks) * sizeof(V), device);
  col_reduce_kernel<<<grid_size(cols * chunks), kBlockSize>>>(red, outer, R, inner, kColChunk, chunks, partial.as<V>());
  RG_CUDA_CHECK_LAUNCH(op);
  col_finish_kernel<<<grid_size(cols), kBlockSize>>>(red, outer, inner, chunks, partial.as<V>());
  RG_CUDA_CHECK_LAUNCH(op);
}

// ---- reducers used by more than one file -----------------------------------------------------------
// The column max of x (outer, R, inner) in double, NaN-sticky, -inf for R = 0 -> m (outer * inner).
template <class T>
struct ColumnMax {
  using V = double;
  const T* x;
  double* m;
  int64_t R, inner;
  __device__ V identity() const { return -INFINITY; }
  __device__ V load(int64_t o, int64_t r, int64_t i) const { return static_cast<double>(x[(o * R + r) * inner + i]); }
  __device__ V combine(V a, V b) const { return NanMaxOp{}(a, b); }
  __device__ void finish(int64_t o, int64_t i, V v) const { m[o * inner + i] = v; }
};

}  // namespace relgrad::cuda::red
