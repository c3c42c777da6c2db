// The fused elementwise chains of a transformer block (autograd/ops/fused.cpp): bias_activation and
// residual_layer_norm / residual_rms_norm. Each runs through the op table (float64 reference,
// float32, strided inputs, gradcheck, bad inputs, CUDA parity where a GPU is present), and against
// its composite twin — the same bits on the CPU, forward and backward — alone and inside the layers
// that use them (FeedForward, EncoderBlock, DecoderBlock, dropout on).
#include <cmath>
#include <cstring>

#include "core/backend/fused.h"
#include "core/base/fast_math.h"
#include "core/cpu/fused.h"
#include "layers/blocks.h"
#include "op_harness.h"
#include "thread_count.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

constexpr Activation kActivations[] = {Activation::Relu, Activation::Gelu, Activation::GeluTanh};

double ref_activation(Activation a, double z) {
  switch (a) {
    case Activation::Relu: return z > 0 ? z : 0.0;
    case Activation::Gelu: return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    case Activation::GeluTanh:
      return 0.5 * z * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
  }
  return 0;
}

// The composite twin: the ops bias_activation replaces.
Tensor composite_bias_activation(const Tensor& x, const Tensor& b, Activation a) {
  Tensor z = add(x, b);
  if (a == Activation::Relu) return relu(z);
  return a == Activation::Gelu ? gelu_erf(z) : gelu_tanh(z);
}

Tensor f64(const Shape& s, uint64_t seed = 1) { return uniform(s, -2, 2, kFloat64, seed); }

OpCase bias_activation_case(Activation a) {
  OpCase c;
  c.name = std::string("bias_activation ") + activation_name(a) + " (2,3,5) + (5)";
  c.shapes = {{2, 3, 5}, {5}};
  c.op = [a](const TensorList& in) { return bias_activation(in[0], in[1], a); };
  c.reference = [a](const std::vector<Ref>& in) {
    Ref y(in[0].shape);
    for (int64_t k = 0; k < y.numel(); ++k) y.v[k] = ref_activation(a, in[0].v[k] + in[1].v[k % 5]);
    return y;
  };
  return c;
}

// layer_norm (rms = false) or rms_norm of each row of N, in float64.
Ref ref_residual_norm(const Ref& a, const Ref& b, int64_t N, const Ref* w, const Ref* bias, double eps, bool rms) {
  Ref out({2, a.numel()});  // (sum, out) stacked, flattened below by the caller's shape
  const int64_t R = a.numel() / N;
  for (int64_t r = 0; r < R; ++r) {
    std::vector<double> s(N);
    double mu = 0, ss = 0;
    for (int64_t i = 0; i < N; ++i) s[i] = a.v[r * N + i] + b.v[r * N + i];
    if (!rms) {
      for (double v : s) mu += v;
      mu /= N;
    }
    for (double v : s) ss += (v - mu) * (v - mu);
    const double rstd = 1.0 / std::sqrt(ss / N + eps);
    for (int64_t i = 0; i < N; ++i) {
      out.v[r * N + i] = s[i];
      out.v[a.numel() + r * N + i] = (s[i] - mu) * rstd * (w ? w->v[i] : 1.0) + (bias ? bias->v[i] : 0.0);
    }
  }
  return out;
}

// The op with both outputs stacked (2, ...), so one table row checks sum and out and the gradient
// reaching residual and branch through both.
OpCase residual_norm_case(bool rms, bool affine) {
  OpCase c;
  c.name = std::string(rms ? "residual_rms_norm" : "residual_layer_norm") + " (2,3,6) over (6)" +
           (affine ? " affine" : "");
  c.shapes = {{2, 3, 6}, {2, 3, 6}};
  if (affine) c.shapes.push_back({6});
  if (affine && !rms) c.shapes.push_back({6});
  const double eps = rms ? 1e-6 : 1e-5;
  c.op = [=](const TensorList& in) {
    Tensor w = affine ? in[2] : Tensor(), b = affine && !rms ? in[3] : Tensor();
    ResidualNorm r = rms ? residual_rms_norm(in[0], in[1], {6}, w, eps) : residual_layer_norm(in[0], in[1], {6}, w, b, eps);
    return stack({r.sum, r.out});
  };
  c.reference = [=](const std::vector<Ref>& in) {
    Ref out = ref_residual_norm(in[0], in[1], 6, affine ? &in[2] : nullptr, affine && !rms ? &in[3] : nullptr, eps, rms);
    out.shape = {2, 2, 3, 6};
    return out;
  };
  return c;
}

