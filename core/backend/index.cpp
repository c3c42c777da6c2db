// Indexing entries. The CUDA scatters sort their index on the device into per-row lists (each
// output element is one thread's ordered sum, the same bits as the CPU's serial sum).
#include "core/backend/index.h"

#include <algorithm>
#include <memory>

#include "core/backend/dense.h"
#include "core/cpu/index.h"
#include "core/cpu/relative.h"
#include "core/device_cache.h"
#include "cuda/index.h"

namespace relgrad::backend {

namespace {
const int64_t* index_ptr(const Tensor& idx) { return static_cast<const int64_t*>(idx.raw_data()); }

// A CUDA index by identity: its storage (alive: a new storage at a freed one's address is another
// tensor), the storage's version, and the view.
struct IndexIdentity {
  std::weak_ptr<Storage> storage;
  const Storage* address = nullptr;
  uint64_t version = 0;
  int64_t offset = 0;
  Shape shape, strides;
  bool operator==(const IndexIdentity& o) const {
    return address == o.address && !storage.expired() && storage.lock().get() == o.address && version == o.version &&
           offset == o.offset && shape == o.shape && strides == o.strides;
  }
};
struct ValueRange {
  int64_t min = 0, max = -1;  // max < min: no values
};
LruCache<IndexIdentity, ValueRange>& known_ranges() {
  static auto* c = new LruCache<IndexIdentity, ValueRange>(64);  // never destroyed, like the allocator
  return *c;
}
}  // namespace

void check_index_values(const Tensor& idx, int64_t lo, int64_t hi, const std::function<void(const Tensor&)>& check) {
  if (!idx.device().is_cuda()) {
    check(idx.is_contiguous() ? idx : copy_as(idx, TensorOptions(kInt64)));
    return;
  }
  const std::shared_ptr<Storage>& st = idx.impl()->storage;
  IndexIdentity id{st, st.get(), st->version(), idx.offset(), idx.shape(), idx.strides()};
  bool checked = false;
  const ValueRange r = known_ranges().get(id, [&] {
    const Tensor host = copy_as(idx, TensorOptions(kInt64));  // the one copy to the host
    check(host);
    checked = true;
    const int64_t* p = host.data_ptr<int64_t>();
    ValueRange v;
    const int64_t n = host.numel();
    if (n > 0) v.min = *std::min_element(p, p + n), v.max = *std::max_element(p, p + n);
    return v;
  });
  if (checked || r.max < r.min || (r.min >= lo && r.max < hi)) return;
  check(copy_as(idx, TensorOptions(kInt64)));  // a value outside [lo, hi): the check names it and throws
}

Tensor gather(const Tensor& x, const Shape& out_shape, const Shape& x_strides, int64_t dim_stride, const Tensor& idx,
              const Shape& i_strides, bool any_dtype, const char* op) {
  if (!any_dtype) dispatch_float(x.dtype(), op, [](auto) {});
  Tensor out = empty_on(x, out_shape, x.dtype());
  if (x.device().is_cuda()) {
    cuda::gather(x.dtype(), out_shape, out.raw_data(), x.raw_data(), x_strides, dim_stride, index_ptr(idx), i_strides,
                 x.device().index);
    return out;
  }
  dispatch_all(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::gather_kernel<T>(out_shape, out.data_ptr<T>(), static_cast<const T*>(x.raw_data()), x_strides, dim_stride,
                          index_ptr(idx), i_strides);
  });
  return out;
}

Tensor scatter_add_rows(const Tensor& g, const Tensor& idx, int64_t skip, const Shape& out_shape, int64_t O,
                        int64_t n, int64_t I, const char* op) {
  if (g.device().is_cuda()) {  // every element written (skipped rows with 0)
    Tensor gx = empty_on(g, out_shape, g.dtype());
    cuda::scatter_add_rows(g.dtype(), g.raw_data(), index_ptr(idx), skip, gx.raw_data(), O, idx.numel(), n, I,
                           g.device().index);
    return gx;
  }
  Tensor gx = zeros(out_shape, TensorOptions(g.dtype()));
  dispatch_float(g.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::scatter_add_kernel<T>(g.data_ptr<T>(), index_ptr(idx), {0, 1, 0}, gx.data_ptr<T>(), O, idx.numel(), n, I,
                               skip);
  });
  return gx;
}

Tensor scatter_add_columns(const Tensor& g, const Tensor& idx, const Shape& out_shape, int64_t O, int64_t K, int64_t n,
                           int64_t I, const char* op) {
  if (g.device().is_cuda()) {  // the index stays on the device: one thread per (o, i) column walks it
    Tensor gx = empty_on(g, out_shape, g.dtype());  // every element written
    cuda::scatter_add_columns(g.dtype(), g.raw_data(), index_ptr(idx), K * I, I, 1, gx.raw_data(), O, K, n, I,
                              g.device().index);
    return gx;
  }
  Tensor gx = zeros(out_shape, TensorOptions(g.dtype()));
  dispatch_float(g.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::scatter_add_kernel<T>(g.data_ptr<T>(), index_ptr(idx), {K * I, I, 1}, gx.data_ptr<T>(), O, K, n, I, -1);
  });
  return gx;
}

Tensor relative_gather(const Tensor& P, const Tensor& index, const Shape& out_shape, const RelativeLayout& l) {
  Tensor S = empty_on(P, out_shape, P.dtype());
  if (P.device().is_cuda()) {
    cuda::relative_gather(P.dtype(), l, P.raw_data(), index_ptr(index), S.raw_data(), P.device().index);
    return S;
  }
  dispatch_float(P.dtype(), "relative_gather", [&](auto zero) {
    using T = decltype(zero);
    cpu::relative_gather_kernel<T>(l, static_cast<const T*>(P.raw_data()), index_ptr(index), S.data_ptr<T>());
  });
  return S;
}

Tensor relative_scatter(const Tensor& S, const Tensor& index, const Shape& out_shape, const RelativeLayout& l) {
  Tensor P = empty_on(S, out_shape, S.dtype());
  if (S.device().is_cuda()) {  // every element of P written
    cuda::relative_scatter(S.dtype(), l, S.raw_data(), index_ptr(index), P.raw_data(), S.device().index);
    return P;
  }
  dispatch_float(S.dtype(), "relative_scatter", [&](auto zero) {
    using T = decltype(zero);
    cpu::relative_scatter_kernel<T>(l, S.data_ptr<T>(), index_ptr(index), P.data_ptr<T>());
  });
  return P;
}

}  // namespace relgrad::backend
