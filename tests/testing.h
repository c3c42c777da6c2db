// Shared test helpers: closeness with a useful failure message, random inputs, error-message checks.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>
#include <sstream>
#include <string>

#include "core/base/philox.h"
#include "relgrad.h"

namespace relgrad::testing {

// Tolerances per dtype, in one place.
struct Tolerance { double atol, rtol; };
inline Tolerance tolerance_for(DType dt) { return dt == kFloat64 ? Tolerance{1e-12, 1e-10} : Tolerance{1e-5, 1e-4}; }

// Empty string when |a - b| <= atol + rtol |b| everywhere (shapes equal); else a report naming the
// shape, the worst element and the first values.
inline std::string compare(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  std::ostringstream msg;
  if (actual.shape() != expected.shape()) {
    msg << "shape " << shape_str(actual.shape()) << " != expected " << shape_str(expected.shape());
    return msg.str();
  }
  std::vector<double> a = actual.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> e = expected.to(kFloat64).contiguous().to_vector<double>();
  int64_t worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    double excess = both_nan || same_inf ? 0 : std::fabs(a[i] - e[i]) - (atol + rtol * std::fabs(e[i]));
    if (std::isnan(excess)) excess = INFINITY;
    if (excess > worst_excess) { worst_excess = excess; worst = static_cast<int64_t>(i); }
  }
  if (worst < 0) return "";
  msg << "shape " << shape_str(actual.shape()) << ": worst element " << worst << " actual " << a[worst]
      << " expected " << e[worst] << " (atol " << atol << ", rtol " << rtol << "); first values:";
  for (size_t i = 0; i < a.size() && i < 5; ++i) msg << " (" << a[i] << " vs " << e[i] << ")";
  return msg.str();
}

#define CHECK_CLOSE(actual, expected, atol, rtol)                                  \
  do {                                                                             \
    std::string rg_report = ::relgrad::testing::compare(actual, expected, atol, rtol); \
    CHECK_MESSAGE(rg_report.empty(), rg_report);                                   \
  } while (0)

// Uniform values in [lo, hi) from a fixed seed.
// Bit-exact equality: same dtype, same shape, the same bytes (so -0.0 differs from 0.0).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

inline Tensor uniform(const Shape& shape, double lo, double hi, DType dt = kFloat64, uint64_t seed = 1) {
  Generator g(seed);
  NoGradGuard no_grad;
  return add(mul(rand(shape, dt, &g), hi - lo), lo);
}

// How many times `part` stands in `text` (overlaps counted), e.g. a study's "(kept from an earlier run)".
inline size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Runs `fn`, which must throw relgrad::Error whose message contains `expected`.
template <class Fn>
void check_throws_with(Fn&& fn, const std::string& expected) {
  bool threw = false;
  try {
    fn();
  } catch (const Error& e) {
    threw = true;
    std::string what = e.what();
    std::string report = "message '" + what + "' lacks '" + expected + "'";
    CHECK_MESSAGE(what.find(expected) != std::string::npos, report);
  }
  std::string report = "expected a relgrad::Error containing '" + expected + "'";
  CHECK_MESSAGE(threw, report);
}

// gradcheck of f(inputs) where f also reads tensors behind `params` (a module's member handles):
// each is swapped for gradcheck's copy during an evaluation and restored after, so the Jacobian
// covers the parameters too.
inline void gradcheck_with_params(const std::vector<Tensor*>& params, TensorList inputs,
                                  const std::function<Tensor(const TensorList&)>& f) {
  const size_t first_param = inputs.size();
  std::vector<Tensor> saved;
  for (Tensor* p : params) {
    saved.push_back(*p);
    inputs.push_back(p->detach().clone().requires_grad_());
  }
  GradcheckResult r = gradcheck(
      [&](const TensorList& in) {
        for (size_t k = 0; k < params.size(); ++k) *params[k] = in[first_param + k];
        return f(TensorList(in.begin(), in.begin() + first_param));
      },
      inputs);
  for (size_t k = 0; k < params.size(); ++k) *params[k] = saved[k];
  CHECK_MESSAGE(r.ok, r.message);
}

// Backward of a random projection of `out` (a plain sum would give a norm gain a zero gradient:
// normalised rows sum to zero); every parameter of m must get a defined, non-zero gradient.
inline void check_every_parameter_gets_gradient(const Module& m, const Tensor& out) {
  (out * uniform(out.shape(), -1, 1, out.dtype(), 99)).sum().backward();
  for (const auto& [name_, p] : m.named_parameters()) {
    const std::string& name = name_;  // INFO's lambda cannot capture a structured binding (clang < 16)
    INFO("parameter ", name);
    REQUIRE(p.grad().defined());
    double largest = 0;
    for (double g : p.grad().to(kFloat64).to_vector<double>()) largest = std::max(largest, std::fabs(g));
    CHECK(largest > 0);
  }
}

// GPU tests start with `if (!have_gpu()) return;`. Without a GPU this logs "skipped: <why>", which
// ctest reports as a skipped test (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt), not a pass.
inline bool have_gpu() {
  if (cuda_available()) return true;
  std::string why = cuda_built() ? "built with CUDA, but no GPU is visible" : "relgrad was built without CUDA";
  MESSAGE("skipped: " << why);
  return false;
}

}  // namespace relgrad::testing