// loss = Σ sum · g1 + Σ out · g2, the shape of a pre-norm block's use: sum goes on as the residual.
Tensor two_output_loss(const Tensor& sum_, const Tensor& out, uint64_t seed) {
  return add(sum(mul(sum_, uniform(sum_.shape(), -1, 1, sum_.dtype(), seed))),
             sum(mul(out, uniform(out.shape(), -1, 1, out.dtype(), seed + 1))));
}

TensorList leaves(const TensorList& ts) {
  TensorList out;
  for (const Tensor& t : ts) out.push_back(t.detach().clone().requires_grad_());
  return out;
}

void check_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  CHECK(bitwise_equal(a, b));
}

// float32 gelu's backward is the one pair not held to the same bits: its composite twin itself gives
// a value different bits by where it lands. The float32 erf/exp of core/base/fast_math.h vectorise,
// and GCC contracts gelu's `cdf + x · pdf` (core/base/functors.h) into an FMA in a loop's scalar tail
// but not in its vector lanes, so an element differs by an ulp between the two — and which elements
// fall in a tail differs between the kernels (the fused backward walks column blocks). Within 2 ulp,
// and dbias within what 2 ulp per term can add up to.
bool same_bits_expected(Activation a, DType dt) { return !(a == Activation::Gelu && dt == kFloat32); }

void check_grad(const Tensor& a, const Tensor& b, const std::string& what, bool bits, double sum_terms = 1) {
  if (bits) return check_bits(a, b, what);
  INFO(what);
  CHECK_CLOSE(a, b, 3e-7 * sum_terms, 2.5e-7);
}

}  // namespace

// ---- bias_activation ----------------------------------------------------------------------------

TEST_CASE("op bias_activation: the op table for every activation") {
  for (Activation a : kActivations) {
    OpCase c = bias_activation_case(a);
    if (a == Activation::Relu)
      c.bad_inputs = {
          {"bias length", [] { bias_activation(f64({2, 5}), f64({4}), Activation::Relu); },
           "[bias_activation] bias (4) must be (N) for x (..., N), got x (2,5)"},
          {"bias 2-D", [] { bias_activation(f64({2, 5}), f64({1, 5}), Activation::Relu); },
           "[bias_activation] bias (1,5) must be (N) for x (..., N), got x (2,5)"},
          {"scalar x", [] { bias_activation(scalar_tensor(1.0, TensorOptions(kFloat64)), f64({1}), Activation::Relu); },
           "[bias_activation] bias (1) must be (N) for x (..., N), got x ()"},
          {"dtypes", [] { bias_activation(f64({2, 5}), f64({5}).to(kFloat32), Activation::Relu); },
           "[bias_activation] dtypes differ: float64 (2,5) and float32 (5)"},
          {"int64 x", [] { bias_activation(arange(4.0, kInt64), arange(4.0, kInt64), Activation::Relu); },
           "[bias_activation] expected a floating tensor"},
          {"undefined bias", [] { bias_activation(f64({2, 5}), Tensor(), Activation::Relu); },
           "[bias_activation] x and bias must be defined tensors"},
      };
    run_op_case(c);
  }
}

TEST_CASE("op bias_activation: the same bits as act(x + bias), forward and backward, on large rows") {
  // (4, 16, 2100): 2100 columns are two full column blocks of the backward (core/cpu/fused.h) and a
  // partial one, run on several threads. (4, 128, 1000): one block, so dx is computed with the rows
  // shared out and db summed afterwards (on a machine with more than one thread).
  for (int64_t width : {2100, 1000})
  for (Activation a : kActivations) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO((std::string(activation_name(a)) + " " + dtype_name(dt) + ", " + std::to_string(width) + " columns"));
      const int64_t rows = width == 1000 ? 128 : 16;
      TensorList f = leaves({uniform({4, rows, width}, -3, 3, dt, 1), uniform({width}, -1, 1, dt, 2)});
      TensorList c = leaves(f);
      Tensor y = bias_activation(f[0], f[1], a), yc = composite_bias_activation(c[0], c[1], a);
      check_bits(y, yc, "forward");
      Tensor g = uniform(y.shape(), -1, 1, dt, 3);
      y.backward(g);
      yc.backward(g);
      const bool bits = same_bits_expected(a, dt);
      check_grad(f[0].grad(), c[0].grad(), "dx", bits);
      check_grad(f[1].grad(), c[1].grad(), "dbias", bits, 4 * rows);
    }
  }
}

