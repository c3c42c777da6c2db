// The fused core's test problems on the CPU, shared by tests/test_flash_table_grads.cpp and
// tests/test_flash_in_place.cpp: a geometry (sizes, alignment of the queries, clipped tables, bias,
// separate relative query, padding) becomes the op's inputs and lookups; the op or its composite twin
//   q·kᵀ + relative_gather(q_rel·Eᵀ, C) → masked_softmax(·, mask, scale, relative_gather(bias, C_b)) → ·v
// runs on them forward and backward; the backward's loop order and the thread count are forced per scope.
#pragma once

#include <algorithm>
#include <string>

#include "core/cpu/flash_attention.h"
#include "testing.h"
#include "thread_count.h"

namespace relgrad::testing::flash {

enum class Align { Left, Right, Scaled, Explicit };

using cpu::FlashBackward;
inline constexpr FlashBackward kPaths[] = {FlashBackward::TwoPass, FlashBackward::OnePass};
inline const char* path_name(FlashBackward p) { return p == FlashBackward::OnePass ? "one pass" : "two passes"; }

// Runs the fused backward in loop order `p` until the end of the scope.
struct ForcePath {
  explicit ForcePath(FlashBackward p) { cpu::set_flash_backward(p); }
  ~ForcePath() { cpu::set_flash_backward(FlashBackward::Auto); }
};

struct Geometry {
  int64_t B = 2, H = 2, t2 = 70, t1 = 70, D = 8;
  bool causal = false, pad = false;
  Align align = Align::Left;
  int64_t clip_E = 3, clip_b = 2;  // E rows clamp(δ, −clip_E, clip_E); bias columns likewise; 0: none
  bool shared_E = false, shared_b = false, separate_query = false;
  bool full_E = false;  // E: one row per distance instead of the clipped table
  uint64_t seed = 1;
};

inline std::vector<int64_t> positions(const Geometry& g) {
  std::vector<int64_t> p(static_cast<size_t>(g.t2));
  for (int64_t i = 0; i < g.t2; ++i) {
    switch (g.align) {
      case Align::Left: p[i] = i; break;
      case Align::Right: p[i] = i + g.t1 - g.t2; break;
      case Align::Scaled: p[i] = (i * g.t1) / g.t2; break;
      case Align::Explicit: p[i] = (i * 7 + 3) % (g.t1 + 4) - 2; break;  // also before 0 and after t1 − 1
    }
  }
  return p;
}

struct Case {
  Geometry g;
  std::vector<int64_t> pos;
  FlashAttentionOptions f;
  TensorList leaves;  // q, k, v, then rel_query, rel_table, bias_table when present
};

inline Case make_case(const Geometry& g, DType dt) {
  Case c;
  c.g = g;
  c.pos = positions(g);
  const auto [lo, hi] = std::minmax_element(c.pos.begin(), c.pos.end());
  const int64_t min_delta = -*hi, W = g.t1 + *hi - *lo;
  std::vector<int64_t> rows(static_cast<size_t>(W)), brows(static_cast<size_t>(W));
  for (int64_t w = 0; w < W; ++w) {
    const int64_t d = min_delta + w;
    rows[w] = g.full_E ? w : std::clamp(d, -g.clip_E, g.clip_E) + g.clip_E;
    brows[w] = d % 5 == 2 ? -1 : std::clamp(d, -g.clip_b, g.clip_b) + g.clip_b;  // some distances: no bias
  }
  const int64_t R = g.full_E ? W : 2 * g.clip_E + 1, Rb = 2 * g.clip_b + 1;
  FlashAttentionOptions& f = c.f;
  f.causal = g.causal;
  f.query_positions = from_vector(c.pos, {g.t2});
  f.min_delta = min_delta;
  if (g.clip_E > 0 || g.full_E) {
    f.rel_table = uniform(g.shared_E ? Shape{R, g.D} : Shape{g.H, R, g.D}, -1, 1, dt, g.seed + 3);
    f.rel_rows = from_vector(rows, {W});
    if (g.separate_query) f.rel_query = uniform({g.B, g.H, g.t2, g.D}, -1, 1, dt, g.seed + 4);
  }
  if (g.clip_b > 0) {
    f.bias_table = uniform(g.shared_b ? Shape{Rb} : Shape{g.H, Rb}, -2, 2, dt, g.seed + 5);
    f.bias_rows = from_vector(brows, {W});
  }
  if (g.pad) {  // batch 0: a few padded keys
    std::vector<bool> m(static_cast<size_t>(g.B * g.t1), false);
    for (int64_t j = 0; j < g.t1; ++j) m[j] = j % 7 == 4;
    f.key_padding_mask = from_vector<bool>(m, {g.B, g.t1});
  }
  c.leaves = {uniform({g.B, g.H, g.t2, g.D}, -1, 1, dt, g.seed), uniform({g.B, g.H, g.t1, g.D}, -1, 1, dt, g.seed + 1),
              uniform({g.B, g.H, g.t1, g.D}, -1, 1, dt, g.seed + 2)};
  for (const Tensor& t : {f.rel_query, f.rel_table, f.bias_table})
    if (t.defined()) c.leaves.push_back(t);
  return c;
}

// (t2, t1) index map of a per-distance lookup, −1 where it has no entry.
inline Tensor index_map(const Case& c, const Tensor& lookup) {
  const std::vector<int64_t> L = lookup.to_vector<int64_t>();
  std::vector<int64_t> C(static_cast<size_t>(c.g.t2 * c.g.t1));
  for (int64_t i = 0; i < c.g.t2; ++i)
    for (int64_t j = 0; j < c.g.t1; ++j) {
      const int64_t w = j - c.pos[i] - c.f.min_delta;
      C[i * c.g.t1 + j] = w >= 0 && w < static_cast<int64_t>(L.size()) ? L[w] : -1;
    }
  return from_vector(C, {c.g.t2, c.g.t1});
}

// The op (fused) or its composite twin on leaves `in` (the order of Case::leaves).
inline Tensor run(const Case& c, const TensorList& in, bool fused) {
  size_t n = 3;
  const Tensor qr = c.f.rel_query.defined() ? in[n++] : Tensor();
  const Tensor E = c.f.rel_table.defined() ? in[n++] : Tensor();
  const Tensor bias = c.f.bias_table.defined() ? in[n++] : Tensor();
  if (fused) {
    FlashAttentionOptions f = c.f;
    f.rel_query = qr, f.rel_table = E, f.bias_table = bias;
    return flash_relative_attention(in[0], in[1], in[2], f);
  }
  const Geometry& g = c.g;
  Tensor logits = matmul(in[0], in[1].transpose(-1, -2));
  if (E.defined())
    logits = logits + relative_gather(matmul(qr.defined() ? qr : in[0], E.transpose(-1, -2)), index_map(c, c.f.rel_rows),
                                      E.size(-2));
  Tensor b;
  if (bias.defined()) {
    const Tensor t = bias.dim() == 1 ? bias.reshape({1, bias.size(0)}) : bias;  // (Hb, Rb)
    b = relative_gather(t.unsqueeze(1).expand({t.size(0), g.t2, t.size(1)}), index_map(c, c.f.bias_rows), t.size(1))
            .unsqueeze(0);  // (1, Hb, t2, t1)
  }
  std::vector<bool> m(static_cast<size_t>(g.B * g.t2 * g.t1));
  const std::vector<bool> pad = g.pad ? c.f.key_padding_mask.to_vector<bool>() : std::vector<bool>();
  for (int64_t bi = 0; bi < g.B; ++bi)
    for (int64_t i = 0; i < g.t2; ++i)
      for (int64_t j = 0; j < g.t1; ++j)
        m[(bi * g.t2 + i) * g.t1 + j] = (g.causal && j > c.pos[i]) || (g.pad && pad[bi * g.t1 + j]);
  const Tensor mask = from_vector<bool>(m, {g.B, 1, g.t2, g.t1});
  return matmul(masked_softmax(logits, mask, 1.0 / std::sqrt(static_cast<double>(g.D)), b), in[2]);
}

// Output and the gradient of every leaf under a fixed random cotangent.
inline TensorList forward_backward(const Case& c, bool fused, DType dt) {
  TensorList in;
  for (const Tensor& t : c.leaves) in.push_back(t.detach().to(dt).clone().requires_grad_());
  const Tensor out = run(c, in, fused);
  sum(mul(out, uniform(out.shape(), -1, 1, dt, 77))).backward();
  TensorList r{out.detach()};
  for (const Tensor& t : in) r.push_back(t.grad());
  return r;
}

inline void check_all(const TensorList& a, const TensorList& b, double atol, double rtol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string what = i == 0 ? std::string("output") : "gradient of leaf " + std::to_string(i - 1);
    INFO(what);
    REQUIRE(a[i].defined());
    REQUIRE(b[i].defined());
    CHECK_CLOSE(a[i], b[i], atol, rtol);
  }
}

