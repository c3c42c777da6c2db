// The fused relative attention (flash_relative_attention, autograd/ops.h) against its composite twin
//   q·kᵀ + relative_gather(q_rel·Eᵀ, C) → masked_softmax(·, mask, scale, relative_gather(bias, C_b)) → ·v
// forward and backward, for every scheme's lookup (none, full-range skewed table, Huang's causal table,
// Shaw's clip, T5 buckets, ALiBi distances, Transformer-XL's separate relative query), causal or not,
// t2 ≠ t1 with left / right / scaled / explicit positions, key padding with fully masked rows, sizes
// that are not multiples of the tiles; gradcheck; MultiHeadAttention with fused on equals fused off;
// clear errors; and on a GPU, CUDA against the CPU kernel and a long sequence against the composite.
#include <limits>
#include <memory>

#include "attention_testing.h"
#include "core/backend/flash_attention.h"
#include "core/cpu/flash_attention.h"
#include "core/cpu/gemm_library.h"
#include "cuda_testing.h"
#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "layers/rotary.h"
#include "layers/transformer_xl.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

enum class Scheme { None, Seed, Huang, Shaw, T5, ALiBi, TXL };
const char* scheme_name(Scheme s) {
  switch (s) {
    case Scheme::None: return "none";
    case Scheme::Seed: return "seed";
    case Scheme::Huang: return "huang";
    case Scheme::Shaw: return "shaw";
    case Scheme::T5: return "t5";
    case Scheme::ALiBi: return "alibi";
    case Scheme::TXL: return "txl";
  }
  return "?";
}

// π(i): 0 left, 1 right, 2 scaled, 3 explicit (also before 0 and after t1 − 1).
std::vector<int64_t> positions_for(int kind, int64_t t2, int64_t t1) {
  std::vector<int64_t> p(static_cast<size_t>(t2));
  for (int64_t i = 0; i < t2; ++i) {
    if (kind == 0) p[i] = i;
    else if (kind == 1) p[i] = i + t1 - t2;
    else if (kind == 2) p[i] = (i * t1) / t2;
    else p[i] = (i * 7 + 3) % (t1 + 4) - 2;
  }
  return p;
}

// One configuration: the fused op's inputs and options, written out independently of the layers.
struct Case {
  Tensor q, k, v;
  FlashAttentionOptions f;
  std::vector<int64_t> pos;
};

