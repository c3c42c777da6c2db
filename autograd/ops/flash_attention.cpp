// flash_relative_attention: the fused relative attention op (declared in autograd/ops.h). Forward
// and backward call the backend entries (core/backend/flash_attention.h); this file checks the
// arguments, hands the operands over (on the CPU q, k, v, qr and the incoming gradient as they are
// when their rows are unit-stride: backend::flash_operand) and records the tape node. Its composite twin, the test
// oracle, is attention_heads' chain
//   q·kᵀ + relative_gather(q_rel·Eᵀ, C) → masked_softmax(·, mask, scale, bias) → ·v
// (tests/test_flash_attention.cpp compares the two for every scheme).
//
// Saved for backward: q, k, v, the relative query, the tables, the output and one logsumexp per
// query row, O(t·D) in all: the probabilities are recomputed tile by tile.
#include <cmath>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/checks.h"
#include "core/backend/flash_attention.h"
#include "core/device_cache.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "flash_relative_attention";

// A lookup (int64 (W)) as a host vector, every entry in [−1, rows).
std::vector<int64_t> host_lookup(const Tensor& rows, int64_t table_rows, const char* what) {
  RG_CHECK_T(DTypeError, rows.dtype() == kInt64, kOp, what, " must be int64, got ", dtype_name(rows.dtype()));
  RG_CHECK_T(ShapeError, rows.dim() == 1, kOp, what, " must be 1-D (W), got ", shape_str(rows.shape()));
  std::vector<int64_t> h = rows.to(Device::cpu()).contiguous().to_vector<int64_t>();
  for (size_t w = 0; w < h.size(); ++w)
    RG_CHECK_T(IndexError, h[w] >= -1 && h[w] < table_rows, kOp, what, " entry ", h[w], " at ", w,
               " is outside a table of ", table_rows, " rows");
  return h;
}

// Table heads of a relative table (R, D) / (Eh, R, D) or a bias table (Rb) / (Bh, Rb): 1 or H.
int64_t table_heads(const Tensor& t, int64_t row_dims, int64_t H, const char* what) {
  const int64_t heads = t.dim() == row_dims ? 1 : t.size(0);
  RG_CHECK_T(ShapeError, heads == 1 || heads == H, kOp, what, " ", shape_str(t.shape()), " has ", heads,
             " heads; expected 1 (shared) or ", H);
  return heads;
}

using Plan = backend::FlashPlan;