// The largest |x| of a table's gradient: the case must exercise the table.
inline double largest(const Tensor& t) {
  double m = 0;
  for (double x : t.to(kFloat64).to_vector<double>()) m = std::max(m, std::abs(x));
  return m;
}

inline std::string describe(const Geometry& g) {
  const char* align[] = {"left", "right", "scaled", "explicit"};
  return std::string(g.causal ? "causal " : "") + align[static_cast<int>(g.align)] + " t2=" + std::to_string(g.t2) +
         " t1=" + std::to_string(g.t1) + " B=" + std::to_string(g.B) + " H=" + std::to_string(g.H) +
         " D=" + std::to_string(g.D) + (g.pad ? " pad" : "") + (g.shared_E ? " sharedE" : "") +
         (g.shared_b ? " sharedB" : "") + (g.separate_query ? " qr" : "") + (g.full_E ? " fullE" : "");
}

// The geometries of the comparisons: sizes off the tiles, every alignment, t2 < t1 and t2 > t1.
inline std::vector<Geometry> geometries() {
  const struct { int64_t t2, t1; Align a; } shapes[] = {{70, 70, Align::Left},     {37, 131, Align::Right},
                                                       {131, 37, Align::Left},    {45, 100, Align::Scaled},
                                                       {66, 70, Align::Explicit}, {1, 65, Align::Right},
                                                       {129, 61, Align::Right},   {65, 3, Align::Explicit}};
  std::vector<Geometry> out;
  uint64_t seed = 1;
  for (bool causal : {false, true})
    for (const auto& s : shapes) {
      Geometry g;
      g.causal = causal, g.t2 = s.t2, g.t1 = s.t1, g.align = s.a, g.seed = seed += 10;
      g.pad = seed % 3 == 0;
      g.shared_E = seed % 4 == 1, g.shared_b = seed % 4 == 3, g.separate_query = seed % 5 == 1;
      out.push_back(g);
    }
  return out;
}

