// Indexing kernels (interface and determinism argument in cuda/index.h). Each kernel is a plain
// grid-stride loop with one thread per output element (or per owned output column), chosen to be
// obviously correct: every output element is written by exactly one thread, with no atomics and no
// shared memory. Index lists (CSR) are sorted on the device where that gives each thread a short
// private sum: a stable radix sort (CUB) of (key, position) pairs, so nothing is copied from the host.
#include <cub/device/device_radix_sort.cuh>

#include <vector>

#include "cuda/common.cuh"
#include "cuda/index.h"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

constexpr int kMaxDims = 8;

// Scratch device memory for the lifetime of the object (the sort's keys, lists and workspace). The
// block goes back to the caching allocator when the object dies; the default stream orders any reuse
// after the kernels that read it.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t nbytes, int device) : ptr_(device_malloc(nbytes == 0 ? 1 : nbytes, device)), device_(device) {}
  ~DeviceBuffer() { device_free(ptr_, device_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  int device_;
};

// ---- gather ------------------------------------------------------------------------------------------
// The geometry of a gather: (d0, ..., d{ndim-1}) with x's and the index's strides over it.
struct GatherLayout {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t x_strides[kMaxDims] = {};
  int64_t i_strides[kMaxDims] = {};
};

// Drops size-1 dims and merges neighbours that x and the index both step over as one (out is
// contiguous, so it always merges); at most kMaxDims dims may remain.
GatherLayout plan_gather(const std::vector<int64_t>& shape, const std::vector<int64_t>& xs,
                         const std::vector<int64_t>& is) {
  const char* op = "cuda_gather";
  RG_CHECK(xs.size() == shape.size() && is.size() == shape.size(), op, "shape has ", shape.size(),
           " dims but the strides have ", xs.size(), " (x) and ", is.size(), " (index)");
  std::vector<int64_t> sh, xv, iv;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!sh.empty() && xv.back() == xs[k] * shape[k] && iv.back() == is[k] * shape[k]) {
      sh.back() *= shape[k];
      xv.back() = xs[k];
      iv.back() = is[k];
    } else {
      sh.push_back(shape[k]);
      xv.push_back(xs[k]);
      iv.push_back(is[k]);
    }
  }
  RG_CHECK(sh.size() <= static_cast<size_t>(kMaxDims), op, "a gather over ", shape.size(), " dims (", sh.size(),
           " after merging) is more than the ", kMaxDims, " the CUDA kernel supports");
  GatherLayout L;
  L.ndim = static_cast<int>(sh.size());
  for (size_t k = 0; k < sh.size(); ++k) {
    L.shape[k] = sh[k];
    L.x_strides[k] = xv[k];
    L.i_strides[k] = iv[k];
  }
  return L;
}

// out (total), contiguous; x strided (L.x_strides, 0 along the indexed dim); index (int64) strided
// (L.i_strides). out[e] = x[x_base(e) + index[i_off(e)] * x_step].
template <class T>
__global__ void gather_kernel(T* out, const T* x, int64_t x_step, const int64_t* index, GatherLayout L,
                              int64_t total) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    int64_t rem = e, xo = 0, io = 0;
    for (int k = L.ndim - 1; k >= 0; --k) {  // unravel the row-major index e, last dim fastest
      const int64_t pos = rem % L.shape[k];
      rem /= L.shape[k];
      xo += pos * L.x_strides[k];
      io += pos * L.i_strides[k];
    }
    out[e] = x[xo + index[io] * x_step];
  }
}

// ---- scatter-adds -------------------------------------------------------------------------------------
// g (O, K, I), gx (O, n, I), both contiguous; CSR (offsets (n + 1), entries) lists for each row r the
// k with index[k] == r, increasing. One thread per gx element (o, r, i): gx = Σ_list g[o, k, i].
template <class T>
__global__ void scatter_rows_kernel(const T* g, const int64_t* offsets, const int64_t* entries, int64_t skip, T* gx,
                                    int64_t O, int64_t K, int64_t n, int64_t I) {
  const int64_t total = O * n * I;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t i = t % I, r = (t / I) % n, o = t / (I * n);
    T acc = T(0);
    if (r != skip)
      for (int64_t q = offsets[r]; q < offsets[r + 1]; ++q) acc += g[(o * K + entries[q]) * I + i];
    gx[t] = acc;
  }
}

// g (O, K, I), gx (O, n, I), both contiguous; index element (o, k, i) at o*s0 + k*s1 + i*s2. One
// thread per (o, i) column: zero the column, then add over k in order (the thread owns the column).
template <class T>
__global__ void scatter_columns_kernel(const T* g, const int64_t* index, int64_t s0, int64_t s1, int64_t s2, T* gx,
                                       int64_t O, int64_t K, int64_t n, int64_t I) {
  const int64_t total = O * I;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t i = t % I, o = t / I;
    T* col = gx + o * n * I + i;  // gx[o, r, i] = col[r * I]
    for (int64_t r = 0; r < n; ++r) col[r * I] = T(0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = index[o * s0 + k * s1 + i * s2];
      col[r * I] += g[(o * K + k) * I + i];
    }
  }
}