Case make_case(Scheme scheme, bool causal, int kind, int64_t t2, int64_t t1, bool pad, DType dt, bool shared = false,
               int64_t B = 2, int64_t H = 2, int64_t D = 8) {
  Case c;
  uint64_t seed = 17 + static_cast<uint64_t>(scheme) * 5 + static_cast<uint64_t>(kind) + (causal ? 100 : 0);
  c.q = uniform({B, H, t2, D}, -1, 1, dt, seed);
  c.k = uniform({B, H, t1, D}, -1, 1, dt, seed + 1);
  c.v = uniform({B, H, t1, D}, -1, 1, dt, seed + 2);
  c.pos = positions_for(kind, t2, t1);
  FlashAttentionOptions& f = c.f;
  f.causal = causal;
  f.query_positions = from_vector(c.pos, {t2});
  int64_t pmin = 0, pmax = 0;
  if (t2 > 0) {
    pmin = *std::min_element(c.pos.begin(), c.pos.end());
    pmax = *std::max_element(c.pos.begin(), c.pos.end());
  }
  const int64_t min_delta = -pmax, W = t1 + pmax - pmin;
  f.min_delta = min_delta;
  std::vector<int64_t> rows(static_cast<size_t>(W));
  auto table = [&](int64_t R) { return uniform(shared ? Shape{R, D} : Shape{H, R, D}, -1, 1, dt, seed + 3); };
  switch (scheme) {
    case Scheme::None: break;
    case Scheme::Seed: {  // t3 = 40: distances beyond ±39 get no term (Zero)
      const int64_t t3 = 40;
      for (int64_t w = 0; w < W; ++w) {
        const int64_t d = min_delta + w;
        rows[w] = (causal && d > 0) || d < -(t3 - 1) || d > t3 - 1 ? -1 : d + t3 - 1;
      }
      f.rel_table = table(2 * t3 - 1);
      f.rel_rows = from_vector(rows, {W});
      break;
    }
    case Scheme::Huang: {  // t3 = 50 past rows, δ ∈ [−49, 0]
      const int64_t t3 = 50;
      for (int64_t w = 0; w < W; ++w) {
        const int64_t d = min_delta + w;
        rows[w] = d > 0 || d < -(t3 - 1) ? -1 : d + t3 - 1;
      }
      f.rel_table = table(t3);
      f.rel_rows = from_vector(rows, {W});
      break;
    }
    case Scheme::Shaw: {  // k = 3, clipped
      const int64_t k = 3;
      for (int64_t w = 0; w < W; ++w) rows[w] = std::clamp<int64_t>(min_delta + w, -k, k) + k;
      f.rel_table = table(2 * k + 1);
      f.rel_rows = from_vector(rows, {W});
      break;
    }
    case Scheme::T5: {
      for (int64_t w = 0; w < W; ++w) rows[w] = t5_relative_bucket(min_delta + w, !causal, 8, 16);
      f.bias_table = uniform(shared ? Shape{8} : Shape{H, 8}, -2, 2, dt, seed + 4);
      f.bias_rows = from_vector(rows, {W});
      f.scale = 1.0;
      break;
    }
    case Scheme::ALiBi: {
      std::vector<double> slopes = alibi_slopes(H), bias(static_cast<size_t>(H * W));
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const int64_t d = min_delta + w;
          bias[h * W + w] = -slopes[h] * static_cast<double>(causal ? (d <= 0 ? -d : 0) : std::abs(d));
        }
      for (int64_t w = 0; w < W; ++w) rows[w] = w;
      f.bias_table = from_vector(bias, {H, W}).to(dt);
      f.bias_rows = from_vector(rows, {W});
      break;
    }
    case Scheme::TXL: {  // exact range, separate relative query (q + v), per-head table
      const int64_t max_past = std::max<int64_t>(0, pmax), max_future = causal ? 0 : std::max<int64_t>(0, t1 - 1 - pmin);
      for (int64_t w = 0; w < W; ++w) {
        const int64_t d = min_delta + w;
        rows[w] = causal && d > 0 ? -1 : d + max_past;
      }
      f.rel_table = uniform({H, max_past + max_future + 1, D}, -1, 1, dt, seed + 5);
      f.rel_rows = from_vector(rows, {W});
      f.rel_query = uniform({B, H, t2, D}, -1, 1, dt, seed + 6);
      break;
    }
  }
  if (pad) {  // batch 0: a few padded keys; batch 1 (if any): every key padded (rows fully masked)
    std::vector<bool> m(static_cast<size_t>(B * t1), false);
    for (int64_t j = 0; j < t1; ++j) {
      m[j] = j % 5 == 3 || j == t1 - 1;
      for (int64_t b = 1; b < B; ++b) m[b * t1 + j] = b == 1;
    }
    f.key_padding_mask = from_vector<bool>(m, {B, t1});
  }
  return c;
}

// The composite twin: (t2, t1) index maps from the same lookups, relative_gather, masked_softmax, matmul.
Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qr, const Tensor& E,
                 const Tensor& bias, const Case& c) {
  const FlashAttentionOptions& f = c.f;
  const int64_t B = q.size(0), t2 = q.size(2), t1 = k.size(2), D = q.size(3);
  auto index = [&](const Tensor& lookup) {
    std::vector<int64_t> L = lookup.to_vector<int64_t>(), C(static_cast<size_t>(t2 * t1));
    for (int64_t i = 0; i < t2; ++i)
      for (int64_t j = 0; j < t1; ++j) {
        const int64_t w = j - c.pos[i] - f.min_delta;
        C[i * t1 + j] = w >= 0 && w < static_cast<int64_t>(L.size()) ? L[w] : -1;
      }
    return from_vector(C, {t2, t1});
  };
  Tensor logits = matmul(q, k.transpose(-1, -2));
  if (E.defined()) {
    Tensor P = matmul(qr.defined() ? qr : q, E.transpose(-1, -2));  // (B, H, t2, R)
    logits = logits + relative_gather(P, index(f.rel_rows), E.size(-2));
  }
  Tensor b;
  if (bias.defined()) {
    Tensor t = bias.dim() == 1 ? bias.reshape({1, bias.size(0)}) : bias;  // (Hb, Rb)
    Tensor p = t.unsqueeze(1).expand({t.size(0), t2, t.size(1)});
    b = relative_gather(p, index(f.bias_rows), t.size(1)).unsqueeze(0);  // (1, Hb, t2, t1)
  }
  Tensor mask;
  if (f.causal) {
    std::vector<bool> m(static_cast<size_t>(t2 * t1));
    for (int64_t i = 0; i < t2; ++i)
      for (int64_t j = 0; j < t1; ++j) m[i * t1 + j] = j > c.pos[i];
    mask = from_vector<bool>(m, {1, 1, t2, t1});
  }
  if (f.key_padding_mask.defined()) {
    Tensor pad = f.key_padding_mask.reshape({B, 1, 1, t1});
    mask = mask.defined() ? where(mask, mask, pad) : pad;
  }
  const double scale = f.scale < 0 ? 1.0 / std::sqrt(static_cast<double>(D)) : f.scale;
  if (mask.defined()) mask = mask.to(q.device());
  return matmul(masked_softmax(logits, mask, scale, b), v);
}