using relgrad::testing::ThreadCount;  // tests/thread_count.h

// Several waves of per-task buffers. Two passes: a task is (b, h, query tile), whose buffers hold at
// least t1 distances and (full table) t1 rows of D, at most t1 + 63 of each. One pass: a task is
// (b, h), whose buffers hold t1 + t2 − 1 of each (left alignment). Either way the tasks need more
// than the budget in all while a wave of the smallest size allowed at up to 3 threads (4 tasks per
// thread) fits in it.
inline Geometry waves_geometry(FlashBackward path) {
  Geometry g;
  g.full_E = true;
  if (path == FlashBackward::OnePass) {
    g.B = 1, g.H = 24, g.t2 = 256, g.t1 = 256, g.D = 512;
    const int64_t per_task = (g.t1 + g.t2 - 1) * (1 + g.D);
    REQUIRE(g.B * g.H * per_task > cpu::kFlashFoldBudget);
    REQUIRE(4 * 3 * per_task < cpu::kFlashFoldBudget);
    return g;
  }
  g.B = 1, g.H = 4, g.t2 = 720, g.t1 = 720, g.D = 128;
  const int64_t tasks = g.B * g.H * ((g.t2 + cpu::kFlashBlockQ - 1) / cpu::kFlashBlockQ);
  REQUIRE(tasks * g.t1 * (1 + g.D) > cpu::kFlashFoldBudget);
  REQUIRE(4 * 3 * (g.t1 + cpu::kFlashBlockQ) * (1 + g.D) < cpu::kFlashFoldBudget);
  return g;
}

}  // namespace relgrad::testing::flash
