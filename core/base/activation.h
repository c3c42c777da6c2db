// The activations a fused op applies (bias_activation, autograd/ops.h): the feed-forward layer's
// list (layers/feed_forward.h). A closed set, so an enum; the kernels map each entry to its functor
// in core/base/functors.h (core/backend/fused.cpp, cuda/fused.cu).
#pragma once

namespace relgrad {

enum class Activation {
  Relu,      // max(x, 0)
  Gelu,      // exact: x · Φ(x), erf form (gelu_erf)
  GeluTanh,  // the tanh approximation of GPT-2 (gelu_tanh)
};

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_tanh";
  }
  return "?";
}

}  // namespace relgrad
