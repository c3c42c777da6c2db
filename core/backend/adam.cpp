// The fused Adam entries: cpu::adam_step, or its CUDA twin cuda::adam_step on raw device buffers.
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
}  // namespace

bool adam_fusable(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v) {
  return cuda_adam_fusable(param, grad, m, v) || cpu::adam_fusable(param, grad, m, v);
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamStep& s) {
  if (!param.device().is_cuda()) return cpu::adam_step(param, grad, m, v, s);
  cuda::AdamParams c;
  c.lr = s.lr, c.beta1 = s.beta1, c.beta2 = s.beta2, c.eps = s.eps, c.weight_decay = s.weight_decay;
  c.bias_correction1 = s.bias_correction1, c.bias_correction2 = s.bias_correction2, c.decoupled = s.decoupled;
  cuda::adam_step(param.dtype(), param.raw_data(), grad.raw_data(), m.raw_data(), v.raw_data(), param.numel(), c,
                  param.device().index);
}

void adam_steps(const std::vector<AdamJob>& jobs) {
  std::vector<AdamJob> on_cpu;
  for (const AdamJob& j : jobs)
    if (j.param.device().is_cuda()) backend::adam_step(j.param, j.grad, j.m, j.v, j.step);
    else on_cpu.push_back(j);
  if (!on_cpu.empty()) cpu::adam_steps(on_cpu);
}

}  // namespace relgrad::backend
