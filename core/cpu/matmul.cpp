#include "core/cpu/matmul.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cpu/gemm_library.h"
#include "core/cpu/sgemm.h"
#include "core/parallel_for.h"

namespace relgrad::cpu {

namespace {

// How one operand's (rows, cols) matrices lie in memory, and where each batch entry starts.
struct MatrixLayout {
  Tensor t;               // the operand itself, or (odd layouts only) its contiguous copy
  bool row_major = true;  // unit stride along cols (row-major) or along rows (column-major = transposed)
  int64_t ld = 1;         // outer stride: between rows (row-major) or between columns (column-major)
  std::vector<int64_t> offsets;  // element offset of each batch entry from t's first element
};

// x (x_batch..., rows, cols) read as a batch of `batch` matrices. A size-1 matrix dim may have
// any stride (it is never stepped along), so it does not spoil either layout.
MatrixLayout plan_operand(const Tensor& x, const Shape& batch, const char* op) {
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const int64_t rs = x.stride(-2), cs = x.stride(-1);
  MatrixLayout L;
  L.t = x;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
    L.row_major = true;
    L.ld = rows == 1 ? cols : rs;
  } else if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
    L.row_major = false;
    L.ld = cols == 1 ? rows : cs;
  } else {  // e.g. a slice with step > 1 along both dims: Eigen cannot map it, so copy once
    L.t = empty(x.shape(), TensorOptions(x.dtype()));
    copy_into(L.t, x, op);
    L.row_major = true;
    L.ld = cols;
  }
  L.offsets = batch_offsets(L.t, batch);
  return L;
}

// init (broadcast to the product's shape) read in place by relgrad's kernel as the values C starts from
// (sgemm's c_in): where each batch entry's matrix has unit column stride, its rows ld apart (0 for a
// Linear layer's bias, one row for all). Otherwise (other layouts, other libraries, an empty sum) init
// is copied into C first; the bits are the same either way.
struct InitLayout {
  bool in_place = false;
  const float* data = nullptr;
  int64_t ld = 0;
  std::vector<int64_t> offsets;  // per batch entry, from data
};

InitLayout plan_init(const Tensor& init, const Shape& batch, int64_t n, int64_t k, int64_t m, GemmLibrary library) {
  InitLayout L;
  if (!init.defined() || init.dtype() != kFloat32 || k == 0 || library != GemmLibrary::Relgrad) return L;
  // init's strides against the product's shape (batch..., n, m), aligned to the right; 0 where broadcast
  const int64_t dims = static_cast<int64_t>(batch.size()) + 2, lead = dims - init.dim();
  Shape strides(dims, 0);
  for (int64_t d = std::max<int64_t>(lead, 0); d < dims; ++d)
    strides[d] = init.size(d - lead) == 1 ? 0 : init.stride(d - lead);
  if (lead < 0 || (m > 1 && strides[dims - 1] != 1)) return L;
  L.in_place = true;
  L.data = init.data_ptr<float>();
  L.ld = n == 1 ? 0 : strides[dims - 2];
  L.offsets = strided_offsets(batch, Shape(strides.begin(), strides.end() - 2));
  return L;
}

// How a product is cut into tiles: each tile is `span` rows (by_rows) or `span` columns of one batch
// entry's C, computed by one single-threaded GEMM over the whole of k. The cut depends on the shape
// and on the machine's core count, never on the thread count, so every element of C is the same sum
// in the same order however many threads share the tiles out: results do not depend on the thread
// count (docs/design.md, "Threads"). A library whose elements do not depend on the cut at all
// (gemm_cut_independent: relgrad's kernel) is cut by the threads in use instead: one tile per batch
// entry on one thread, so no operand is packed more than once, with the same bits. Tiles are handed out one at a time (dynamic schedule), so a
// thread slowed by another process on its core costs only the tile it holds, and no thread spins
// inside a GEMM waiting for another.
struct TilePlan {
  bool by_rows = true;    // tiles are row blocks of C (else column blocks)
  int64_t span = 1;       // rows (or columns) per tile; an entry's last tile may have fewer
  int64_t per_entry = 1;  // tiles per batch entry
  bool parallel = false;  // enough work to share out
};

// The threads a product may use here: the team size where a region would share out (parallel_for.h's
// rule: not inside a parallel region, nor a shard's task), else one.
int threads_for_one_product() {
#ifdef _OPENMP
  return team_would_share() ? omp_get_max_threads() : 1;
#else
  return 1;
#endif
}

// Tiles wanted per product: two per core, so the dynamic schedule can even out a slow core; for a
// cut-independent library two per thread in use, and one on one thread.
int64_t tiles_wanted(bool cut_independent) {
#ifdef _OPENMP
  static const int64_t per_core = std::clamp<int64_t>(2 * omp_get_num_procs(), 2, 64);
  if (!cut_independent) return per_core;
  const int64_t threads = threads_for_one_product();
  return threads <= 1 ? 1 : std::min<int64_t>(2 * threads, 64);
#else
  (void)cut_independent;
  return 1;
#endif
}

