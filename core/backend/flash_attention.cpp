// Fused relative attention entries: the plan becomes cpu::FlashProblem<T> (typed pointers, host
// lookups) or cuda::FlashArgs (untyped device pointers, plus the host lookups for planning).
#include "core/backend/flash_attention.h"

#include "core/backend/dense.h"
#include "core/cpu/flash_attention.h"
#include "core/cpu/gemm_library.h"
#include "cuda/flash_attention.h"

namespace relgrad::backend {

namespace {

constexpr const char* kOp = "flash_relative_attention";

// The CPU problem over contiguous tensors (all alive in the caller).
template <class T>
cpu::FlashProblem<T> cpu_problem(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& qr, const Tensor& E, const Tensor& bt) {
  cpu::FlashProblem<T> f;
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

bool flash_faster(int64_t B, int64_t H, int64_t t1, const Device& device) {
  return device.is_cpu() && t1 >= kFlashFasterMinKeys && cpu::gemm_library() != cpu::GemmLibrary::Eigen &&
         cpu::flash_backward_choice(B, H) == cpu::FlashBackward::OnePass;
}

FlashForward flash_forward(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                           const Tensor& E, const Tensor& bias) {
  FlashForward f{empty_on(q, q.shape(), q.dtype()), empty_on(q, {p.B, p.H, p.t2}, q.dtype())};
  if (q.device().is_cuda()) {
    cuda::flash_attention_forward(cuda_args(p, q, k, v, qr, E, bias), f.out.raw_data(), f.lse.raw_data());
    return f;
  }
  dispatch_float(q.dtype(), kOp, [&](auto zero) {
    using T = decltype(zero);
    cpu::flash_forward<T>(cpu_problem<T>(p, q, k, v, qr, E, bias), f.out.data_ptr<T>(), f.lse.data_ptr<T>());
  });
  return f;
}

FlashGrads flash_backward(const FlashPlan& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr,
                          const Tensor& E, const Tensor& bias, const Tensor& out, const Tensor& lse, const Tensor& g,
                          bool want_qr, bool want_E, bool want_bias) {
  FlashGrads d;
  d.dq = empty_on(q, q.shape(), q.dtype()), d.dk = empty_on(q, k.shape(), q.dtype());
  d.dv = empty_on(q, v.shape(), q.dtype());
  if (want_qr) d.dqr = empty_on(q, q.shape(), q.dtype());
  if (want_E) d.dE = empty_on(q, {p.E_heads, p.R, p.D}, q.dtype());
  if (want_bias) d.dbias = empty_on(q, {p.bias_heads, p.Rb}, q.dtype());
  if (q.device().is_cuda()) {
    cuda::flash_attention_backward(cuda_args(p, q, k, v, qr, E, bias), out.raw_data(), lse.raw_data(), g.raw_data(),
                                   d.dq.raw_data(), d.dk.raw_data(), d.dv.raw_data(), raw_or_null(d.dqr),
                                   raw_or_null(d.dE), raw_or_null(d.dbias));
    return d;
  }
  dispatch_float(q.dtype(), kOp, [&](auto zero) {
    using T = decltype(zero);
    cpu::flash_backward<T>(cpu_problem<T>(p, q, k, v, qr, E, bias), out.data_ptr<T>(), lse.data_ptr<T>(),
                           g.data_ptr<T>(), d.dq.data_ptr<T>(), d.dk.data_ptr<T>(), d.dv.data_ptr<T>(),
                           ptr_or_null<T>(d.dqr), ptr_or_null<T>(d.dE), ptr_or_null<T>(d.dbias));
  });
  return d;
}

}  // namespace relgrad::backend
