// CUDA-against-CPU parity checks, shared by the GPU tests (tests/test_cuda*.cpp) and by the op table
// harness (tests/op_harness.h runs every OpCase through check_cuda_parity when a GPU is present).
//
// check_cuda_parity runs `op` on the CPU inputs and on copies of them on the GPU, and compares
//   - every output (shape, dtype, values within atol + rtol |cpu|),
//   - the gradient of every floating input that requires it, for the loss sum_k sum(out_k * w_k)
//     with fixed random weights w_k (so every output element gets a different upstream gradient),
// with the allocator's guard zones on during the GPU run: a kernel that writes one element past
// (or before) a tensor it allocated fails the check, naming the allocation.
// Without a GPU it does nothing and returns false; tests that are only about the GPU call
// have_gpu() first so that ctest reports them as skipped.
#pragma once
#include <functional>
#include <string>

#include "cuda/runtime.h"
#include "testing.h"

namespace relgrad::testing {

struct CudaParityCase {
  std::string name;
  TensorList inputs;  // on the CPU; floating ones are differentiated when `backward` is true
  std::function<TensorList(const TensorList&)> op;
  double atol = -1, rtol = -1;  // < 0: the default of the first floating input's dtype
  bool backward = true;
};

// The GPU's libm and summation order differ from the CPU's by a few ulps; float32 reductions over
// a few hundred terms need the looser bound.
inline Tolerance cuda_tolerance_for(DType dt) {
  return dt == kFloat64 ? Tolerance{1e-11, 1e-9} : Tolerance{2e-5, 2e-4};
}

// RAII: guard zones on for the scope, then every zone checked (and guards off again).
class CudaGuardScope {
 public:
  explicit CudaGuardScope(std::string what) : what_(std::move(what)) { cuda::set_guard_checking(true); }
  ~CudaGuardScope() { cuda::set_guard_checking(false); }
  void check() { cuda::check_guards(what_.c_str()); }

 private:
  std::string what_;
};

inline bool check_cuda_parity(const CudaParityCase& c) {
  if (!cuda_available()) return false;
  INFO("cuda parity: ", c.name);
  DType first_float = kFloat32;
  for (const Tensor& t : c.inputs)
    if (is_floating(t.dtype())) { first_float = t.dtype(); break; }
  Tolerance tol = cuda_tolerance_for(first_float);
  double atol = c.atol >= 0 ? c.atol : tol.atol, rtol = c.rtol >= 0 ? c.rtol : tol.rtol;

  auto leaves_on = [&](Device d) {
    TensorList in;
    for (const Tensor& t : c.inputs) {
      Tensor x = t.detach().to(d).clone();
      if (c.backward && is_floating(x.dtype())) x.requires_grad_(true);
      in.push_back(x);
    }
    return in;
  };
  TensorList cpu_in = leaves_on(Device::cpu());
  TensorList cpu_out = c.op(cpu_in);
  TensorList weights;
  for (size_t k = 0; k < cpu_out.size(); ++k)
    weights.push_back(is_floating(cpu_out[k].dtype()) ? uniform(cpu_out[k].shape(), -1, 1, cpu_out[k].dtype(), 100 + k)
                                                        : Tensor());
  auto run_backward = [&](const TensorList& out, Device d) {
    Tensor loss;
    for (size_t k = 0; k < out.size(); ++k) {
      if (!weights[k].defined() || !out[k].requires_grad()) continue;
      Tensor term = sum(mul(out[k], weights[k].to(d)));
      loss = loss.defined() ? add(loss, term) : term;
    }
    if (loss.defined()) loss.backward();
  };
  if (c.backward) run_backward(cpu_out, Device::cpu());

  CudaGuardScope guards(c.name);
  TensorList gpu_in = leaves_on(Device::cuda());
  TensorList gpu_out = c.op(gpu_in);
  REQUIRE(gpu_out.size() == cpu_out.size());
  for (size_t k = 0; k < cpu_out.size(); ++k) {
    INFO("output ", k);
    CHECK(gpu_out[k].device() == Device::cuda());
    CHECK(gpu_out[k].dtype() == cpu_out[k].dtype());
    CHECK_CLOSE(gpu_out[k].to(Device::cpu()), cpu_out[k].detach(), atol, rtol);
  }
  if (c.backward) {
    run_backward(gpu_out, Device::cuda());
    for (size_t i = 0; i < cpu_in.size(); ++i) {
      INFO("gradient of input ", i);
      CHECK(cpu_in[i].grad().defined() == gpu_in[i].grad().defined());
      if (!cpu_in[i].grad().defined() || !gpu_in[i].grad().defined()) continue;
      CHECK(gpu_in[i].grad().device() == Device::cuda());
      CHECK_CLOSE(gpu_in[i].grad().to(Device::cpu()), cpu_in[i].grad(), atol, rtol);
    }
  }
  cuda::synchronize(0);
  guards.check();
  return true;
}

}  // namespace relgrad::testing
