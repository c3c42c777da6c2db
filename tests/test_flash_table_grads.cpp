// The fused core's backward on the CPU (core/cpu/flash_attention_backward.cpp) in both loop orders, one
// pass per (b, h) and two passes (query tiles, then key tiles), each forced in turn: dq, dk, dv and the
// table gradients, the bias table's and the relative table's summed from the tiles' ds and folded in
// task order. Checked against the composite twin
//   q·kᵀ + relative_gather(q_rel·Eᵀ, C) → masked_softmax(·, mask, scale, relative_gather(bias, C_b)) → ·v
// with clipped tables (every distance past the clip collides in an edge row, of E and of the bias),
// bias entries with no term, causal and not, left / right / scaled / explicit π(i), sizes off the
// 64-row tiles, padding, float64 and float32 (also against float64); the two loop orders against each
// other; bitwise equal at 1, 2 and 3 threads; problems large enough that the per-task buffers are
// folded in several waves; gradcheck; which loop order the rule picks.
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <string>

#include "core/cpu/flash_attention.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

enum class Align { Left, Right, Scaled, Explicit };

using cpu::FlashBackward;
const FlashBackward kPaths[] = {FlashBackward::TwoPass, FlashBackward::OnePass};
const char* path_name(FlashBackward p) { return p == FlashBackward::OnePass ? "one pass" : "two passes"; }

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