// Leaves: q, k, v, then rel_query, rel_table, bias_table when given.
TensorList leaves(const Case& c) {
  TensorList in{c.q, c.k, c.v};
  for (const Tensor& t : {c.f.rel_query, c.f.rel_table, c.f.bias_table})
    if (t.defined()) in.push_back(t);
  for (Tensor& t : in) t = t.detach().clone().requires_grad_();
  return in;
}

// Runs the fused op or the composite on leaves `in` (order of leaves()).
Tensor run(const Case& c, const TensorList& in, bool fused) {
  size_t n = 3;
  Tensor qr = c.f.rel_query.defined() ? in[n++] : Tensor();
  Tensor E = c.f.rel_table.defined() ? in[n++] : Tensor();
  Tensor bias = c.f.bias_table.defined() ? in[n++] : Tensor();
  if (!fused) return composite(in[0], in[1], in[2], qr, E, bias, c);
  FlashAttentionOptions f = c.f;
  f.rel_query = qr, f.rel_table = E, f.bias_table = bias;
  return flash_relative_attention(in[0], in[1], in[2], f);
}

void check_case(const Case& c, const std::string& what) {
  INFO(what);
  const DType dt = c.q.dtype();
  const Tolerance tol = tolerance_for(dt);
  TensorList a = leaves(c), b = leaves(c);
  Tensor out_f = run(c, a, true), out_c = run(c, b, false);
  CHECK_CLOSE(out_f, out_c, tol.atol, tol.rtol);
  Tensor w = uniform(out_c.shape(), -1, 1, dt, 77);
  sum(mul(out_f, w)).backward();
  sum(mul(out_c, w)).backward();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("gradient of leaf ", i);
    REQUIRE(a[i].grad().defined());
    REQUIRE(b[i].grad().defined());
    CHECK_CLOSE(a[i].grad(), b[i].grad(), tol.atol, tol.rtol);
  }
}

const Scheme kSchemes[] = {Scheme::None, Scheme::Seed, Scheme::Huang, Scheme::Shaw, Scheme::T5, Scheme::ALiBi, Scheme::TXL};

}  // namespace

TEST_CASE("flash_relative_attention: every scheme, causal or not, every alignment, float64 (1e-12)") {
  // (t2, t1) with sizes off the 64-row tiles; alignment kinds 0 left, 1 right, 2 scaled, 3 explicit.
  const struct { int64_t t2, t1; int kind; } shapes[] = {{70, 70, 0}, {37, 131, 1}, {131, 37, 0}, {45, 100, 2},
                                                      {66, 70, 3}, {1, 65, 1}};
  for (Scheme s : kSchemes)
    for (bool causal : {false, true}) {
      if (s == Scheme::Huang && !causal) continue;  // Huang's table has no future rows
      for (const auto& sh : shapes)
        for (bool pad : {false, true}) {
          std::string what = std::string(scheme_name(s)) + (causal ? " causal" : "") + " t2=" + std::to_string(sh.t2) +
                             " t1=" + std::to_string(sh.t1) + " kind=" + std::to_string(sh.kind) + (pad ? " pad" : "");
          check_case(make_case(s, causal, sh.kind, sh.t2, sh.t1, pad, kFloat64), what);
        }
    }
}