Plan make_plan(const Tensor& q, const Tensor& k, const Tensor& v, const FlashAttentionOptions& o) {
  Plan p;
  RG_CHECK_T(DTypeError, is_floating(q.dtype()), kOp, "q must be float32 or float64, got ", dtype_name(q.dtype()));
  check_same_dtype(q, k, kOp);
  check_same_dtype(q, v, kOp);
  check_same_device(q, k, kOp);
  check_same_device(q, v, kOp);
  RG_CHECK_T(ShapeError, q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOp,
             "q, k, v must be (B, H, t2, D), (B, H, t1, D), (B, H, t1, D), got ", shape_str(q.shape()), ", ",
             shape_str(k.shape()), ", ", shape_str(v.shape()));
  p.B = q.size(0), p.H = q.size(1), p.t2 = q.size(2), p.D = q.size(3), p.t1 = k.size(2);
  RG_CHECK_T(ShapeError, k.shape() == Shape({p.B, p.H, p.t1, p.D}) && v.shape() == k.shape(), kOp,
             "k and v must be (B, H, t1, D) matching q ", shape_str(q.shape()), ", got k ", shape_str(k.shape()),
             " and v ", shape_str(v.shape()));
  p.scale = o.scale < 0 ? 1.0 / std::sqrt(static_cast<double>(p.D)) : o.scale;
  p.causal = o.causal;
  const Device dev = q.device();
  if (o.query_positions.defined()) {
    RG_CHECK_T(ShapeError, o.query_positions.dtype() == kInt64 && o.query_positions.dim() == 1 &&
                               o.query_positions.size(0) == p.t2,
               kOp, "query_positions must be int64 (", p.t2, ") for q ", shape_str(q.shape()), ", got ",
               dtype_name(o.query_positions.dtype()), " ", shape_str(o.query_positions.shape()));
    p.pos_host = o.query_positions.to(Device::cpu()).contiguous().to_vector<int64_t>();
  } else {
    p.pos_host.resize(static_cast<size_t>(p.t2));
    for (int64_t i = 0; i < p.t2; ++i) p.pos_host[i] = i;
  }
  // The device copies of positions and lookups are cached by content (core/device_cache.h): a training
  // step reuses the last step's instead of copying them again. The host copies stay in the plan for
  // the checks, the CPU kernels and the CUDA kernels' planning.
  p.pos = cached_index_upload(p.pos_host, {p.t2}, dev);

  const Tensor& E = o.rel_table;
  if (E.defined()) {
    check_same_dtype(q, E, kOp);
    check_same_device(q, E, kOp);
    RG_CHECK_T(ShapeError, (E.dim() == 2 || E.dim() == 3) && E.size(-1) == p.D, kOp, "rel_table must be (R, ", p.D,
               ") or (H, R, ", p.D, ") for q ", shape_str(q.shape()), ", got ", shape_str(E.shape()));
    p.E_heads = table_heads(E, 2, p.H, "rel_table");
    p.R = E.size(-2);
    RG_CHECK(o.rel_rows.defined(), kOp, "rel_table ", shape_str(E.shape()), " needs rel_rows (the per-distance lookup)");
    p.rel_host = host_lookup(o.rel_rows, p.R, "rel_rows");
    p.W = static_cast<int64_t>(p.rel_host.size());
  } else {
    RG_CHECK(!o.rel_rows.defined() && !o.rel_query.defined(), kOp, "rel_rows and rel_query need a rel_table");
  }
  if (o.rel_query.defined()) {
    check_same_dtype(q, o.rel_query, kOp);
    check_same_device(q, o.rel_query, kOp);
    RG_CHECK_T(ShapeError, o.rel_query.shape() == q.shape(), kOp, "rel_query must have q's shape ",
               shape_str(q.shape()), ", got ", shape_str(o.rel_query.shape()));
  }
  const Tensor& bt = o.bias_table;
  if (bt.defined()) {
    check_same_dtype(q, bt, kOp);
    check_same_device(q, bt, kOp);
    RG_CHECK_T(ShapeError, bt.dim() == 1 || bt.dim() == 2, kOp, "bias_table must be (Rb) or (H, Rb), got ",
               shape_str(bt.shape()));
    p.bias_heads = table_heads(bt, 1, p.H, "bias_table");
    p.Rb = bt.size(-1);
    RG_CHECK(o.bias_rows.defined(), kOp, "bias_table ", shape_str(bt.shape()), " needs bias_rows (the per-distance lookup)");
    p.bias_host = host_lookup(o.bias_rows, p.Rb, "bias_rows");
    const int64_t Wb = static_cast<int64_t>(p.bias_host.size());
    RG_CHECK_T(ShapeError, !E.defined() || Wb == p.W, kOp, "rel_rows (", p.W, ") and bias_rows (", Wb,
               ") must cover the same distances");
    p.W = Wb;
  } else {
    RG_CHECK(!o.bias_rows.defined(), kOp, "bias_rows needs a bias_table");
  }
  p.min_delta = o.min_delta;
  // Every distance a visible pair can reach must be in the lookups: δ ∈ [−π(i), t1 − 1 − π(i)]
  // (causal: up to min(0, ...)).
  if (E.defined() || bt.defined()) {
    for (int64_t i = 0; i < p.t2; ++i) {
      const int64_t pi = p.pos_host[i];
      int64_t hi = p.t1 - 1 - pi;
      if (p.causal && hi > 0) hi = 0;
      const int64_t lo = -pi;
      if (p.t1 == 0 || hi < lo) continue;  // no visible key
      RG_CHECK_T(IndexError, lo >= p.min_delta && hi < p.min_delta + p.W, kOp, "query ", i, " (position ", pi,
                 ") reaches relative positions [", lo, ", ", hi, "] but the lookups cover [", p.min_delta, ", ",
                 p.min_delta + p.W - 1, "] (W = ", p.W, ", t1 = ", p.t1, ")");
    }
  }
  if (E.defined()) p.rel_rows = cached_index_upload(p.rel_host, {p.W}, dev);
  if (bt.defined()) p.bias_rows = cached_index_upload(p.bias_host, {p.W}, dev);
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    check_same_device(q, m, kOp);
    RG_CHECK_T(ShapeError, m.dtype() == kBool && m.dim() == 2 && m.size(0) == p.B && m.size(1) == p.t1, kOp,
               "key_padding_mask must be bool (B, t1) = (", p.B, ", ", p.t1, "), got ", dtype_name(m.dtype()), " ",
               shape_str(m.shape()));
    p.pad = m.contiguous();
  }
  return p;
}