// gelu on the CPU keeps erf((x + b) / √2) from the forward for its backward (core/backend/fused.h):
// the backward given it equals the backward that computes it again, bit for bit, float32 and float64,
// at 1 and 2 threads; the other activations, an x over cpu::kKeepErfBytes and a forward without a
// backward to come keep nothing.
TEST_CASE("op bias_activation: gelu's kept erf gives the backward of recomputing it, bit for bit") {
  for (DType dt : {kFloat32, kFloat64})
    for (int threads : {1, 2}) {
      CAPTURE(dtype_name(dt));
      CAPTURE(threads);
      ThreadCount count(threads);
      const Tensor x = uniform({300, 257}, -5, 5, dt, 4), b = uniform({257}, -1, 1, dt, 5);
      const Tensor gy = uniform({300, 257}, -1, 1, dt, 6);
      Tensor kept;
      const Tensor y = backend::bias_activation_forward(x, b, Activation::Gelu, 300, 257, &kept);
      REQUIRE(kept.defined());
      CHECK(bitwise_equal(y, backend::bias_activation_forward(x, b, Activation::Gelu, 300, 257)));
      dispatch_float(dt, "test", [&](auto zero) {  // kept is erf(z / √2) of z = x + b rounded to the dtype
        using T = decltype(zero);
        const std::vector<T> xs = x.to_vector<T>(), bs = b.to_vector<T>(), ks = kept.to_vector<T>();
        int64_t differ = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
          const T z = static_cast<T>(xs[i] + bs[i % 257]), e = fn::rg_erf(z * T(0.70710678118654752440));
          differ += std::memcmp(&e, &ks[i], sizeof e) != 0;
        }
        CHECK(differ == 0);
      });
      const backend::BiasActivationGrads with = backend::bias_activation_backward(gy, x, b, Activation::Gelu, true, 300, 257, kept);
      const backend::BiasActivationGrads without = backend::bias_activation_backward(gy, x, b, Activation::Gelu, true, 300, 257);
      CHECK(bitwise_equal(with.dx, without.dx));
      CHECK(bitwise_equal(with.db, without.db));
      Tensor none;
      backend::bias_activation_forward(x, b, Activation::Relu, 300, 257, &none);
      CHECK_FALSE(none.defined());
      const int64_t big_rows = cpu::kKeepErfBytes / (257 * int64_t(dt == kFloat32 ? 4 : 8)) + 1;  // over the limit
      backend::bias_activation_forward(uniform({big_rows, 257}, -5, 5, dt, 7), b, Activation::Gelu, big_rows, 257, &none);
      CHECK_FALSE(none.defined());
    }
}

TEST_CASE("op bias_activation: only x or only the bias needs a gradient") {
  Tensor x = f64({3, 4}), b = f64({4}, 2);
  Tensor xg = x.clone().requires_grad_();
  bias_activation(xg, b, Activation::Gelu).sum().backward();
  Tensor xc = x.clone().requires_grad_();
  composite_bias_activation(xc, b, Activation::Gelu).sum().backward();
  check_bits(xg.grad(), xc.grad(), "dx alone");
  Tensor bg = b.clone().requires_grad_(), bc = b.clone().requires_grad_();
  bias_activation(x, bg, Activation::Gelu).sum().backward();
  composite_bias_activation(x, bc, Activation::Gelu).sum().backward();
  check_bits(bg.grad(), bc.grad(), "dbias alone");
  CHECK_FALSE(bias_activation(x, b, Activation::Gelu).requires_grad());
}

TEST_CASE("op bias_activation: dbias does not depend on the thread count") {
#ifdef _OPENMP
  // 2100 columns: three column blocks, shared out between the threads. 1000 and 40: one block, dx
  // by rows and db by parts of the columns (40 columns: fewer 16-column parts than 3 threads would take).
  for (const Shape& shape : {Shape{300, 2100}, Shape{300, 1000}, Shape{1000, 40}}) {
    INFO(shape_str(shape));
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      const ThreadCount n(threads);
      Tensor x = uniform(shape, -2, 2, kFloat32, 1).requires_grad_(), b = uniform({shape[1]}, -1, 1, kFloat32, 2).requires_grad_();
      bias_activation(x, b, Activation::Gelu).backward(uniform(shape, -1, 1, kFloat32, 3));
      std::vector<float> r = b.grad().to_vector<float>(), rx = x.grad().to_vector<float>();
      r.insert(r.end(), rx.begin(), rx.end());
      results.push_back(r);
    }
    CHECK(results[0] == results[1]);  // bit for bit
    CHECK(results[0] == results[2]);
  }