TEST_CASE("flash_relative_attention: shared tables and float32 (1e-5)") {
  for (Scheme s : kSchemes)
    for (bool causal : {false, true}) {
      if (s == Scheme::Huang && !causal) continue;
      std::string what = std::string(scheme_name(s)) + (causal ? " causal" : "");
      if (s != Scheme::None && s != Scheme::ALiBi && s != Scheme::TXL)
        check_case(make_case(s, causal, 1, 50, 90, true, kFloat64, /*shared=*/true), what + " shared float64");
      check_case(make_case(s, causal, 0, 100, 100, true, kFloat32), what + " float32");
      check_case(make_case(s, causal, 1, 20, 150, false, kFloat32, false, 1, 3, 16), what + " float32 D=16");
    }
}

TEST_CASE("flash_relative_attention: fully masked rows output 0 with zero gradient") {
  // Right alignment with t2 > t1 puts the first queries before key 0 (causal: nothing visible), and
  // batch 1 has every key padded.
  Case c = make_case(Scheme::Seed, true, 1, 80, 30, true, kFloat64);
  TensorList in = leaves(c);
  Tensor out = run(c, in, true);
  sum(mul(out, uniform(out.shape(), -1, 1, kFloat64, 3))).backward();
  std::vector<double> o = out.to_vector<double>(), gq = in[0].grad().to_vector<double>();
  const int64_t H = 2, t2 = 80, D = 8;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < t2; ++i)
      for (int64_t d = 0; d < D; ++d) {
        const bool empty_row = i < 50;  // π(i) = i − 50 < 0
        for (int64_t b = 0; b < 2; ++b) {
          const int64_t at = ((b * H + h) * t2 + i) * D + d;
          if (b == 1 || empty_row) {
            CHECK(o[at] == 0.0);
            CHECK(gq[at] == 0.0);
          }
        }
      }
  check_case(c, "the same against the composite");
}

TEST_CASE("flash_relative_attention: gradcheck (float64, several tiles, table + bias + padding)") {
  // t1 = 67: two key tiles; the table, the bias and a separate relative query all at once.
  Case c = make_case(Scheme::Seed, true, 1, 5, 67, true, kFloat64, false, 2, 2, 3);
  Case t5 = make_case(Scheme::T5, true, 1, 5, 67, false, kFloat64, false, 2, 2, 3);
  c.f.bias_table = t5.f.bias_table;
  c.f.bias_rows = t5.f.bias_rows;
  c.f.rel_query = uniform({2, 2, 5, 3}, -1, 1, kFloat64, 9);
  TensorList in = leaves(c);
  GradcheckResult r = gradcheck([&](const TensorList& x) { return run(c, x, true); }, in);
  CHECK_MESSAGE(r.ok, r.message);
  // Bidirectional Shaw, more queries than one tile.
  Case s = make_case(Scheme::Shaw, false, 3, 66, 4, false, kFloat64, true, 1, 1, 2);
  GradcheckResult r2 = gradcheck([&](const TensorList& x) { return run(s, x, true); }, leaves(s));
  CHECK_MESSAGE(r2.ok, r2.message);
}

TEST_CASE("flash_relative_attention: deterministic (bitwise) across runs") {
  Case c = make_case(Scheme::Shaw, false, 0, 130, 130, true, kFloat32);
  auto once = [&] {
    TensorList in = leaves(c);
    Tensor out = run(c, in, true);
    sum(mul(out, uniform(out.shape(), -1, 1, kFloat32, 5))).backward();
    return TensorList{out, in[0].grad(), in[1].grad(), in[2].grad(), in[3].grad()};
  };
  TensorList a = once(), b = once();
  for (size_t i = 0; i < a.size(); ++i) CHECK(bitwise_equal(a[i], b[i]));
}

