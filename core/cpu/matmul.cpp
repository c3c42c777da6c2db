#include "core/cpu/matmul.h"

// GCC 12 reports a false -Wmaybe-uninitialized deep inside Eigen's AVX-512 transpose helpers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

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

template <class T, int Order>
using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                                  Eigen::OuterStride<>>;

// c (n, m), contiguous row-major = alpha · a (n, k) @ b (k, m), or c += alpha · a @ b (accumulate),
// each operand in the storage order given.
template <class T, int OrderA, int OrderB>
void gemm(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t n, int64_t k, int64_t m, T alpha,
          bool accumulate) {
  ConstMatrixMap<T, OrderA> A(a, n, k, Eigen::OuterStride<>(lda));
  ConstMatrixMap<T, OrderB> B(b, k, m, Eigen::OuterStride<>(ldb));
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> C(c, n, m);
  if (accumulate) C.noalias() += (alpha * A) * B;  // Eigen folds alpha into the GEMM kernel
  else if (alpha == T(1)) C.noalias() = A * B;
  else C.noalias() = (alpha * A) * B;
}

template <class T>
using GemmFn = void (*)(const T*, int64_t, const T*, int64_t, T*, int64_t, int64_t, int64_t, T, bool);

// The four layout combinations are four template instantiations; pick one at run time.
template <class T>
GemmFn<T> pick_gemm(bool a_row_major, bool b_row_major) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (a_row_major) return b_row_major ? gemm<T, R, R> : gemm<T, R, C>;
  return b_row_major ? gemm<T, C, R> : gemm<T, C, C>;
}

}  // namespace

std::vector<int64_t> batch_offsets(const Tensor& x, const Shape& batch) {
  // Batch strides aligned to the right of `batch`; 0 where x's dim is missing or broadcast (size 1).
  const int64_t nb = static_cast<int64_t>(batch.size()), lead = nb - (x.dim() - 2);
  Shape bstride(nb, 0);
  for (int64_t i = lead; i < nb; ++i) bstride[i] = x.size(i - lead) == 1 ? 0 : x.stride(i - lead);
  return strided_offsets(batch, bstride);
}

Tensor matmul(const Tensor& a, const Tensor& b, const Shape& batch, const char* op, const Tensor& init,
              double alpha) {
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  const Shape out_shape = matmul_shape(batch, n, m);
  Tensor out = empty(out_shape, TensorOptions(a.dtype()));
  if (out.numel() == 0) return out;
  const bool accumulate = init.defined();
  if (accumulate) copy_into(out, init, op);  // copy_into broadcasts init to the product's shape
  const int64_t count = shape_numel(batch);
  dispatch_float(a.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    T* c = out.data_ptr<T>();
    if (k == 0) {  // an empty sum: zeros or init (and no zero-sized maps handed to Eigen)
      if (!accumulate)
        for (int64_t i = 0; i < out.numel(); ++i) c[i] = T(0);
      return;
    }
    MatrixLayout A = plan_operand(a, batch, op), B = plan_operand(b, batch, op);
    const T* ap = A.t.template data_ptr<T>();
    const T* bp = B.t.template data_ptr<T>();
    GemmFn<T> f = pick_gemm<T>(A.row_major, B.row_major);
    const T alpha_t = static_cast<T>(alpha);
    auto one = [&](int64_t e) {
      f(ap + A.offsets[e], A.ld, bp + B.offsets[e], B.ld, c + e * n * m, n, k, m, alpha_t, accumulate);
    };
#ifdef _OPENMP
    const bool over_batch = count > 1 && count >= omp_get_max_threads() && !omp_in_parallel() &&
                            static_cast<double>(count) * n * k * m >= 32768.0;
#else
    const bool over_batch = false;
#endif
    if (over_batch) {
#pragma omp parallel for schedule(static)
      for (int64_t e = 0; e < count; ++e) one(e);
    } else {
      for (int64_t e = 0; e < count; ++e) one(e);
    }
  });
  return out;
}

}  // namespace relgrad::cpu