#endif
}

TEST_CASE("op bias_activation: CUDA parity on long columns (the two-stage dbias sum)") {
  if (!have_gpu()) return;
  // 600 rows: more than one chunk of the column reduction (cuda/reduce_common.cuh, kColChunk rows).
  for (Activation a : kActivations)
    for (DType dt : {kFloat64, kFloat32}) {
      CudaParityCase p;
      p.name = std::string("bias_activation (600,70) ") + activation_name(a) + " " + dtype_name(dt);
      p.inputs = {uniform({600, 70}, -3, 3, dt, 1), uniform({70}, -1, 1, dt, 2)};
      p.op = [a](const TensorList& in) { return TensorList{bias_activation(in[0], in[1], a)}; };
      if (dt == kFloat32) p.atol = 1e-4;  // dbias sums 600 float32 terms
      CHECK(check_cuda_parity(p));
      // db not wanted: the dx-only kernel.
      p.name += ", bias without gradient";
      p.op = [a](const TensorList& in) { return TensorList{bias_activation(in[0], in[1].detach(), a)}; };
      CHECK(check_cuda_parity(p));
    }
}

// ---- residual_layer_norm / residual_rms_norm -------------------------------------------------------

TEST_CASE("op residual_layer_norm and residual_rms_norm: the op table") {
  OpCase c = residual_norm_case(false, true);
  c.bad_inputs = {
      {"shapes differ", [] { residual_layer_norm(f64({2, 4}), f64({1, 4}), {4}); },
       "[residual_layer_norm] residual (2,4) and branch (1,4) must have the same shape"},
      {"dtypes differ", [] { residual_layer_norm(f64({2, 4}), f64({2, 4}).to(kFloat32), {4}); },
       "[residual_layer_norm] dtypes differ: float64 (2,4) and float32 (2,4)"},
      {"normalized_shape", [] { residual_layer_norm(f64({2, 4}), f64({2, 4}), {3}); },
       "[residual_layer_norm] normalized_shape (3) does not match the last dims of input (2,4)"},
      {"weight shape", [] { residual_layer_norm(f64({2, 4}), f64({2, 4}), {4}, f64({5})); },
       "[residual_layer_norm] weight of shape (5) does not match normalized_shape (4) (input (2,4))"},
      {"bias dtype", [] { residual_layer_norm(f64({2, 4}), f64({2, 4}), {4}, f64({4}), f64({4}).to(kFloat32)); },
       "[residual_layer_norm] bias is float32 but input is float64"},
      {"undefined branch", [] { residual_layer_norm(f64({2, 4}), Tensor(), {4}); },
       "[residual_layer_norm] residual and branch must be defined tensors"},
      {"rms shapes differ", [] { residual_rms_norm(f64({3, 4}), f64({4}), {4}); },
       "[residual_rms_norm] residual (3,4) and branch (4) must have the same shape"},
  };
  run_op_case(c);
  run_op_case(residual_norm_case(false, false));
  run_op_case(residual_norm_case(true, true));
  run_op_case(residual_norm_case(true, false));
}

TEST_CASE("op residual norms: the same bits as add then layer_norm / rms_norm, forward and backward") {
  // (8, 64, 256): rows on several threads, and dweight/dbias over several chunks.
  for (bool rms : {false, true}) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO((std::string(rms ? "rms_norm " : "layer_norm ") + dtype_name(dt)));
      const Shape xs{8, 64, 256};
      TensorList f = leaves({uniform(xs, -3, 3, dt, 1), uniform(xs, -1, 1, dt, 2), uniform({256}, 0.5, 1.5, dt, 3),
                             uniform({256}, -1, 1, dt, 4)});
      TensorList c = leaves(f);
      const double eps = rms ? -1 : 1e-5;
      ResidualNorm r = rms ? residual_rms_norm(f[0], f[1], {256}, f[2], eps)
                           : residual_layer_norm(f[0], f[1], {256}, f[2], f[3], eps);
      Tensor sc = add(c[0], c[1]);
      Tensor oc = rms ? rms_norm(sc, {256}, c[2], eps) : layer_norm(sc, {256}, c[2], c[3], eps);
      check_bits(r.sum, sc, "sum");
      check_bits(r.out, oc, "out");
      two_output_loss(r.sum, r.out, 5).backward();
      two_output_loss(sc, oc, 5).backward();
      check_bits(f[0].grad(), c[0].grad(), "d residual");
      check_bits(f[1].grad(), c[1].grad(), "d branch");
      check_bits(f[2].grad(), c[2].grad(), "d weight");
      if (!rms) check_bits(f[3].grad(), c[3].grad(), "d bias");
      CHECK(f[3].grad().defined() == !rms);  // rms_norm has no bias
    }
  }
}