TEST_CASE("flash_relative_attention: bad inputs throw naming the op and the shapes") {
  Case c = make_case(Scheme::Seed, false, 0, 6, 6, false, kFloat64);
  auto call = [&](FlashAttentionOptions f, Tensor q, Tensor k, Tensor v) { flash_relative_attention(q, k, v, f); };
  check_throws_with([&] { call(c.f, c.q.reshape({2, 2, 48}), c.k, c.v); }, "flash_relative_attention");
  check_throws_with([&] { call(c.f, c.q, c.k.narrow(3, 0, 4), c.v); }, "(2,2,6,4)");
  check_throws_with([&] { call(c.f, c.q.to(kFloat32), c.k, c.v); }, "dtypes differ");
  FlashAttentionOptions f = c.f;
  f.rel_rows = Tensor();
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "needs rel_rows");
  f = c.f;
  f.rel_rows = full({11}, 500, kInt64);
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "outside a table of 79 rows");
  f = c.f;
  f.rel_rows = c.f.rel_rows.narrow(0, 0, 5);  // covers too few distances
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "reaches relative positions");
  f = c.f;
  f.rel_table = uniform({3, 79, 8}, -1, 1, kFloat64);
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "has 3 heads");
  f = c.f;
  f.key_padding_mask = zeros({2, 5}, kBool);
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "key_padding_mask must be bool (B, t1) = (2, 6)");
  f = c.f;
  f.query_positions = from_vector<int64_t>({0, 1}, {2});
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "query_positions must be int64 (6)");
  f = c.f;
  f.rel_query = uniform({2, 2, 5, 8}, -1, 1, kFloat64);
  check_throws_with([&] { call(f, c.q, c.k, c.v); }, "rel_query must have q's shape");
}

// ---- the layer: fused on equals fused off ----

namespace {

std::shared_ptr<PositionalScheme> make_scheme(Scheme s, bool causal, int64_t C, int64_t H, Generator* g) {
  const int64_t D = C / H;
  switch (s) {
    case Scheme::None: return nullptr;
    case Scheme::Seed: return std::make_shared<SeedRelativeEmbedding>(D, 12, H, OutOfRange::Zero, g);
    case Scheme::Huang: return std::make_shared<HuangRelativeEmbedding>(D, 9, 0, OutOfRange::Clip, g);
    case Scheme::Shaw: return std::make_shared<ShawRelativeEmbedding>(D, 3, 0, /*values=*/false, g);
    case Scheme::T5: return std::make_shared<T5RelativeBias>(H, 8, 16, !causal, g);
    case Scheme::ALiBi: return std::make_shared<ALiBi>(H, !causal);
    case Scheme::TXL: return std::make_shared<TransformerXL>(C, H, g);
  }
  return nullptr;
}

}  // namespace

TEST_CASE("MultiHeadAttention: fused on equals fused off for every scheme (float64)") {
  const int64_t C = 16, H = 2, B = 2;
  const Scheme schemes[] = {Scheme::None, Scheme::Seed, Scheme::Huang, Scheme::Shaw, Scheme::T5, Scheme::ALiBi, Scheme::TXL};
  for (Scheme s : schemes)
    for (int mode = 0; mode < 3; ++mode) {  // 0 causal self, 1 bidirectional self + padding, 2 cross right-aligned
      const bool causal = mode == 0;
      if (s == Scheme::Huang && !causal) continue;
      if (s == Scheme::TXL && mode == 2) continue;  // Transformer-XL is self-attention
      INFO(scheme_name(s), " mode ", mode);
      Generator init(3);
      auto m = std::make_shared<MultiHeadAttention>(C, H, make_scheme(s, causal, C, H, &init), 0.0, true, &init);
      m->to(kFloat64);
      const int64_t t2 = 70, t1 = mode == 2 ? 23 : 70;
      Tensor x = uniform({B, t2, C}, -1, 1, kFloat64, 5);
      Tensor mem = mode == 2 ? uniform({B, t1, C}, -1, 1, kFloat64, 6) : x;
      AttentionOptions o;
      o.causal = causal;
      if (mode == 2) o.alignment = Alignment::Right;
      if (mode >= 1) {
        std::vector<bool> pad(static_cast<size_t>(B * t1), false);
        for (int64_t j = 0; j < t1; ++j) pad[t1 + j] = j >= t1 - 4;
        o.key_padding_mask = from_vector<bool>(pad, {B, t1});
      }
      m->core = AttentionCore::Composite;
      TensorList ref = layer_run(*m, x, mem, o);
      m->core = AttentionCore::Fused;
      TensorList got = layer_run(*m, x, mem, o);
      REQUIRE(ref.size() == got.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("tensor ", i);
        CHECK_CLOSE(got[i], ref[i], 1e-12, 1e-10);
      }
    }
}

