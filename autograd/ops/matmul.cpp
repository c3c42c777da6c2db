// matmul and bmm. Forward calls the backend's GEMM (core/backend/matmul.h: Eigen on the CPU, cuBLAS
// on the GPU), which reads transposed and broadcast operands in place. Backward is two more
// matmuls on transposed views (so it runs on the operands' device too):
//   C = A @ B   →   dA = dC @ Bᵀ,   dB = Aᵀ @ dC,
// each summed over the batch dims its operand was broadcast along (sum_to). An operand laid out as a
// permuted dense tensor (attention's heads) gets its gradient in that layout (empty_in_layout below).
// Under autocast (autograd/autocast.h) the three products take 16-bit-rounded operands, forward and
// backward: the backend rounds them (core/backend/matmul.h: on the GPU, 16-bit copies fed to the
// tensor cores), so A and B are saved as they are — no rounded copy is kept for the backward, whose
// products round them afresh (the same values) together with dC. Sums and results are float32.
#include <algorithm>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/matmul.h"

namespace relgrad {

namespace {

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  RG_CHECK(a.defined() && b.defined(), op, "called with an undefined tensor");
  check_same_device(a, b, op);
  check_same_dtype(a, b, op);
  dispatch_float(a.dtype(), op, [](auto) {});  // throws for int64 and bool
}

// True when the dims before the last of x merge into one with a plain view (x.view({-1, k}) works
// without a copy), so (B, T, k) @ (k, m) can run as one (B*T, k) @ (k, m) GEMM.
bool rows_foldable(const Tensor& x) {
  int64_t expected = -1;  // the stride the next outer dim must have
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (expected >= 0 && x.stride(d) != expected) return false;
    expected = x.stride(d) * x.size(d);
  }
  return true;
}

// Where an operand is a permutation of a dense tensor with unit last stride but not contiguous
// (attention's heads: q, k, v are (B, H, L, D) views of a (B, L, H, D) projection), its gradient is
// written in that same layout: the permute's and the reshape's backwards that follow are then views,
// where a contiguous gradient cost a copy each (three a head split, docs/benchmarks.md, "The roofline
// of the main job's step"). Returns an empty tensor of that shape and those strides, or an undefined
// one where the layout is another (contiguous, broadcast, overlapping, a non-unit last stride).
Tensor empty_in_layout(const Shape& shape, const Shape& strides, TensorOptions options) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd < 2 || strides.back() != 1) return Tensor();
  Shape order(static_cast<size_t>(nd));  // dims outermost first
  for (int64_t d = 0; d < nd; ++d) order[static_cast<size_t>(d)] = d;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return strides[x] > strides[y]; });
  int64_t expected = 1;
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t d = order[static_cast<size_t>(i)];
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return Tensor();
    expected *= shape[d];
  }
  const Shape plain = contiguous_strides(shape);  // a size-1 dim's stride says nothing
  bool contiguous = true;
  for (int64_t d = 0; d < nd; ++d) contiguous = contiguous && (shape[d] == 1 || strides[d] == plain[d]);
  if (contiguous || expected == 0) return Tensor();
  Shape sizes(static_cast<size_t>(nd)), inverse(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) {
    sizes[static_cast<size_t>(i)] = shape[order[static_cast<size_t>(i)]];
    inverse[order[static_cast<size_t>(i)]] = i;
  }
  return empty(sizes, options).permute(inverse);
}

