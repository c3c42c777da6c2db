// The op table harness: one OpCase per op (or per op variant); run_op_case runs it in every mode:
//   1. float64 forward against the naive reference (tolerance 1e-12),
//   2. float32 forward against the reference on the same (rounded) values,
//   3. the same inputs as non-contiguous views (strided and transposed) give the same result,
//   4. float64 gradcheck on every floating input,
//   5. every bad input throws relgrad::Error with the expected message,
//   6. with a GPU: the same op on CUDA against the CPU, forward and backward, float64 and float32,
//      with guard zones around every GPU allocation (tests/cuda_testing.h); nothing without one.
// References are written with plain loops over float64 vectors (Ref below), never with relgrad ops.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"

namespace relgrad::testing {

// A float64 (or int64) host array with its shape, for naive references.
struct Ref {
  Shape shape;
  std::vector<double> v;
  explicit Ref(const Tensor& t) : shape(t.shape()), v(t.to(kFloat64).contiguous().to_vector<double>()) {}
  Ref(Shape s, double fill = 0.0) : shape(std::move(s)), v(shape_numel(shape), fill) {}
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  // Flat index of a multi-index (row-major).
  int64_t index(const Shape& idx) const {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
    return flat;
  }
  double& at(const Shape& idx) { return v[index(idx)]; }
  double at(const Shape& idx) const { return v[index(idx)]; }
  Tensor tensor() const { return from_vector(v, shape, kFloat64); }
};
// Multi-index of flat index i for shape.
inline Shape unravel(int64_t i, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) { idx[d] = shape[d] ? i % shape[d] : 0; i = shape[d] ? i / shape[d] : 0; }
  return idx;
}

struct BadInput {
  std::string what;                // description, for the failure message
  std::function<void()> call;      // must throw
  std::string expected_message;    // substring of the message
};

struct OpCase {
  std::string name;
  // Inputs for a given floating dtype (index inputs stay int64). Default: uniform in [lo, hi) of `shapes`.
  std::vector<Shape> shapes;
  double lo = -2.0, hi = 2.0;
  std::function<TensorList(DType)> make_inputs;
  std::function<Tensor(const TensorList&)> op;
  std::function<Ref(const std::vector<Ref>&)> reference;
  bool check_gradient = true;  // false for ops with no gradient (comparisons, argmax)
  std::vector<BadInput> bad_inputs;
  double f32_atol = 1e-5, f32_rtol = 1e-4;  // loosen for ops that accumulate many terms
};

inline TensorList case_inputs(const OpCase& c, DType dt) {
  if (c.make_inputs) return c.make_inputs(dt);
  TensorList in;
  uint64_t seed = 1;
  for (const Shape& s : c.shapes) in.push_back(uniform(s, c.lo, c.hi, kFloat64, seed++).to(dt));
  return in;
}

// Same values, other strides: every dim strided by 2 (a slice of a bigger buffer), or a transposed copy.
inline Tensor strided_copy_of(const Tensor& t) {
  Shape big = t.shape();
  big.push_back(2);
  Tensor buf = zeros(big, TensorOptions(t.dtype()));
  Tensor view = buf.select(-1, 0);
  view.copy_(t);
  return view;
}
inline Tensor transposed_copy_of(const Tensor& t) {
  if (t.dim() < 2) return strided_copy_of(t);
  return t.transpose(0, t.dim() - 1).contiguous().transpose(0, t.dim() - 1);
}

inline void run_op_case(const OpCase& c) {
  INFO("op case: ", c.name);
  // 1. float64 forward against the reference
  TensorList in64 = case_inputs(c, kFloat64);
  std::vector<Ref> refs;
  for (const Tensor& t : in64) refs.push_back(Ref(t));
  Tensor expected = c.reference(refs).tensor();
  Tensor out64 = c.op(in64);
  CHECK_CLOSE(out64, expected, 1e-12, 1e-10);
  // 2. float32 forward: the reference on the float32-rounded inputs
  TensorList in32 = case_inputs(c, kFloat32);
  std::vector<Ref> refs32;
  for (const Tensor& t : in32) refs32.push_back(Ref(t));
  Tensor out32 = c.op(in32);
  if (is_floating(out64.dtype())) CHECK(out32.dtype() == kFloat32);
  CHECK_CLOSE(out32, c.reference(refs32).tensor(), c.f32_atol, c.f32_rtol);
  // 3. non-contiguous inputs
  for (int variant = 0; variant < 2; ++variant) {
    TensorList strided;
    for (const Tensor& t : in64) strided.push_back(t.dim() == 0 ? t : variant ? transposed_copy_of(t) : strided_copy_of(t));
    for (size_t k = 0; k < strided.size() && variant == 0; ++k)  // a transpose of (3,1) may still be contiguous
      if (strided[k].dim() > 0 && strided[k].numel() > 1) CHECK_FALSE(strided[k].is_contiguous());
    CHECK_CLOSE(c.op(strided), expected, 1e-12, 1e-10);
  }
  // 4. gradcheck in float64 over every floating input
  if (c.check_gradient) {
    TensorList gin;
    for (const Tensor& t : in64) {
      Tensor g = t.detach().clone();
      if (is_floating(g.dtype())) g.requires_grad_(true);
      gin.push_back(g);
    }
    GradcheckResult r = gradcheck(c.op, gin);
    CHECK_MESSAGE(r.ok, r.message);
  }
  // 5. bad inputs
  for (const BadInput& b : c.bad_inputs) {
    INFO("bad input: ", b.what);
    check_throws_with(b.call, b.expected_message);
  }
  // 6. CUDA parity (only where a GPU is present)
  for (DType dt : {kFloat64, kFloat32}) {
    CudaParityCase p;
    p.name = c.name + (dt == kFloat64 ? " (float64)" : " (float32)");
    p.inputs = case_inputs(c, dt);
    p.op = [&c](const TensorList& in) { return TensorList{c.op(in)}; };
    p.backward = c.check_gradient;
    if (dt == kFloat32) { p.atol = c.f32_atol; p.rtol = c.f32_rtol; }
    check_cuda_parity(p);
  }
}

}  // namespace relgrad::testing