TEST_CASE("MultiHeadAttention: fused with RoPE, KV-cached decoding, and the fallbacks") {
  const int64_t C = 16, H = 2, B = 1, t = 9;
  Generator init(4);
  auto rope = std::make_shared<MultiHeadAttention>(C, H, std::make_shared<RoPE>(C / H), 0.0, true, &init);
  rope->to(kFloat64);
  Tensor x = uniform({B, t, C}, -1, 1, kFloat64, 8);
  AttentionOptions o;
  o.causal = true;
  rope->core = AttentionCore::Composite;
  Tensor ref = rope->forward(x, x, o).output;
  rope->core = AttentionCore::Fused;
  CHECK_CLOSE(rope->forward(x, x, o).output, ref, 1e-12, 1e-10);
  // Incremental decoding with the fused core: the same logits as the full causal pass.
  KVCache cache;
  Tensor first = rope->forward(x.narrow(1, 0, 5), cache, o).output;
  Tensor rest = rope->forward(x.narrow(1, 5, 4), cache, o).output;
  CHECK_CLOSE(cat({first, rest}, 1), ref, 1e-12, 1e-10);
  // Shaw with values, need_weights and dropout in training use the composite path (and still work).
  auto shaw = std::make_shared<MultiHeadAttention>(C, H, std::make_shared<ShawRelativeEmbedding>(C / H, 2), 0.1,
                                                   true, &init);
  shaw->to(kFloat64);
  shaw->core = AttentionCore::Fused;
  o.need_weights = true;
  AttentionOutput a = shaw->forward(x, x, o);
  CHECK(a.weights.defined());
  shaw->eval();
  o.need_weights = false;
  Tensor fused_out = shaw->forward(x, x, o).output;
  shaw->core = AttentionCore::Composite;
  CHECK_CLOSE(fused_out, shaw->forward(x, x, o).output, 1e-12, 1e-10);
}

TEST_CASE("MultiHeadAttention: AttentionCore::Auto (model.fused_attention = auto) picks by the rule, same results") {
  // The rule (layers/attention.h, fused_core_pays): the composite core unless one (B, H, t2, t1)
  // tensor exceeds the limit, on the CPU and on a GPU (on_gpu below). Here the limit is set around the
  // call's own size, so the same layer takes both cores; both must give the composite's results.
  const int64_t C = 16, H = 2, B = 2, t = 40;
  Generator init(5);
  auto m = std::make_shared<MultiHeadAttention>(C, H, make_scheme(Scheme::Seed, true, C, H, &init), 0.0, true, &init);
  m->to(kFloat64);
  Tensor x = uniform({B, t, C}, -1, 1, kFloat64, 9);
  AttentionOptions o;
  o.causal = true;
  TensorList ref = layer_run(*m, x, x, o);
  CHECK_FALSE(m->last_call_fused);
  const size_t scores = size_t(B * H * t * t) * sizeof(double);  // one (B, H, t2, t1) float64 tensor
  Tensor q = zeros({B, H, t, C / H}, kFloat64);
  CHECK_FALSE(fused_core_pays(q, t, scores));  // at the limit: composite
  CHECK(fused_core_pays(q, t, scores - 1));    // above it: fused
  CHECK_FALSE(fused_core_pays(q, t));          // the default limit, 1/64 of this machine's memory
  // The same rule from the sizes alone (the memory bound of relgrad train asks it before any tensor exists).
  CHECK_FALSE(fused_core_pays(B, H, t, t, kFloat64, Device::cpu(), scores));
  CHECK(fused_core_pays(B, H, t, t, kFloat64, Device::cpu(), scores - 1));
  CHECK_FALSE(fused_core_pays(B, H, t, t, kFloat64, Device::cpu()));
  m->core = AttentionCore::Auto;
  m->fused_auto_limit_bytes = scores;
  TensorList composite = layer_run(*m, x, x, o);
  CHECK_FALSE(m->last_call_fused);
  m->fused_auto_limit_bytes = scores - 1;
  TensorList fused = layer_run(*m, x, x, o);
  CHECK(m->last_call_fused);
  REQUIRE(fused.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("tensor ", i);
    CHECK(bitwise_equal(composite[i], ref[i]));
    CHECK_CLOSE(fused[i], ref[i], 1e-12, 1e-10);
  }
  // Dropout while training, need_weights: the composite core whatever the rule says.
  m->train();
  m->dropout = 0.1;
  layer_run(*m, x, x, o);
  CHECK_FALSE(m->last_call_fused);
  if (!cuda_available()) return;  // (not have_gpu(): the CPU half above is no skipped test)
  // on_gpu: the same rule against the GPU's memory (1/64 of it by default).
  Tensor qg = q.to(Device::cuda());
  CHECK_FALSE(fused_core_pays(qg, t, scores));
  CHECK(fused_core_pays(qg, t, scores - 1));
  CHECK_FALSE(fused_core_pays(qg, t));
  const size_t gpu = device_memory_bytes(Device::cuda());
  CHECK(gpu > 0);
  const int64_t t_big = static_cast<int64_t>(gpu / 64 / (size_t(B * H * t) * sizeof(double))) + 1;
  CHECK(fused_core_pays(qg, t_big));  // one (B, H, t, t_big) float64 tensor above 1/64 of the GPU
}