// The differentiable core, both operands at least 2-D: a (.., n, k) @ b (.., k, m) → (batch.., n, m),
// or with init (addmm): init + alpha · (a @ b), init broadcast to the product's shape.
Tensor matmul_nd(const Tensor& a, const Tensor& b, const char* op, const Tensor& init = Tensor(), double alpha = 1.0) {
  RG_PROFILE_OP(op);  // the views and checks around it do no work worth a row
  Shape batch = batch_shape(a, b, op);
  const DType low = autocast_dtype_for(a);  // kFloat32: no rounding (a and b share a dtype)
  Tensor out = backend::matmul(a, b, batch, op, init, alpha, low);
  add_profiled_flops(2.0 * double(out.numel()) * double(a.size(-1)));  // 2·M·N·K over the batch
  TensorList inputs{a, b};
  if (init.defined()) inputs.push_back(init);
  if (!needs_grad(inputs)) return out;
  const bool need_a = a.requires_grad(), need_b = b.requires_grad(), need_c = init.defined() && init.requires_grad();
  const bool has_c = init.defined();
  // A column-major 2-D b (a Linear layer's transposed weight) gets its gradient in its own layout,
  // (gᵀ · a)ᵀ: the same sums (an element is one chain over the rows of g, in order, either way on
  // relgrad's kernel), and the weight's gradient comes out dense, kept by the engine as it is instead
  // of copied into place (PyTorch's mm backward does the same).
  const bool b_column_major = b.dim() == 2 && b.size(0) > 1 && b.size(1) > 1 && b.stride(0) == 1 &&
                              b.stride(1) == b.size(0);
  // Gradients in their operand's layout (empty_in_layout above): on the CPU, in float32 products, for
  // operands not broadcast over the batch (their gradient needs no sum). The same elements as a fresh
  // output on relgrad's kernel (core/cpu/matmul.h says where Eigen's may round one differently).
  const bool in_layout = a.device().is_cpu() && low == kFloat32 && alpha == 1.0;
  const Shape a_strides = a.strides(), b_strides = b.strides();
  // dA needs B and dB needs A: save only what a requested gradient uses.
  return record(out, op, inputs,
                [=, sa = a.shape(), sb = b.shape(), sc = init.defined() ? init.shape() : Shape(),
                 a = need_b ? SavedTensor(a) : SavedTensor(),
                 b = need_a ? SavedTensor(b) : SavedTensor()](const Tensor& g) -> TensorList {
                  // g (batch.., n, m); the transposes are views, read in place by the GEMM.
                  auto scaled = [alpha](const Tensor& t) { return alpha == 1.0 ? t : mul(t, alpha); };
                  Tensor ga, gb;
                  // The layouts: a's own for ga; b's own for gb, or bᵀ's (k in q·kᵀ), computed as
                  // (gᵀ · a)ᵀ, the same sums as b_column_major's below. Not when building a graph.
                  const bool layouts = in_layout && !GradMode::is_enabled() && g.device().is_cpu();
                  auto full = [&](const Shape& s) {  // s's matrix over the whole batch: no broadcast dims
                    Shape f = batch;
                    f.insert(f.end(), s.end() - 2, s.end());
                    return f;
                  };
                  const Shape a_full = full(sa), b_full = full(sb);
                  const TensorOptions options = TensorOptions(g.dtype());
                  Tensor ga_into = layouts && need_a && sa == a_full ? empty_in_layout(sa, a_strides, options) : Tensor();
                  Tensor gb_into, gbt_into;
                  if (layouts && need_b && sb == b_full) {
                    gb_into = empty_in_layout(sb, b_strides, options);
                    if (!gb_into.defined()) {
                      Shape st = sb, tt = b_strides;
                      std::swap(st[st.size() - 1], st[st.size() - 2]);
                      std::swap(tt[tt.size() - 1], tt[tt.size() - 2]);
                      gbt_into = empty_in_layout(st, tt, options);
                    }
                  }
                  auto into = [&](const Tensor& x, const Tensor& y, const Tensor& out) {
                    add_profiled_flops(2.0 * double(out.numel()) * double(x.size(-1)));
                    return backend::matmul(x, y, batch, op, Tensor(), 1.0, kFloat32, out);
                  };
                  {  // the backward's products in the forward's precision, whatever autocast is now
                    AutocastGuard products(low);
                    if (need_a)
                      ga = ga_into.defined() ? into(g, b.get().transpose(-1, -2), ga_into)
                                             : matmul(g, b.get().transpose(-1, -2));
                    if (need_b)
                      gb = gb_into.defined()    ? into(a.get().transpose(-1, -2), g, gb_into)
                           : gbt_into.defined() ? into(g.transpose(-1, -2), a.get(), gbt_into).transpose(-1, -2)
                           : b_column_major && g.dim() == 2
                               ? matmul(g.transpose(-1, -2), a.get()).transpose(-1, -2)
                               : matmul(a.get().transpose(-1, -2), g);
                  }
                  if (need_a) ga = sum_to(scaled(ga), sa);
                  if (need_b) gb = sum_to(scaled(gb), sb);
                  if (!has_c) return {ga, gb};
                  return {ga, gb, need_c ? sum_to(g, sc) : Tensor()};
                });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const char* op = "matmul";
  check_operands(a, b, op);
  RG_CHECK_T(ShapeError, a.dim() >= 1 && b.dim() >= 1, op, "both arguments need at least 1 dimension, got ",
             shape_str(a.shape()), " @ ", shape_str(b.shape()));
  RG_CHECK_T(ShapeError, a.size(-1) == b.size(b.dim() == 1 ? 0 : -2), op, "inner dimensions differ: ",
             shape_str(a.shape()), " @ ", shape_str(b.shape()));
  // 1-D operands, as PyTorch: a (k) is a row (1, k), b (k) a column (k, 1); the added dim is removed
  // afterwards. unsqueeze/squeeze are autograd views, so gradients reach the 1-D tensors unchanged.
  if (a.dim() == 1 && b.dim() == 1) return squeeze(squeeze(matmul_nd(unsqueeze(a, 0), unsqueeze(b, 1), op), -1), -1);
  if (a.dim() == 1) return squeeze(matmul_nd(unsqueeze(a, 0), b, op), -2);
  if (b.dim() == 1) return squeeze(matmul_nd(a, unsqueeze(b, 1), op), -1);
  // (B.., n, k) @ (k, m): one tall GEMM (B..*n, k) @ (k, m) instead of a batch of small ones. Its
  // backward then gives dB as one GEMM too, rather than a (B.., k, m) stack summed afterwards.
  if (b.dim() == 2 && a.dim() > 2 && a.numel() > 0 && rows_foldable(a)) {
    Shape out_shape = a.shape();
    out_shape.back() = b.size(1);
    return view(matmul_nd(view(a, {-1, a.size(-1)}), b, op), out_shape);
  }
  return matmul_nd(a, b, op);
}

Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, double alpha) {
  const char* op = "addmm";
  check_operands(a, b, op);
  RG_CHECK(c.defined(), op, "called with an undefined tensor");
  check_same_device(a, c, op);
  check_same_dtype(a, c, op);
  RG_CHECK_T(ShapeError, a.dim() >= 2 && b.dim() >= 2, op, "a and b need at least 2 dimensions, got ",
             shape_str(a.shape()), " @ ", shape_str(b.shape()));
  RG_CHECK_T(ShapeError, a.size(-1) == b.size(-2), op, "inner dimensions differ: ", shape_str(a.shape()), " @ ",
             shape_str(b.shape()));
  Shape out_shape = batch_shape(a, b, op);
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  RG_CHECK_T(ShapeError, broadcasts_to(c.shape(), out_shape), op, "c ", shape_str(c.shape()), " does not broadcast to the product's shape ", shape_str(out_shape),
             " (", shape_str(a.shape()), " @ ", shape_str(b.shape()), ")");
  // A Linear layer's (B.., n, k) @ (k, m) + bias (m): one tall GEMM, as matmul does.
  if (b.dim() == 2 && a.dim() > 2 && a.numel() > 0 && c.dim() <= 1 && rows_foldable(a))
    return view(matmul_nd(view(a, {-1, a.size(-1)}), b, op, c, alpha), out_shape);
  return matmul_nd(a, b, op, c, alpha);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  const char* op = "bmm";
  check_operands(a, b, op);
  RG_CHECK_T(ShapeError, a.dim() == 3 && b.dim() == 3, op, "expected 3-D tensors (B,n,k) @ (B,k,m), got ",
             shape_str(a.shape()), " @ ", shape_str(b.shape()));
  RG_CHECK_T(ShapeError, a.size(0) == b.size(0), op, "batch sizes differ: ", shape_str(a.shape()), " @ ",
             shape_str(b.shape()));
  RG_CHECK_T(ShapeError, a.size(2) == b.size(1), op, "inner dimensions differ: ", shape_str(a.shape()), " @ ",
             shape_str(b.shape()));
  return matmul_nd(a, b, op);
}

}  // namespace relgrad
