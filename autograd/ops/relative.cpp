// The relative-position primitive: index maps from (query, key) pairs to rows of a relative table,
// and the differentiable gather / scatter pair that every learned-table scheme is built from
// (docs/relative-attention.md has the conventions):
//   key term    S = relative_gather(Q·Eᵀ, C)          (no (t2, t1, D) tensor anywhere)
//   value term  O += relative_scatter(W, C)·E_V
//   scalar bias S += relative_gather(β expanded over queries, C)
// The two ops are each other's adjoint, so each one's backward is the other.
//
// On CUDA (core/backend/index.h, cuda/index.h) the index map may be on the CPU (as relative_index makes
// it) or on the input's device. Either way the kernels read it on the device: a CPU map is validated
// on the host and its device copy is cached by content (cached_index_upload); a device map is
// validated on a host copy once, then not again while it is the same unchanged tensor
// (backend::check_index_values) — the layers keep their maps on the device (layers/positional.h).
// relative_scatter sorts the map on the device into per-(query, row) lists so that each output element
// is one thread's ordered sum (no atomics; the same sums in the same order as the CPU kernel, hence
// the same bits).
#include <cmath>
#include <string>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/index.h"
#include "core/device_cache.h"

namespace relgrad {

Tensor query_positions(int64_t t2, int64_t t1, Alignment alignment) {
  RG_CHECK_T(ShapeError, t2 >= 0 && t1 >= 0, "query_positions", "lengths must be >= 0, got t2=", t2, " t1=", t1);
  std::vector<int64_t> pos(t2);
  for (int64_t i = 0; i < t2; ++i) {
    switch (alignment) {
      case Alignment::Left: pos[i] = i; break;
      case Alignment::Right: pos[i] = i + t1 - t2; break;
      case Alignment::Scaled: pos[i] = t2 == 0 ? 0 : (i * t1) / t2; break;  // floor, non-negative operands
    }
  }
  return from_vector(pos, {t2});
}

Tensor relative_index(int64_t t2, int64_t t1, const RelativeIndexOptions& o) {
  const char* op = "relative_index";
  RG_CHECK_T(ShapeError, t2 >= 0 && t1 >= 0, op, "lengths must be >= 0, got t2=", t2, " t1=", t1);
  RG_CHECK(o.max_past >= 0 && o.max_future >= 0, op, "max_past and max_future must be >= 0, got ", o.max_past,
           " and ", o.max_future);
  Tensor pi = o.query_positions.defined() ? o.query_positions : query_positions(t2, t1, o.alignment);
  RG_CHECK_T(DTypeError, pi.dtype() == kInt64, op, "query_positions must be int64, got ", dtype_name(pi.dtype()));
  RG_CHECK_T(ShapeError, pi.dim() == 1 && pi.size(0) == t2, op, "query_positions must have shape (", t2,
             "), got ", shape_str(pi.shape()));
  std::vector<int64_t> positions = pi.to_vector<int64_t>();
  Tensor index = empty({t2, t1}, kInt64);
  int64_t* c = index.data_ptr<int64_t>();
  const int64_t R = o.table_size();
  for (int64_t i = 0; i < t2; ++i) {
    for (int64_t j = 0; j < t1; ++j) {
      const int64_t delta = j - positions[i];
      int64_t row = delta + o.max_past;
      if (o.causal && delta > 0) {
        row = -1;
      } else if (row < 0 || row >= R) {
        switch (o.out_of_range) {
          case OutOfRange::Clip: row = row < 0 ? 0 : R - 1; break;
          case OutOfRange::Zero: row = -1; break;
          case OutOfRange::Error:
            throw IndexError(detail::concat("[", op, "] query ", i, " (position ", positions[i], ") and key ", j,
                                            " are at relative position ", delta, ", outside the table's range [",
                                            -o.max_past, ", ", o.max_future, "] (", R,
                                            " rows) under the 'error' policy; use a longer table or the clip or "
                                            "zero policy"));
        }
      }
      c[i * t1 + j] = row;
    }
  }
  return index;
}

namespace {

// Checks the index map against P's or S's last two dims and the table size; returns it contiguous on
// x's device, where the kernels read it.
Tensor check_index(const Tensor& index, int64_t t2, int64_t t1, int64_t R, const Tensor& x, const char* op) {
  RG_CHECK_T(DTypeError, index.dtype() == kInt64, op, "index must be int64, got ", dtype_name(index.dtype()));
  RG_CHECK_T(DeviceError, index.device().is_cpu() || index.device() == x.device(), op, "index is on ",
             index.device().str(), " but the input ", shape_str(x.shape()), " is on ", x.device().str(),
             " (the index may be on the CPU or on the input's device)");
  RG_CHECK_T(ShapeError, index.dim() == 2 && index.size(0) == t2 && index.size(1) == t1, op, "index of shape ",
             shape_str(index.shape()), " does not match ", t2, " queries and ", t1, " keys (input ",
             shape_str(x.shape()), ")");
  // Every entry must be a row of the table or -1: checked before any kernel reads through it.
  const Tensor ic = index.contiguous();  // index itself when contiguous
  backend::check_index_values(ic, -1, R, [&](const Tensor& host) {
    const int64_t* c = host.data_ptr<int64_t>();
    for (int64_t k = 0; k < host.numel(); ++k)
      RG_CHECK_T(IndexError, c[k] >= -1 && c[k] < R, op, "index entry ", c[k], " at (", k / t1, ", ", k % t1,
                 ") is outside a table of ", R, " rows");
  });
  if (ic.device() == x.device()) return ic;
  return cached_index_upload(ic.to_vector<int64_t>(), ic.shape(), x.device());  // a host map for a GPU op
}

// The leading dims of x (all but the last two) as one stride, when they merge (x viewed as
// (N, a, b) without a copy). Size-1 dims are skipped; with no leading dims the stride is 0.
bool merged_leading_stride(const Tensor& x, int64_t& stride) {
  stride = 0;
  int64_t expected = -1;  // the stride the next outer leading dim must have
  for (int64_t d = x.dim() - 3; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (expected < 0) stride = x.stride(d);
    else if (x.stride(d) != expected) return false;
    expected = x.stride(d) * x.size(d);
  }
  return true;
}

// (..., a, b) → (N, a, b) with N the product of the leading dims.
int64_t leading(const Tensor& x) {
  int64_t n = 1;
  for (int64_t d = 0; d + 2 < x.dim(); ++d) n *= x.size(d);
  return n;
}

}  // namespace

Tensor relative_gather(const Tensor& P, const Tensor& index, int64_t R) {
  RG_PROFILE_OP("relative_gather");
  const char* op = "relative_gather";
  dispatch_float(P.dtype(), op, [](auto) {});
  RG_CHECK_T(ShapeError, P.dim() >= 2 && P.size(-1) == R, op, "expected P of shape (..., t2, ", R,
             ") (last dim = table rows), got ", shape_str(P.shape()));
  RG_CHECK_T(ShapeError, index.dim() == 2, op, "index must be 2-D (t2, t1), got ", shape_str(index.shape()));
  const int64_t t2 = P.size(-2), t1 = index.size(1);
  Tensor ic = check_index(index, t2, t1, R, P, op);  // on P's device
  // The kernel reads P as N = prod(leading dims) blocks of (t2, R) rows, given one batch stride and
  // one row stride: a P broadcast over queries (row stride 0) is read in place; layouts whose
  // leading dims do not merge into one stride, or whose rows are not unit-stride, are copied once.
  Tensor P3 = P.detach();
  int64_t batch_stride = 0;
  if (P3.stride(-1) != 1 || !merged_leading_stride(P3, batch_stride)) {
    P3 = P3.contiguous();
    merged_leading_stride(P3, batch_stride);
  }
  Shape out_shape = P.shape();
  out_shape.back() = t1;
  Tensor S = backend::relative_gather(P3, ic, out_shape, {leading(P), t2, t1, R, batch_stride, P3.stride(-2)});
  if (!needs_grad({P})) return S;
  return record(S, op, {P}, [p_shape = P.shape(), R, idx = SavedTensor(ic)](const Tensor& g) -> TensorList {
    return {sum_to(relative_scatter(g, idx.get(), R), p_shape)};
  });
}

Tensor relative_scatter(const Tensor& S, const Tensor& index, int64_t R) {
  RG_PROFILE_OP("relative_scatter");
  const char* op = "relative_scatter";
  dispatch_float(S.dtype(), op, [](auto) {});
  RG_CHECK_T(ShapeError, S.dim() >= 2, op, "expected S of shape (..., t2, t1), got ", shape_str(S.shape()));
  RG_CHECK(R >= 1, op, "table_size must be >= 1, got ", R);
  const int64_t t2 = S.size(-2), t1 = S.size(-1);
  Tensor ic = check_index(index, t2, t1, R, S, op);  // on S's device
  Tensor Sc = S.detach().contiguous();
  Shape out_shape = S.shape();
  out_shape.back() = R;
  Tensor P = backend::relative_scatter(Sc, ic, out_shape, {leading(S), t2, t1, R});  // RelativeLayout: N, t2, t1, R
  if (!needs_grad({S})) return P;
  return record(P, op, {S}, [R, idx = SavedTensor(ic)](const Tensor& g) -> TensorList {
    return {relative_gather(g, idx.get(), R)};
  });
}

}  // namespace relgrad