TEST_CASE("MultiHeadAttention: auto takes the fused core where this machine's kernels train it faster") {
  // flash_attention_faster (autograd/ops.h; core/backend/flash_attention.h): on the CPU from
  // kFlashFasterMinKeys keys, where the backward runs in one pass (B·H ≥ 2 tasks per core) and the
  // tiles' GEMM is not Eigen's; never on a GPU. fused_core_pays takes it before the memory rule
  // (the limit here is too large to decide).
  const cpu::GemmLibrary saved = cpu::gemm_library();
  const size_t no_limit = std::numeric_limits<size_t>::max();
  const int64_t H = 4, B = 64, min_keys = backend::kFlashFasterMinKeys;
  REQUIRE(cpu::flash_backward_choice(B, H) == cpu::FlashBackward::OnePass);  // 256 tasks: up to 128 cores
  REQUIRE(cpu::flash_backward_choice(1, 1) == cpu::FlashBackward::TwoPass);
  for (cpu::GemmLibrary library : cpu::kGemmLibraries) {
    if (!cpu::gemm_library_available(library)) continue;
    cpu::set_gemm_library(library);
    const bool tuned = library != cpu::GemmLibrary::Eigen;
    CAPTURE(cpu::gemm_library_name(library));
    CHECK(flash_attention_faster(B, H, min_keys, Device::cpu()) == tuned);
    CHECK(fused_core_pays(B, H, min_keys, min_keys, kFloat32, Device::cpu(), no_limit) == tuned);
    CHECK(fused_core_pays(B, H, 1, 4 * min_keys, kFloat32, Device::cpu(), no_limit) == tuned);  // keys count
    CHECK_FALSE(flash_attention_faster(B, H, min_keys - 1, Device::cpu()));
    CHECK_FALSE(fused_core_pays(B, H, min_keys - 1, min_keys - 1, kFloat32, Device::cpu(), no_limit));
    CHECK_FALSE(flash_attention_faster(1, 1, 4 * min_keys, Device::cpu()));  // two passes: not faster
    CHECK_FALSE(flash_attention_faster(B, H, 4 * min_keys, Device::cuda()));
  }
  cpu::set_gemm_library(saved);
}

// ---- GPU: the CUDA kernels against the CPU kernel, and a long sequence against the composite ----

