// FeedForward: the position-wise MLP of a transformer block,
//   x (..., d_model) → fc1 → activation → dropout → fc2 → (..., d_model)
// with hidden (..., d_ff). fc1's bias and the activation run as one fused op, bias_activation(x fc1.weightᵀ,
// fc1.bias) (autograd/ops.h), the same numbers as fc1 then the activation, where fused_chains_on says so. Parameter names follow the common PyTorch layout (timm Mlp, GPT-2 ports):
//   fc1.weight (d_ff, d_model), fc1.bias (d_ff), fc2.weight (d_model, d_ff), fc2.bias (d_model)
// The child "dropout" holds no parameters; train()/eval() reach it through the module tree.
#pragma once
#include <memory>
#include <string>

#include "core/base/name_table.h"
#include "layers/dropout.h"
#include "layers/linear.h"

namespace relgrad {

// Where the layers (this one and the blocks' residual + norm, layers/blocks.cpp) run the fused
// elementwise chains of autograd/ops.h: always on the CPU; on a GPU only after
// set_fused_chains_on_cuda(true). Their CUDA kernels (cuda/fused.cu) have parity tests
// (tests/test_fused_ops.cpp) that have not yet run on a GPU, and the GPU figures of
// docs/benchmarks.md were taken with the composite chains; both give the same numbers.
bool fused_chains_on(const Device& device);
void set_fused_chains_on_cuda(bool on);

// The feed-forward's activations by name (model.activation), in the order they are listed. The enum
// is the fused op's (core/base/activation.h); the names are this layer's.
inline constexpr NameTable<Activation, 3> kActivationNames{
    {{Activation::Gelu, "gelu"}, {Activation::GeluTanh, "gelu_tanh"}, {Activation::Relu, "relu"}}};
// "gelu", "gelu_tanh" or "relu" → the activation; else "[op] unknown activation '<name>' (expected gelu,
// gelu_tanh or relu)".
inline Activation activation_from_name(const std::string& name, const char* op) {
  return kActivationNames.parse(name, op, "activation");
}

class FeedForward : public Module {
 public:
  // activation: Gelu (exact, erf), GeluTanh (the tanh approximation of GPT-2) or Relu; by name:
  // activation_from_name.
  // init_generator seeds fc1/fc2 only; dropout masks use dropout->generator (null: the default).
  FeedForward(int64_t d_model, int64_t d_ff, Activation activation = Activation::Gelu, double dropout = 0.0,
              Generator* init_generator = nullptr);
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t d_model, d_ff;
  Activation activation;
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> dropout;
};

}  // namespace relgrad