TEST_CASE("op residual norms: a gradient through one output only") {
  for (bool through_sum : {false, true}) {
    INFO((std::string("through ") + (through_sum ? "sum" : "out")));
    TensorList f = leaves({f64({3, 5}), f64({3, 5}, 2), f64({5}, 3), f64({5}, 4)});
    TensorList c = leaves(f);
    ResidualNorm r = residual_layer_norm(f[0], f[1], {5}, f[2], f[3]);
    Tensor sc = add(c[0], c[1]), oc = layer_norm(sc, {5}, c[2], c[3]);
    Tensor g = uniform({3, 5}, -1, 1, kFloat64, 7);
    (through_sum ? r.sum : r.out).backward(g);
    (through_sum ? sc : oc).backward(g);
    check_bits(f[0].grad(), c[0].grad(), "d residual");
    check_bits(f[1].grad(), c[1].grad(), "d branch");
    CHECK(f[2].grad().defined() == !through_sum);
  }
  // Only the norm's parameters need a gradient: no node for the sum.
  Tensor w = f64({5}, 3).requires_grad_();
  ResidualNorm r = residual_layer_norm(f64({3, 5}), f64({3, 5}, 2), {5}, w);
  CHECK_FALSE(r.sum.requires_grad());
  CHECK(r.out.requires_grad());
}

// ---- the layers that use them ----------------------------------------------------------------------

namespace {

// The composite twins of the layers, from the layers' own modules: the code before the fusion.
Tensor composite_ff(const FeedForward& ff, const Tensor& x) {
  Tensor h = ff.fc1->forward(x);
  h = ff.activation == Activation::Gelu ? gelu_erf(h) : ff.activation == Activation::GeluTanh ? gelu_tanh(h) : relu(h);
  return ff.fc2->forward(ff.dropout->forward(h));
}

Tensor composite_encoder(const EncoderBlock& blk, const Tensor& x) {
  AttentionOptions ao;
  ao.causal = blk.options.causal;
  auto attend = [&](const Tensor& h) { return blk.self_attn->forward(h, h, ao).output; };
  auto drop = [&](const Tensor& h) { return blk.dropout->forward(h); };
  Tensor h = x;
  if (blk.options.pre_norm) {
    h = h + drop(attend(blk.norm1->forward(h)));
    return h + drop(composite_ff(*blk.ff, blk.norm2->forward(h)));
  }
  h = blk.norm1->forward(h + drop(attend(h)));
  return blk.norm2->forward(h + drop(composite_ff(*blk.ff, h)));
}

Tensor composite_decoder(const DecoderBlock& blk, const Tensor& x, const Tensor& memory) {
  AttentionOptions so;
  so.causal = true;
  AttentionOptions co;
  co.alignment = blk.cross_alignment;
  auto self = [&](const Tensor& h) { return blk.self_attn->forward(h, h, so).output; };
  auto cross = [&](const Tensor& h) { return blk.cross_attn->forward(h, memory, co).output; };
  auto drop = [&](const Tensor& h) { return blk.dropout->forward(h); };
  Tensor h = x;
  if (blk.options.pre_norm) {
    h = h + drop(self(blk.norm1->forward(h)));
    h = h + drop(cross(blk.norm2->forward(h)));
    return h + drop(composite_ff(*blk.ff, blk.norm3->forward(h)));
  }
  h = blk.norm1->forward(h + drop(self(h)));
  h = blk.norm2->forward(h + drop(cross(h)));
  return blk.norm3->forward(h + drop(composite_ff(*blk.ff, h)));
}

// Runs f(x) and twin(x) from the same dropout seed, backward of the same projection, and checks the
// output, dx and every parameter's gradient bit for bit.
void check_layer_bits(Module& m, const Tensor& x0, const std::function<Tensor(const Tensor&)>& f,
                      const std::function<Tensor(const Tensor&)>& twin, bool bits = true) {
  Tensor y[2], dx[2];
  std::vector<Tensor> grads[2];
  for (int k = 0; k < 2; ++k) {
    m.zero_grad();
    Tensor x = x0.clone().requires_grad_();
    manual_seed(17);  // the same dropout draws for both
    y[k] = k == 0 ? f(x) : twin(x);
    (y[k] * uniform(y[k].shape(), -1, 1, y[k].dtype(), 9)).sum().backward();
    dx[k] = x.grad();
    for (const auto& [name, p] : m.named_parameters()) grads[k].push_back(p.grad().defined() ? p.grad().clone() : Tensor());
  }
  check_bits(y[0], y[1], "output");
  check_grad(dx[0], dx[1], "dx", bits, 100);  // dx sums a d_ff-long product of gradients
  size_t i = 0;
  for (const auto& [name_, p] : m.named_parameters()) {
    const std::string& name = name_;
    REQUIRE(grads[0][i].defined());
    check_grad(grads[0][i], grads[1][i], "parameter " + name, bits, 100);
    ++i;
  }
}

}  // namespace