// ---- the relative-position primitive ------------------------------------------------------------------
// P rows strided (batch_stride, row_stride), unit stride along R; C (t2, t1); S (N, t2, t1) contiguous.
// One thread per S element.
template <class T>
__global__ void relative_gather_kernel(const T* P, int64_t batch_stride, int64_t row_stride, const int64_t* C, T* S,
                                       int64_t N, int64_t t2, int64_t t1) {
  const int64_t total = N * t2 * t1;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t j = e % t1, row = e / t1, i = row % t2, nn = row / t2;
    const int64_t c = C[i * t1 + j];
    S[e] = c >= 0 ? P[nn * batch_stride + i * row_stride + c] : T(0);
  }
}

// S (N, t2, t1) contiguous; CSR over the t2*R buckets (i, r) listing flat positions i*t1 + j with
// C[i, j] == r, increasing; P (N, t2, R) contiguous. One thread per P element (n, i, r).
template <class T>
__global__ void relative_scatter_kernel(const T* S, const int64_t* offsets, const int64_t* entries, T* P, int64_t N,
                                        int64_t t2, int64_t t1, int64_t R) {
  const int64_t total = N * t2 * R;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t r = e % R, row = e / R, i = row % t2, nn = row / t2;
    const int64_t bucket = i * R + r;
    const T* s = S + nn * t2 * t1;
    T acc = T(0);
    for (int64_t q = offsets[bucket]; q < offsets[bucket + 1]; ++q) acc += s[entries[q]];
    P[e] = acc;
  }
}

// ---- the CSR lists, built on the device --------------------------------------------------------------
// keys (count) → sort keys (count): the key where it is in [0, buckets), else `buckets` (dropped: it
// sorts after every kept key); positions (count) = 0 … count − 1.
__global__ void csr_keys_kernel(const int64_t* keys, int64_t count, int64_t buckets, uint64_t* sort_keys,
                                int64_t* positions) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride) {
    const int64_t key = keys[k];
    sort_keys[k] = static_cast<uint64_t>(key >= 0 && key < buckets ? key : buckets);
    positions[k] = k;
  }
}

// C (t2, t1) → sort keys (t2·t1): bucket (i, r) = i·R + r for C[i, j] = r >= 0, else t2·R (dropped);
// positions = the flat index i·t1 + j.
__global__ void relative_keys_kernel(const int64_t* C, int64_t t2, int64_t t1, int64_t R, uint64_t* sort_keys,
                                     int64_t* positions) {
  const int64_t total = t2 * t1;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t c = C[e], i = e / t1;
    sort_keys[e] = static_cast<uint64_t>(c >= 0 ? i * R + c : t2 * R);
    positions[e] = e;
  }
}

// sorted (count), increasing → offsets (buckets + 1): offsets[r] = the first position whose key is
// >= r (a binary search per r), so bucket r's list is [offsets[r], offsets[r + 1]).
__global__ void csr_offsets_kernel(const uint64_t* sorted, int64_t count, int64_t buckets, int64_t* offsets) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r <= buckets; r += stride) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (sorted[mid] < static_cast<uint64_t>(r)) lo = mid + 1;
      else hi = mid;
    }
    offsets[r] = lo;
  }
}

// The bits a key in [0, buckets] needs: the sort looks at no others.
int key_bits(int64_t buckets) {
  int bits = 1;
  while (bits < 63 && (int64_t(1) << bits) <= buckets) ++bits;
  return bits;
}

// The CSR lists of `count` keys already in sort form (sort_keys, positions: device, count each):
// offsets (buckets + 1) and entries (count, the kept ones first) into the caller's device buffers.
// A stable LSD radix sort keeps equal keys in increasing position: csr_by_key's order exactly.
void sort_into_csr(uint64_t* sort_keys, int64_t* positions, int64_t count, int64_t buckets, int64_t* offsets,
                   int64_t* entries, int device, const char* op) {
  DeviceBuffer sorted(static_cast<size_t>(count) * sizeof(uint64_t), device);
  const int bits = key_bits(buckets);
  size_t work_bytes = 0;
  RG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, work_bytes, sort_keys, sorted.as<uint64_t>(), positions,
                                                entries, count, 0, bits, cudaStream_t(0)),
                op);
  DeviceBuffer work(work_bytes, device);
  RG_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(work.as<void>(), work_bytes, sort_keys, sorted.as<uint64_t>(),
                                                positions, entries, count, 0, bits, cudaStream_t(0)),
                op);
  csr_offsets_kernel<<<grid_size(buckets + 1), kBlockSize>>>(sorted.as<uint64_t>(), count, buckets, offsets);
  RG_CUDA_CHECK_LAUNCH(op);
}

}  // namespace