// Each tile packs the operand it does not cut once more (b for row tiles, a for column tiles), so
// the cut goes across the longer of n and m (the other operand is the smaller one to repack), and
// no tile is thinner than kMinTileSpan unless the matrix is, nor under kMinTileMacs of work.
// Spans are multiples of 16, so only an entry's last tile has a ragged edge.
constexpr int64_t kMinTileSpan = 32, kMinTileMacs = int64_t(1) << 17;

TilePlan plan_tiles(int64_t count, int64_t n, int64_t k, int64_t m, bool cut_independent) {
  TilePlan t;
  t.by_rows = n >= m;
  const int64_t len = t.by_rows ? n : m, other = t.by_rows ? m : n;
  const int64_t wanted = tiles_wanted(cut_independent), per_entry = std::max<int64_t>(1, (wanted + count - 1) / count);
  int64_t span = (len + per_entry - 1) / per_entry;
  span = std::max({span, kMinTileSpan, kMinTileMacs / std::max<int64_t>(1, k * other)});
  span = (span + 15) / 16 * 16;
  t.span = std::min(span, len);
  t.per_entry = (len + t.span - 1) / t.span;
  t.parallel = count * t.per_entry > 1;
  return t;
}

// Below this many multiply-adds (about 0.3 ms on one core) a shared call's two barriers cost more than
// its packing saves (bench_gemm, 2 threads: W0's 544 × 64 × 256 products at 0.7-0.8× the tiles).
constexpr int64_t kMinSharedMacs = int64_t(1) << 24;
// sgemm_shared packs all of B at once, in a scratch the calling thread keeps: up to 4 MiB, which stays
// in L3 until it is read; a larger B (a Linear's dY in its weight's gradient: W1's is 12-16 MiB) goes
// to tiles, each packing its own columns of B just before using them (bench, 2 threads:
// the shared call on those, 1.0-1.1×).
constexpr int64_t kMaxSharedB = int64_t(1) << 20;

}  // namespace

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      const size_t start = colon == std::string::npos ? std::string::npos : line.find_first_not_of(' ', colon + 1);
      if (start != std::string::npos) return line.substr(start);
    }
  return "unknown CPU";
}

std::vector<int64_t> batch_offsets(const Tensor& x, const Shape& batch) {
  // Batch strides aligned to the right of `batch`; 0 where x's dim is missing or broadcast (size 1).
  const int64_t nb = static_cast<int64_t>(batch.size()), lead = nb - (x.dim() - 2);
  Shape bstride(nb, 0);
  for (int64_t i = lead; i < nb; ++i) bstride[i] = x.size(i - lead) == 1 ? 0 : x.stride(i - lead);
  return strided_offsets(batch, bstride);
}

Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const char* op, const Tensor& init,
              double alpha, const Tensor& into) {
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const Shape out_shape = matmul_shape(batch, n, m);
  RG_CHECK(!into.defined() || (!init.defined() && into.shape() == out_shape && into.dtype() == a.dtype() &&
                               into.device().is_cpu() && (into.stride(-1) == 1 || m <= 1)),
           op, "an output of shape ", shape_str(out_shape), " and unit column stride, without init, got ",
           into.defined() ? shape_str(into.shape()) : std::string("()"));
  Tensor out = into.defined() ? into : empty(out_shape, TensorOptions(a.dtype()));
  if (out.numel() == 0) return out;
  // Where each batch entry's matrix starts in out, and its rows' stride: out's own when given.
  const std::vector<int64_t> out_offsets = into.defined() ? batch_offsets(out, batch) : std::vector<int64_t>();
  const int64_t out_ld = into.defined() ? out.stride(-2) : m;
  auto entry = [&](int64_t e) { return into.defined() ? out_offsets[static_cast<size_t>(e)] : e * n * m; };
  const bool accumulate = init.defined();
  // The library is read once per product (gemm_library.h: chosen on the first product), so every
  // tile of one product goes through the same one.
  const GemmLibrary library = gemm_library();
  const InitLayout I = plan_init(init, batch, n, k, m, library);
  if (accumulate && !I.in_place) copy_into(out, init, op);  // copy_into broadcasts init to the product's shape
  const int64_t count = shape_numel(batch);
  dispatch_float(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    T* c = out.data_ptr<T>();
    if (k == 0) {  // an empty sum: zeros or init (and no zero-sized maps handed to Eigen)
      if (!accumulate)
        for (int64_t e = 0; e < shape_numel(batch); ++e)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < m; ++j) c[entry(e) + i * out_ld + j] = T(0);
      return;
    }
    MatrixLayout A = plan_operand(a, batch, op), B = plan_operand(b, batch, op);
    const T* ap = A.t.template data_ptr<T>();
    const T* bp = B.t.template data_ptr<T>();
    const T alpha_t = static_cast<T>(alpha);
    // c_in: where init's matrix for this tile starts, when it is read in place (then T is float)
    auto f = [&](const T* a0, int64_t lda, const T* b0, int64_t ldb, T* c0, int64_t ldc, int64_t rows, int64_t inner,
                 int64_t cols, const float* c_in) {
      if constexpr (std::is_same_v<T, float>)
        if (c_in) return sgemm(a0, lda, A.row_major, b0, ldb, B.row_major, c0, ldc, alpha_t, true, rows, inner, cols,
                               c_in, I.ld);
      gemm_tile(library, A.row_major, B.row_major, a0, lda, b0, ldb, c0, ldc, rows, inner, cols, alpha_t, accumulate);
    };
    // One large float32 product on relgrad's kernel and several threads: one shared call, which packs
    // each block of B once for the team (tiles, separate calls, would each pack B or A again).
    if constexpr (std::is_same_v<T, float>) {
      const int threads = threads_for_one_product();
      if (library == GemmLibrary::Relgrad && count == 1 && threads > 1 && n * k * m >= kMinSharedMacs &&
          k * m <= kMaxSharedB) {
        sgemm_shared(ap + A.offsets[0], A.ld, A.row_major, bp + B.offsets[0], B.ld, B.row_major, c + entry(0), out_ld,
                     alpha_t, accumulate, n, k, m, threads, I.in_place ? I.data + I.offsets[0] : nullptr, I.ld);
        return;
      }
    }
    // (relgrad's float64 tiles are Eigen's, which are cut by the cores like the others)
    const TilePlan plan = plan_tiles(count, n, k, m, std::is_same_v<T, float> && gemm_cut_independent(library));
    const int64_t tiles = count * plan.per_entry;
    auto tile = [&](int64_t t) {  // rows (or columns) [s0, s0 + len) of batch entry e's C
      const int64_t e = t / plan.per_entry, s0 = (t % plan.per_entry) * plan.span;
      const T* a_e = ap + A.offsets[e];
      const T* b_e = bp + B.offsets[e];
      T* c_e = c + entry(e);
      const float* in_e = I.in_place ? I.data + I.offsets[e] : nullptr;
      if (plan.by_rows) {  // row s0 of a: s0 rows down (row-major storage) or s0 columns along
        const int64_t len = std::min(plan.span, n - s0);
        f(a_e + s0 * (A.row_major ? A.ld : 1), A.ld, b_e, B.ld, c_e + s0 * out_ld, out_ld, len, k, m,
          in_e ? in_e + s0 * I.ld : nullptr);
      } else {  // column s0 of b: s0 along (row-major storage) or s0 columns down
        const int64_t len = std::min(plan.span, m - s0);
        f(a_e, A.ld, b_e + s0 * (B.row_major ? 1 : B.ld), B.ld, c_e + s0, out_ld, n, k, len, in_e ? in_e + s0 : nullptr);
      }
    };
    parallel_for_dynamic(tiles, plan.parallel, tile);
  });
  return out;
}