TEST_CASE("FeedForward: the fused bias and activation give the numbers of fc1 then the activation") {
  for (const char* act : {"gelu", "gelu_tanh", "relu"}) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO((std::string(act) + " " + dtype_name(dt)));
      Generator g(3);
      FeedForward ff(32, 96, activation_from_name(act, "test"), 0.1, &g);
      ff.to(dt);
      ff.train();
      check_layer_bits(ff, uniform({2, 7, 32}, -2, 2, dt, 1), [&](const Tensor& x) { return ff.forward(x); },
                       [&](const Tensor& x) { return composite_ff(ff, x); },
                       std::string(act) != "gelu" || dt != kFloat32);
    }
  }
}

TEST_CASE("EncoderBlock and DecoderBlock: the fused residual norms give the bits of the composite block") {
  for (bool pre_norm : {true, false}) {
    for (const char* norm : {"layer_norm", "rms_norm"}) {
      INFO((std::string(pre_norm ? "pre-norm " : "post-norm ") + norm));
      BlockOptions o;
      o.pre_norm = pre_norm;
      o.norm = norm_from_name(norm, "test");
      o.dropout = 0.1;
      o.causal = true;
      Generator g(5);
      EncoderBlock enc(32, 4, 64, o, nullptr, &g);
      enc.to(kFloat64);
      enc.train();
      check_layer_bits(enc, uniform({2, 6, 32}, -2, 2, kFloat64, 1), [&](const Tensor& x) { return enc.forward(x); },
                       [&](const Tensor& x) { return composite_encoder(enc, x); });
      o.causal = false;
      DecoderBlock dec(32, 4, 64, o, nullptr, nullptr, Alignment::Left, &g);
      dec.to(kFloat64);
      dec.train();
      const Tensor memory = uniform({2, 5, 32}, -1, 1, kFloat64, 2);
      check_layer_bits(dec, uniform({2, 6, 32}, -2, 2, kFloat64, 3),
                       [&](const Tensor& x) { return dec.forward(x, memory); },
                       [&](const Tensor& x) { return composite_decoder(dec, x, memory); });
    }
  }
}

TEST_CASE("layers run the fused chains on the CPU, and on a GPU only when switched on") {
  CHECK(fused_chains_on(Device::cpu()));
  CHECK_FALSE(fused_chains_on(Device::cuda()));  // the default: cuda/fused.cu not yet run on a GPU
  set_fused_chains_on_cuda(true);
  CHECK(fused_chains_on(Device::cuda()));
  set_fused_chains_on_cuda(false);
  CHECK_FALSE(fused_chains_on(Device::cuda()));
  if (!cuda_available()) return;  // (not have_gpu(): the CPU half above is no skipped test)
  // On a GPU: a block with the switch on gives the numbers of the block with it off (the composite chains).
  Generator g(4);
  FeedForward ff(32, 96, Activation::Gelu, 0.0, &g);
  ff.to(Device::cuda());
  const Tensor x = uniform({2, 7, 32}, -2, 2, kFloat32, 1).to(Device::cuda());
  const Tensor off = ff.forward(x);
  set_fused_chains_on_cuda(true);
  const Tensor on = ff.forward(x);
  set_fused_chains_on_cuda(false);
  CHECK_CLOSE(on.to(Device::cpu()), off.to(Device::cpu()), 1e-6, 1e-5);
}
