// Dropout: the op table run (the reference draws the same Philox stream the op is specified by:
// element i kept iff uniform(seed, offset, i) >= p), then statistics, scaling, eval mode,
// reproducibility and the gradient.
#include <cmath>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/base/philox.h"
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

TEST_CASE("op dropout") {
  for (double p : {0.25, 0.5, 0.9}) {
    OpCase c;
    c.name = "dropout p " + std::to_string(p);
    c.shapes = {{4, 5, 6}};
    // A fresh generator per call, so every call (and every gradcheck evaluation) draws the same mask.
    c.op = [p](const TensorList& in) {
      Generator g(1234);
      return dropout(in[0], p, true, &g);
    };
    c.reference = [p](const std::vector<Ref>& in) {
      Ref out(in[0].shape);
      for (int64_t i = 0; i < out.numel(); ++i) {
        philox::Block b = philox::draw(1234, 0, static_cast<uint64_t>(i));
        out.v[i] = philox::uniform(b.x[0], b.x[1]) >= p ? in[0].v[i] / (1.0 - p) : 0.0;
      }
      return out;
    };
    c.bad_inputs = {
        {"p > 1", [] { dropout(zeros({2}), 1.5, true); }, "[dropout] p must be in [0, 1], got 1.5 (x (2))"},
        {"p < 0", [] { dropout(zeros({2}), -0.1, false); }, "[dropout] p must be in [0, 1], got -0.1"},
        {"NaN p", [] { dropout(zeros({2}), NAN, true); }, "[dropout] p must be in [0, 1], got nan"},
        {"int64 input", [] { dropout(zeros({2}, kInt64), 0.5, true); }, "[dropout] expected a floating tensor"},
    };
    run_op_case(c);
  }
}

TEST_CASE("op dropout: fraction of zeros near p, kept elements scaled by 1/(1-p)") {
  const int64_t n = 100000;
  for (double p : {0.1, 0.3, 0.5, 0.8}) {
    Generator g(7);
    std::vector<float> y = dropout(ones({n}), p, true, &g).to_vector<float>();
    int64_t zeros_seen = 0;
    bool scaled = true;
    for (float v : y) {
      if (v == 0.0f) ++zeros_seen;
      else scaled &= std::fabs(v - 1.0 / (1.0 - p)) <= 1e-6 / (1.0 - p);
    }
    // The zero count is Binomial(n, p): 7 standard deviations is at most 0.011 here.
    const double fraction = static_cast<double>(zeros_seen) / n;
    INFO("p ", p, " fraction of zeros ", fraction);
    CHECK(std::fabs(fraction - p) < 7 * std::sqrt(p * (1 - p) / n));
    CHECK(scaled);
  }
}

TEST_CASE("op dropout: identity in eval mode and for p = 0, zeros for p = 1") {
  Tensor x = uniform({3, 4}, -1, 1).requires_grad_();
  Generator g(1);
  CHECK(dropout(x, 0.5, false, &g).same(x));
  CHECK(dropout(x, 0.0, true, &g).same(x));
  CHECK(g.offset() == 0);  // nothing was drawn
  // p = 1: exact zeros, even for inf and NaN inputs, and a zero gradient.
  Tensor special = from_vector<double>({INFINITY, NAN, -2.0}, {3}).requires_grad_();
  Tensor y = dropout(special, 1.0, true, &g);
  CHECK(y.to_vector<double>() == std::vector<double>{0, 0, 0});
  y.sum().backward();
  CHECK(special.grad().to_vector<double>() == std::vector<double>{0, 0, 0});
}

TEST_CASE("op dropout: same seed, same mask — each draw advances the generator") {
  Tensor x = ones({1000});
  Generator g1(42), g2(42);
  Tensor a = dropout(x, 0.5, true, &g1), b = dropout(x, 0.5, true, &g2);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(g1.offset() == 1);
  Tensor a2 = dropout(x, 0.5, true, &g1);  // the next draw: another mask
  CHECK(a2.to_vector<float>() != a.to_vector<float>());
  // The mask is the one rand() gives for the same generator state: keep iff rand >= p.
  Generator g3(42);
  std::vector<double> u = rand({1000}, kFloat64, &g3).to_vector<double>();
  std::vector<float> av = a.to_vector<float>();
  bool same_mask = true;
  for (size_t i = 0; i < u.size(); ++i) same_mask &= (av[i] != 0.0f) == (u[i] >= 0.5);
  CHECK(same_mask);
  // The default generator, reseeded, repeats itself.
  manual_seed(5);
  Tensor d1 = dropout(x, 0.3, true);
  manual_seed(5);
  CHECK(dropout(x, 0.3, true).to_vector<float>() == d1.to_vector<float>());
  // The mask follows the logical (row-major) order of x, not its memory layout.
  Tensor xt = uniform({40, 30}, 1, 2).t();
  Generator g4(9), g5(9);
  CHECK_CLOSE(dropout(xt, 0.5, true, &g4), dropout(xt.contiguous(), 0.5, true, &g5), 0, 0);
}

TEST_CASE("op dropout: the mask does not depend on the thread count") {
  Tensor x = ones({300000});  // above the parallel threshold
  Generator g(3);
  std::vector<float> expected = dropout(x, 0.4, true, &g).to_vector<float>();
#ifdef _OPENMP
  const int threads = omp_get_max_threads();
  for (int t : {1, 2, 7}) {
    omp_set_num_threads(t);
    Generator gt(3);
    CHECK(dropout(x, 0.4, true, &gt).to_vector<float>() == expected);
  }
  omp_set_num_threads(threads);
#endif
}

TEST_CASE("op dropout: gradient equals mask / (1 - p)") {
  const double p = 0.4;
  Tensor x = uniform({500}, 0.5, 1.5).requires_grad_();  // no zeros, so y == 0 exactly marks the dropped
  Tensor up = uniform({500}, -1, 1, kFloat64, 2);
  Generator g(11);
  Tensor y = dropout(x, p, true, &g);
  y.backward(up);
  std::vector<double> yv = y.to_vector<double>(), uv = up.to_vector<double>();
  Ref expected(Shape{500});
  for (size_t i = 0; i < yv.size(); ++i) expected.v[i] = yv[i] != 0.0 ? uv[i] / (1.0 - p) : 0.0;
  CHECK_CLOSE(x.grad(), expected.tensor(), 1e-15, 1e-14);
}
