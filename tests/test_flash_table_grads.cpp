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
#include "flash_testing.h"

using namespace relgrad;
using namespace relgrad::testing;
using namespace relgrad::testing::flash;

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