std::vector<int64_t> positions(const Geometry& g) {
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

Case make_case(const Geometry& g, DType dt) {
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
Tensor index_map(const Case& c, const Tensor& lookup) {
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
Tensor run(const Case& c, const TensorList& in, bool fused) {
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
TensorList forward_backward(const Case& c, bool fused, DType dt) {
  TensorList in;
  for (const Tensor& t : c.leaves) in.push_back(t.detach().to(dt).clone().requires_grad_());
  const Tensor out = run(c, in, fused);
  sum(mul(out, uniform(out.shape(), -1, 1, dt, 77))).backward();
  TensorList r{out.detach()};
  for (const Tensor& t : in) r.push_back(t.grad());
  return r;
}

void check_all(const TensorList& a, const TensorList& b, double atol, double rtol) {
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
double largest(const Tensor& t) {
  double m = 0;
  for (double x : t.to(kFloat64).to_vector<double>()) m = std::max(m, std::abs(x));
  return m;
}

std::string describe(const Geometry& g) {
  const char* align[] = {"left", "right", "scaled", "explicit"};
  return std::string(g.causal ? "causal " : "") + align[static_cast<int>(g.align)] + " t2=" + std::to_string(g.t2) +
         " t1=" + std::to_string(g.t1) + " B=" + std::to_string(g.B) + " H=" + std::to_string(g.H) +
         " D=" + std::to_string(g.D) + (g.pad ? " pad" : "") + (g.shared_E ? " sharedE" : "") +
         (g.shared_b ? " sharedB" : "") + (g.separate_query ? " qr" : "") + (g.full_E ? " fullE" : "");
}

// The geometries of the comparisons: sizes off the tiles, every alignment, t2 < t1 and t2 > t1.
std::vector<Geometry> geometries() {
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

}  // namespace

TEST_CASE("flash table gradients: clipped E and bias against the composite, every alignment (float64, 1e-12)") {
  for (const FlashBackward path : kPaths)
    for (const Geometry& g : geometries()) {
      INFO(path_name(path), " ", describe(g));
      const Case c = make_case(g, kFloat64);
      const TensorList r = forward_backward(c, false, kFloat64);
      const ForcePath force(path);
      const TensorList f = forward_backward(c, true, kFloat64);
      check_all(f, r, 1e-12, 1e-10);
      CHECK(largest(f.back()) > 0);         // the bias's gradient
      CHECK(largest(f[f.size() - 2]) > 0);  // E's
    }
}

TEST_CASE("flash table gradients: float32 against the float32 composite and against float64") {
  for (const FlashBackward path : kPaths)
    for (const Geometry& g : geometries()) {
      INFO(path_name(path), " ", describe(g));
      const Case c = make_case(g, kFloat64);
      const ForcePath force(path);
      const TensorList f32 = forward_backward(c, true, kFloat32);
      check_all(f32, forward_backward(c, false, kFloat32), 1e-5, 1e-4);
      check_all(f32, forward_backward(c, true, kFloat64), 2e-5, 1e-4);
    }
}

TEST_CASE("flash table gradients: the one-pass backward against the two-pass one (float64 and float32)") {
  for (const DType dt : {kFloat64, kFloat32})
    for (const Geometry& g : geometries()) {
      INFO(describe(g), dt == kFloat64 ? " float64" : " float32");
      const Case c = make_case(g, kFloat64);
      TensorList two, one;
      {
        const ForcePath force(FlashBackward::TwoPass);
        two = forward_backward(c, true, dt);
      }
      {
        const ForcePath force(FlashBackward::OnePass);
        one = forward_backward(c, true, dt);
      }
      CHECK(bitwise_equal(one[0], two[0]));  // the same forward
      if (dt == kFloat64) check_all(one, two, 1e-12, 1e-10);
      else check_all(one, two, 1e-5, 1e-4);
    }
}

TEST_CASE("flash table gradients: bias only, E only, and a full-range table per distance") {
  Geometry g;
  g.t2 = 100, g.t1 = 140, g.align = Align::Right, g.causal = true, g.pad = true;
  for (const FlashBackward path : kPaths)
    for (int which = 0; which < 3; ++which) {
      Geometry h = g;
      if (which == 0) h.clip_E = 0;             // the bias alone (T5, KERPLE, ALiBi as a table, …)
      if (which == 1) h.clip_b = 0;             // E alone (Shaw, …)
      if (which == 2) h.full_E = true, h.separate_query = true;  // the seed's or Transformer-XL's table
      INFO(path_name(path), " ", describe(h), " which=", which);
      const Case c = make_case(h, kFloat64);
      const TensorList r = forward_backward(c, false, kFloat64);
      const ForcePath force(path);
      check_all(forward_backward(c, true, kFloat64), r, 1e-12, 1e-10);
    }
}

namespace {

// Runs with `n` OpenMP threads until the end of the scope.
struct ThreadCount {
#ifdef _OPENMP
  int saved = omp_get_max_threads();
  explicit ThreadCount(int n) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved); }
#else
  explicit ThreadCount(int) {}
#endif
};

// Several waves of per-task buffers. Two passes: a task is (b, h, query tile), whose buffers hold at
// least t1 distances and (full table) t1 rows of D, at most t1 + 63 of each. One pass: a task is
// (b, h), whose buffers hold t1 + t2 − 1 of each (left alignment). Either way the tasks need more
// than the budget in all while a wave of the smallest size allowed at up to 3 threads (4 tasks per
// thread) fits in it.
Geometry waves_geometry(FlashBackward path) {
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

}  // namespace

TEST_CASE("flash table gradients: the per-task buffers fold in several waves and still match the composite") {
  for (const FlashBackward path : kPaths) {
    INFO(path_name(path));
    const Case c = make_case(waves_geometry(path), kFloat64);
    const ThreadCount two(2);
    const TensorList r = forward_backward(c, false, kFloat64);
    const ForcePath force(path);
    check_all(forward_backward(c, true, kFloat64), r, 1e-12, 1e-10);
  }
}

TEST_CASE("flash table gradients: bitwise equal at 1, 2 and 3 threads, and run to run") {
  Geometry g;
  g.B = 2, g.H = 3, g.t2 = 200, g.t1 = 190, g.align = Align::Scaled, g.pad = true, g.separate_query = true;
  for (const FlashBackward path : kPaths)
    for (const Geometry& geo : {g, waves_geometry(path)}) {
      INFO(path_name(path), " ", describe(geo));
      const Case c = make_case(geo, kFloat32);
      const ForcePath force(path);
      std::vector<TensorList> runs;
      for (int threads : {1, 2, 3, 2}) {
        const ThreadCount n(threads);
        runs.push_back(forward_backward(c, true, kFloat32));
      }
      for (size_t r = 1; r < runs.size(); ++r)
        for (size_t i = 0; i < runs[0].size(); ++i) {
          INFO("run ", r, " tensor ", i);
          CHECK(bitwise_equal(runs[r][i], runs[0][i]));
        }
    }
}

TEST_CASE("flash table gradients: gradcheck with clipped E, clipped bias and a separate relative query") {
  for (const FlashBackward path : kPaths)
    for (bool causal : {false, true}) {
      INFO(path_name(path), causal ? " causal" : "");
      Geometry g;
      g.B = 2, g.H = 2, g.t2 = 5, g.t1 = 67, g.D = 2, g.causal = causal, g.align = Align::Explicit, g.pad = true;
      g.separate_query = true;
      const Case c = make_case(g, kFloat64);
      TensorList in;
      for (const Tensor& t : c.leaves) in.push_back(t.detach().clone().requires_grad_());
      const ForcePath force(path);
      GradcheckResult r = gradcheck([&](const TensorList& x) { return run(c, x, true); }, in);
      CHECK_MESSAGE(r.ok, r.message);
    }
}

TEST_CASE("flash backward: the loop order follows B·H and the machine's cores, never the thread count") {
#ifdef _OPENMP
  const int64_t procs = omp_get_num_procs();
#else
  const int64_t procs = 1;
#endif
  const int64_t enough = cpu::kFlashOnePassTasksPerCore * procs;  // (b, h) tasks for the one pass
  for (int threads : {1, 2, 3}) {
    INFO(threads, " threads, ", procs, " cores");
    const ThreadCount n(threads);
    CHECK(cpu::flash_backward_choice(1, enough) == FlashBackward::OnePass);
    CHECK(cpu::flash_backward_choice(enough, 1) == FlashBackward::OnePass);
    CHECK(cpu::flash_backward_choice(1, enough - 1) == FlashBackward::TwoPass);
    CHECK(cpu::flash_backward_choice(2, 1024) == FlashBackward::OnePass);
  }
  for (const FlashBackward path : kPaths) {
    const ForcePath force(path);
    CHECK(cpu::flash_backward_choice(1, 1) == path);
    CHECK(cpu::flash_backward_choice(64, 64) == path);
  }
  CHECK(cpu::flash_backward_choice(1, enough - 1) == FlashBackward::TwoPass);  // the rule again
}
