// Fused relative attention entries: the plan becomes cpu::FlashProblem<T> (typed pointers, host
// lookups) or cuda::FlashArgs (untyped device pointers, plus the host lookups for planning).
#include "core/backend/flash_attention.h"

#include <algorithm>

#include "core/backend/dense.h"
#include "core/cpu/flash_attention.h"
#include "core/cpu/gemm_library.h"
#include "cuda/flash_attention.h"

namespace relgrad::backend {

namespace {

constexpr const char* kOp = "flash_relative_attention";

// Whether the CPU kernels can read t (B, H, T, D) in place: unit stride along D and rows at least D
// apart (the tile GEMMs' leading dimension; a broadcast or overlapping view is copied instead).
bool heads_in_place(const Tensor& t) {
  return t.device().is_cpu() && t.dim() == 4 && (t.size(3) <= 1 || t.stride(3) == 1) &&
         (t.size(2) <= 1 || t.stride(2) >= t.size(3));
}

// The rows of t (B, H, T, D), which flash_operand passed: with one row per (b, h), the row stride is
// never multiplied by a non-zero index but is still the GEMMs' leading dimension, so at least D.
cpu::HeadLayout head_layout(const Tensor& t) {
  return {t.stride(0), t.stride(1), t.size(2) <= 1 ? std::max<int64_t>(t.size(3), 1) : t.stride(2)};
}

// A new (B, H, T, D) tensor like t (B, H, T, D): over (B, T, H, D) memory when t has its heads inside
// time (the heads of a (B, T, H·D) tensor), else contiguous. On a GPU always contiguous.
Tensor empty_heads_like(const Tensor& t) {
  const int64_t B = t.size(0), H = t.size(1), T = t.size(2), D = t.size(3);
  if (!t.device().is_cpu() || t.stride(1) >= t.stride(2)) return empty_on(t, t.shape(), t.dtype());
  return make_view(empty_on(t, {B, T, H, D}, t.dtype()), t.shape(), {T * H * D, D, H * D, 1}, 0);
}

// The CPU problem over the operands (all alive in the caller); out, dout and the gradients' layouts
// from the tensors given (undefined: not used).
template <class T>
cpu::FlashProblem<T> cpu_problem(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& qr, const Tensor& E, const Tensor& bt, const Tensor& out,
                                 const Tensor& dout = Tensor(), const FlashGrads* d = nullptr) {
  cpu::FlashProblem<T> f;
  auto layout = [](const Tensor& t) { return t.defined() ? head_layout(t) : cpu::HeadLayout{}; };
  f.layout.q = layout(q), f.layout.k = layout(k), f.layout.v = layout(v);
  f.layout.qr = qr.defined() ? layout(qr) : f.layout.q;
  f.layout.out = layout(out), f.layout.dout = layout(dout);
  if (d) {
    f.layout.dq = layout(d->dq), f.layout.dk = layout(d->dk), f.layout.dv = layout(d->dv);
    f.layout.dqr = layout(d->dqr);
  }
  f.B = p.B, f.H = p.H, f.t2 = p.t2, f.t1 = p.t1, f.D = p.D, f.scale = p.scale, f.causal = p.causal;
  f.pos = p.pos_host.data();
  f.q = q.data_ptr<T>(), f.k = k.data_ptr<T>(), f.v = v.data_ptr<T>();
  f.qr = qr.defined() ? qr.data_ptr<T>() : f.q;
  if (E.defined()) f.E = E.data_ptr<T>(), f.E_heads = p.E_heads, f.R = p.R, f.rel_rows = p.rel_host.data();
  if (bt.defined()) f.bias = bt.data_ptr<T>(), f.bias_heads = p.bias_heads, f.Rb = p.Rb, f.bias_rows = p.bias_host.data();
  f.min_delta = p.min_delta, f.W = p.W;
  f.pad = p.pad.defined() ? p.pad.data_ptr<bool>() : nullptr;
  return f;
}

// The typed address of a tensor on the GPU (data_ptr is for host tensors and refuses these).
template <class T>
const T* device_ptr(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}

cuda::FlashArgs cuda_args(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                          const Tensor& E, const Tensor& bt) {
  cuda::FlashArgs a;
  a.dtype = q.dtype(), a.device = q.device().index;
  a.B = p.B, a.H = p.H, a.t2 = p.t2, a.t1 = p.t1, a.D = p.D, a.scale = p.scale, a.causal = p.causal;
  a.pos = device_ptr<int64_t>(p.pos), a.pos_host = p.pos_host.data();
  a.q = q.raw_data(), a.k = k.raw_data(), a.v = v.raw_data();
  a.qr = qr.defined() ? qr.raw_data() : a.q;
  if (E.defined()) {
    a.E = E.raw_data(), a.E_heads = p.E_heads, a.R = p.R;
    a.rel_rows = device_ptr<int64_t>(p.rel_rows), a.rel_rows_host = p.rel_host.data();
  }
  if (bt.defined()) {
    a.bias = bt.raw_data(), a.bias_heads = p.bias_heads, a.Rb = p.Rb;
    a.bias_rows = device_ptr<int64_t>(p.bias_rows), a.bias_rows_host = p.bias_host.data();
  }
  a.min_delta = p.min_delta, a.W = p.W;
  a.pad = p.pad.defined() ? device_ptr<bool>(p.pad) : nullptr;
  return a;
}

}  // namespace

Tensor flash_operand(const Tensor& t) { return !t.defined() || heads_in_place(t) ? t : dense(t); }

bool flash_faster(int64_t B, int64_t H, int64_t t1, const Device& device) {
  return device.is_cpu() && t1 >= kFlashFasterMinKeys && cpu::gemm_library() != cpu::GemmLibrary::Eigen &&
         cpu::flash_backward_choice(B, H) == cpu::FlashBackward::OnePass;
}

FlashForward flash_forward(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                           const Tensor& E, const Tensor& bias) {
  FlashForward f{Tensor(), empty_on(q, {p.B, p.H, p.t2}, q.dtype())};
  if (q.device().is_cuda()) {
    f.out = empty_on(q, q.shape(), q.dtype());
    cuda::flash_attention_forward(cuda_args(p, dense(q), dense(k), dense(v), dense(qr), E, bias), f.out.raw_data(),
                                  f.lse.raw_data());
    return f;
  }
  // (B, t2, H, D) memory, so that the caller's merge into (B, t2, H·D) is a view.
  f.out = make_view(empty_on(q, {p.B, p.t2, p.H, p.D}, q.dtype()), q.shape(),
                    {p.t2 * p.H * p.D, p.D, p.H * p.D, 1}, 0);
  dispatch_float(q.dtype(), kOp, [&](auto zero) {
    using T = decltype(zero);
    cpu::flash_forward<T>(cpu_problem<T>(p, q, k, v, qr, E, bias, f.out), f.out.data_ptr<T>(), f.lse.data_ptr<T>());
  });
  return f;
}

FlashGrads flash_backward(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                          const Tensor& E, const Tensor& bias, const Tensor& out, const Tensor& lse, const Tensor& g,
                          bool want_qr, bool want_E, bool want_bias) {
  FlashGrads d;
  d.dq = empty_heads_like(q), d.dk = empty_heads_like(k), d.dv = empty_heads_like(v);
  if (want_qr) d.dqr = empty_heads_like(qr.defined() ? qr : q);
  if (want_E) d.dE = empty_on(q, {p.E_heads, p.R, p.D}, q.dtype());
  if (want_bias) d.dbias = empty_on(q, {p.bias_heads, p.Rb}, q.dtype());
  if (q.device().is_cuda()) {
    cuda::flash_attention_backward(cuda_args(p, dense(q), dense(k), dense(v), dense(qr), E, bias),
                                   dense(out).raw_data(), lse.raw_data(), dense(g).raw_data(), d.dq.raw_data(),
                                   d.dk.raw_data(), d.dv.raw_data(), raw_or_null(d.dqr), raw_or_null(d.dE),
                                   raw_or_null(d.dbias));
    return d;
  }
  dispatch_float(q.dtype(), kOp, [&](auto zero) {
    using T = decltype(zero);
    cpu::flash_backward<T>(cpu_problem<T>(p, q, k, v, qr, E, bias, out, g, &d), out.data_ptr<T>(),
                           lse.data_ptr<T>(), g.data_ptr<T>(), d.dq.data_ptr<T>(), d.dk.data_ptr<T>(),
                           d.dv.data_ptr<T>(), ptr_or_null<T>(d.dqr), ptr_or_null<T>(d.dE), ptr_or_null<T>(d.dbias));
  });
  return d;
}

}  // namespace relgrad::backend
