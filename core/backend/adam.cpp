// The fused Adam entry: cpu::adam_steps for CPU parameters, the CUDA kernel cuda::adam_step on raw device
// buffers for GPU ones.
#include "core/backend/adam.h"

#include "cuda/adam.h"

namespace relgrad::backend {

namespace {
// The CUDA kernel's conditions: every tensor on the parameter's GPU, contiguous, one float dtype, one shape.
bool cuda_adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  if (!param.device().is_cuda() || !is_floating(param.dtype())) return false;
  for (const Tensor* t : {&param, &grad, &m, &v})
    if (t->device() != param.device() || !t->is_contiguous() || t->dtype() != param.dtype() ||
        t->shape() != param.shape())
      return false;
  return true;
}
// One GPU parameter's step: the CUDA kernel on its raw buffers.
void cuda_adam_step(const AdamJob& j) {
  cuda::AdamParams c;
  const AdamStep& s = j.step;
  c.lr = s.lr, c.beta1 = s.beta1, c.beta2 = s.beta2, c.eps = s.eps, c.weight_decay = s.weight_decay;
  c.bias_correction1 = s.bias_correction1, c.bias_correction2 = s.bias_correction2, c.decoupled = s.decoupled;
  cuda::adam_step(j.param.dtype(), j.param.raw_data(), j.grad.raw_data(), j.m.raw_data(), j.v.raw_data(),
                  j.param.numel(), c, j.param.device().index);
}
}  // namespace

bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  return cuda_adam_fusable(param, grad, m, v) || cpu::adam_fusable(param, grad, m, v);
}

void adam_steps(const std::vector<AdamJob>& jobs) {
  std::vector<AdamJob> on_cpu;
  for (const AdamJob& j : jobs)
    if (j.param.device().is_cuda()) cuda_adam_step(j);
    else on_cpu.push_back(j);
  if (!on_cpu.empty()) cpu::adam_steps(on_cpu);
}

}  // namespace relgrad::backend