Tensor contiguous_data(const Tensor& t) { return t.defined() ? t.detach().contiguous() : Tensor(); }
// A (B, H, T, D) operand as the kernels read it: on the CPU the view itself (MultiHeadAttention's heads
// of a (B, T, H·D) projection: no copy), else contiguous.
Tensor heads_data(const Tensor& t) { return t.defined() ? backend::flash_operand(t.detach()) : Tensor(); }

}  // namespace

bool flash_attention_faster(int64_t B, int64_t H, int64_t t1, const Device& device) {
  return backend::flash_faster(B, H, t1, device);
}

Tensor flash_relative_attention(const Tensor& q, const Tensor& k, const Tensor& v, const FlashAttentionOptions& o) {
  RG_PROFILE_OP(kOp);
  const Plan plan = make_plan(q, k, v, o);
  add_profiled_flops(attention_flops(plan.B, plan.H, plan.t2, plan.t1, plan.D, plan.causal, false));
  // Autocast (autograd/autocast.h): the products' operands q, k, v, rel_query and rel_table rounded, the
  // incoming gradient too in the backward. The CPU kernel keeps P in float32 for P·V, where a GPU
  // kernel would round it as well: the one product here that is not the tensor cores' contract.
  const DType low = autocast_dtype_for(q);
  const Tensor qc = round_to(heads_data(q), low), kc = round_to(heads_data(k), low), vc = round_to(heads_data(v), low);
  const Tensor qrc = o.rel_query.defined() ? round_to(heads_data(o.rel_query), low) : Tensor();
  const Tensor Ec = o.rel_table.defined() ? round_to(contiguous_data(o.rel_table), low) : Tensor();
  const Tensor bc = contiguous_data(o.bias_table);
  const backend::FlashForward f = backend::flash_forward(plan, qc, kc, vc, qrc, Ec, bc);
  const Tensor out = f.out;
  // Inputs in a fixed order: q, k, v, then whichever of rel_query, rel_table, bias_table are given.
  TensorList inputs{q, k, v};
  const int in_qr = o.rel_query.defined() ? static_cast<int>(inputs.size()) : -1;
  if (in_qr >= 0) inputs.push_back(o.rel_query);
  const int in_E = o.rel_table.defined() ? static_cast<int>(inputs.size()) : -1;
  if (in_E >= 0) inputs.push_back(o.rel_table);
  const int in_b = o.bias_table.defined() ? static_cast<int>(inputs.size()) : -1;
  if (in_b >= 0) inputs.push_back(o.bias_table);
  if (!needs_grad(inputs)) return out;
  const bool want_E = in_E >= 0 && o.rel_table.requires_grad(), want_b = in_b >= 0 && o.bias_table.requires_grad();
  const size_t n_inputs = inputs.size();
  const Shape E_shape = in_E >= 0 ? o.rel_table.shape() : Shape(), b_shape = in_b >= 0 ? o.bias_table.shape() : Shape();
  return record(out, kOp, inputs,
                [=, qs = SavedTensor(qc), ks = SavedTensor(kc), vs = SavedTensor(vc), qrs = SavedTensor(qrc),
                 Es = SavedTensor(Ec), bs = SavedTensor(bc), outs = SavedTensor(out),
                 lses = SavedTensor(f.lse)](const Tensor& g) -> TensorList {
                  const Tensor q_ = qs.get(), k_ = ks.get(), v_ = vs.get(), o_ = outs.get(), l_ = lses.get();
                  const Tensor qr_ = qrs.defined() ? qrs.get() : Tensor(), E_ = Es.defined() ? Es.get() : Tensor();
                  const Tensor b_ = bs.defined() ? bs.get() : Tensor();
                  const Tensor gc = round_to(backend::flash_operand(g), low);
                  add_profiled_flops(attention_flops(plan.B, plan.H, plan.t2, plan.t1, plan.D, plan.causal, true));
                  const backend::FlashGrads d = backend::flash_backward(plan, q_, k_, v_, qr_, E_, b_, o_, l_, gc,
                                                                        in_qr >= 0, want_E, want_b);
                  TensorList grads(n_inputs);
                  grads[0] = d.dq, grads[1] = d.dk, grads[2] = d.dv;
                  if (in_qr >= 0) grads[in_qr] = d.dqr;
                  if (want_E) grads[in_E] = d.dE.reshape(E_shape);
                  if (want_b) grads[in_b] = d.dbias.reshape(b_shape);
                  return grads;
                });
}

}  // namespace relgrad