TEST_CASE("flash_relative_attention: CUDA matches the CPU kernel") {
  if (!have_gpu()) return;
  const struct { Scheme s; bool causal; int kind; int64_t t2, t1; bool pad; DType dt; } cases[] = {
      {Scheme::None, false, 0, 70, 70, false, kFloat32},  {Scheme::Seed, true, 0, 131, 131, true, kFloat32},
      {Scheme::Seed, false, 1, 37, 300, true, kFloat64},  {Scheme::Huang, true, 1, 200, 257, false, kFloat32},
      {Scheme::Shaw, false, 3, 66, 70, true, kFloat64},   {Scheme::T5, true, 0, 1000, 1000, false, kFloat32},
      {Scheme::ALiBi, false, 2, 45, 100, true, kFloat32}, {Scheme::TXL, true, 1, 7, 1001, true, kFloat64},
      {Scheme::TXL, false, 0, 1, 1, false, kFloat32},     {Scheme::Seed, false, 0, 0, 5, false, kFloat32},
  };
  for (const auto& k : cases) {
    Case c = make_case(k.s, k.causal, k.kind, k.t2, k.t1, k.pad, k.dt);
    CudaParityCase p;
    p.name = std::string(scheme_name(k.s)) + " t2=" + std::to_string(k.t2) + " t1=" + std::to_string(k.t1);
    p.inputs = leaves(c);
    for (Tensor& t : p.inputs) t = t.detach();
    p.op = [c](const TensorList& in) {
      Case d = c;  // the options' index tensors follow the inputs' device
      if (d.f.key_padding_mask.defined()) d.f.key_padding_mask = d.f.key_padding_mask.to(in[0].device());
      return TensorList{run(d, in, true)};
    };
    CHECK(check_cuda_parity(p));
  }
  // Head sizes at the kernels' limit and odd ones, more batches than the table pass's groups.
  const struct { Scheme s; bool causal; int kind; int64_t t2, t1; DType dt; int64_t B, H, D; } wide[] = {
      {Scheme::Shaw, true, 0, 257, 257, kFloat64, 3, 3, 128},
      {Scheme::Seed, false, 1, 100, 140, kFloat32, 9, 2, 33},
      {Scheme::T5, false, 3, 64, 64, kFloat32, 17, 1, 16},
  };
  for (const auto& k : wide) {
    Case c = make_case(k.s, k.causal, k.kind, k.t2, k.t1, false, k.dt, false, k.B, k.H, k.D);
    CudaParityCase p;
    p.name = std::string(scheme_name(k.s)) + " B=" + std::to_string(k.B) + " D=" + std::to_string(k.D);
    p.inputs = leaves(c);
    for (Tensor& t : p.inputs) t = t.detach();
    p.op = [c](const TensorList& in) { return TensorList{run(c, in, true)}; };
    CHECK(check_cuda_parity(p));
  }
  // Determinism on the GPU: two runs, bitwise equal outputs and gradients.
  Case c = make_case(Scheme::Seed, false, 0, 300, 300, true, kFloat32);
  auto once = [&] {
    TensorList in = leaves(c);
    for (Tensor& t : in) t = t.detach().to(Device::cuda()).requires_grad_();
    Case d = c;
    d.f.key_padding_mask = d.f.key_padding_mask.to(Device::cuda());
    Tensor out = run(d, in, true);
    sum(mul(out, uniform(out.shape(), -1, 1, kFloat32, 5).to(Device::cuda()))).backward();
    return TensorList{out, in[0].grad(), in[1].grad(), in[3].grad()};
  };
  TensorList a = once(), b = once();
  for (size_t i = 0; i < a.size(); ++i) CHECK(bitwise_equal(a[i].to(Device::cpu()), b[i].to(Device::cpu())));
}

TEST_CASE("flash_relative_attention: CUDA long sequence (t = 2048) matches the composite") {
  if (!have_gpu()) return;
  Case c = make_case(Scheme::Seed, true, 0, 2048, 2048, false, kFloat32, false, 1, 2, 64);
  TensorList a = leaves(c), b = leaves(c);
  for (TensorList* l : {&a, &b})
    for (Tensor& t : *l) t = t.detach().to(Device::cuda()).requires_grad_();
  Tensor out_f = run(c, a, true), out_c = run(c, b, false);
  CHECK_CLOSE(out_f.to(Device::cpu()), out_c.to(Device::cpu()), 2e-5, 2e-4);
  Tensor w = uniform(out_c.shape(), -1, 1, kFloat32, 4).to(Device::cuda());
  sum(mul(out_f, w)).backward();
  sum(mul(out_c, w)).backward();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("gradient of leaf ", i);
    CHECK_CLOSE(a[i].grad().to(Device::cpu()), b[i].grad().to(Device::cpu()), 1e-4, 1e-3);
  }
}