void csr_by_key_on_device(const int64_t* keys, int64_t count, int64_t buckets, int64_t* offsets, int64_t* entries,
                          int device) {
  const char* op = "cuda_csr";
  check_device(device, op);
  DeviceGuard guard(device, op);
  DeviceBuffer sort_keys(static_cast<size_t>(count) * sizeof(uint64_t), device);
  DeviceBuffer positions(static_cast<size_t>(count) * sizeof(int64_t), device);
  if (count > 0) {
    csr_keys_kernel<<<grid_size(count), kBlockSize>>>(keys, count, buckets, sort_keys.as<uint64_t>(),
                                                      positions.as<int64_t>());
    RG_CUDA_CHECK_LAUNCH(op);
  }
  sort_into_csr(sort_keys.as<uint64_t>(), positions.as<int64_t>(), count, buckets, offsets, entries, device, op);
}

void gather(DType dtype, const std::vector<int64_t>& shape, void* out, const void* x,
            const std::vector<int64_t>& x_strides, int64_t x_step, const int64_t* index,
            const std::vector<int64_t>& index_strides, int device) {
  const char* op = "cuda_gather";
  check_device(device, op);
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  const GatherLayout L = plan_gather(shape, x_strides, index_strides);
  DeviceGuard guard(device, op);
  dispatch_all(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    gather_kernel<T><<<grid_size(total), kBlockSize>>>(static_cast<T*>(out), static_cast<const T*>(x), x_step, index,
                                                       L, total);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void scatter_add_rows(DType dtype, const void* g, const int64_t* index, int64_t skip, void* gx, int64_t O,
                      int64_t K, int64_t n, int64_t I, int device) {
  const char* op = "cuda_scatter_add";
  check_device(device, op);
  const int64_t total = O * n * I;
  if (total == 0) return;
  DeviceGuard guard(device, op);
  DeviceBuffer offsets(static_cast<size_t>(n + 1) * sizeof(int64_t), device);
  DeviceBuffer entries(static_cast<size_t>(K) * sizeof(int64_t), device);
  csr_by_key_on_device(index, K, n, offsets.as<int64_t>(), entries.as<int64_t>(), device);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    scatter_rows_kernel<T><<<grid_size(total), kBlockSize>>>(static_cast<const T*>(g), offsets.as<int64_t>(),
                                                             entries.as<int64_t>(), skip, static_cast<T*>(gx), O, K,
                                                             n, I);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void scatter_add_columns(DType dtype, const void* g, const int64_t* index, int64_t s0, int64_t s1, int64_t s2,
                         void* gx, int64_t O, int64_t K, int64_t n, int64_t I, int device) {
  const char* op = "cuda_scatter_add";
  check_device(device, op);
  if (O * n * I == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    scatter_columns_kernel<T><<<grid_size(O * I), kBlockSize>>>(static_cast<const T*>(g), index, s0, s1, s2,
                                                                static_cast<T*>(gx), O, K, n, I);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void relative_gather(DType dtype, const RelativeLayout& l, const void* P, const int64_t* C, void* S, int device) {
  const char* op = "cuda_relative_gather";
  const int64_t N = l.N, t2 = l.t2, t1 = l.t1;
  check_device(device, op);
  const int64_t total = N * t2 * t1;
  if (total == 0) return;
  DeviceGuard guard(device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    relative_gather_kernel<T><<<grid_size(total), kBlockSize>>>(static_cast<const T*>(P), l.batch_stride, l.row_stride,
                                                                C, static_cast<T*>(S), N, t2, t1);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

void relative_scatter(DType dtype, const RelativeLayout& l, const void* S, const int64_t* C, void* P, int device) {
  const char* op = "cuda_relative_scatter";
  const int64_t N = l.N, t2 = l.t2, t1 = l.t1, R = l.R;
  check_device(device, op);
  const int64_t total = N * t2 * R;
  if (total == 0) return;
  DeviceGuard guard(device, op);
  // Bucket (i, r) = i*R + r for entry (i, j) of C; -1 entries (no table row) are dropped.
  const int64_t count = t2 * t1, buckets = t2 * R;
  DeviceBuffer sort_keys(static_cast<size_t>(count) * sizeof(uint64_t), device);
  DeviceBuffer positions(static_cast<size_t>(count) * sizeof(int64_t), device);
  DeviceBuffer offsets(static_cast<size_t>(buckets + 1) * sizeof(int64_t), device);
  DeviceBuffer entries(static_cast<size_t>(count) * sizeof(int64_t), device);
  if (count > 0) {
    relative_keys_kernel<<<grid_size(count), kBlockSize>>>(C, t2, t1, R, sort_keys.as<uint64_t>(),
                                                           positions.as<int64_t>());
    RG_CUDA_CHECK_LAUNCH(op);
  }
  sort_into_csr(sort_keys.as<uint64_t>(), positions.as<int64_t>(), count, buckets, offsets.as<int64_t>(),
                entries.as<int64_t>(), device, op);
  dispatch_float(dtype, op, [&](auto zero) {
    using T = decltype(zero);
    relative_scatter_kernel<T><<<grid_size(total), kBlockSize>>>(static_cast<const T*>(S), offsets.as<int64_t>(),
                                                                 entries.as<int64_t>(), static_cast<T*>(P), N, t2, t1,
                                                                 R);
    RG_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace relgrad::cuda