bool window_kernel_available(DType dtype) {
  return dtype == kFloat32 && sgemm_available() && gemm_library() == GemmLibrary::Relgrad;
}

Tensor window_matmul(const Tensor& a, const Tensor& b, const Shape& batch, const GemmWindow& window, const char* op,
                     const Tensor& init, double alpha) {
  RG_CHECK(window_kernel_available(a.dtype()), op, "the windowed CPU product needs float32 on relgrad's kernel");
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  Tensor out = empty(matmul_shape(batch, n, m), TensorOptions(a.dtype()));
  if (out.numel() == 0) return out;
  const bool accumulate = init.defined();
  const InitLayout I = plan_init(init, batch, n, k, m, GemmLibrary::Relgrad);
  if (accumulate && !I.in_place) copy_into(out, init, op);
  const MatrixLayout A = plan_operand(a, batch, op), B = plan_operand(b, batch, op);
  const float* ap = A.t.data_ptr<float>();
  const float* bp = B.t.data_ptr<float>();
  float* c = out.data_ptr<float>();
  const int64_t count = shape_numel(batch);
  // One call per entry: the kernel's elements do not depend on the cut, and each call packs its own
  // operands once. (Output's elements outside the window are zeroed by the entry's own thread.)
  parallel_for_dynamic(count, true, [&](int64_t e) {
    float* c_e = c + e * n * m;
    if (k == 0) {
      if (!accumulate) std::fill(c_e, c_e + n * m, 0.0f);
    } else {
      sgemm_window(ap + A.offsets[e], A.ld, A.row_major, bp + B.offsets[e], B.ld, B.row_major, c_e, m,
                   static_cast<float>(alpha), accumulate, n, k, m, window, I.in_place ? I.data + I.offsets[e] : nullptr,
                   I.ld);
    }
    if (window.on == WindowOn::Output)
      for (int64_t i = 0; i < n; ++i) {
        float* row = c_e + i * m;
        const int64_t lo = std::clamp<int64_t>(window.lo[i], 0, m), hi = std::clamp<int64_t>(window.hi[i], lo, m);
        std::fill(row, row + lo, 0.0f);
        std::fill(row + hi, row + m, 0.0f);
      }
  });
  return out;
}

}  // namespace relgrad::cpu
