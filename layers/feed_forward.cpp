#include "layers/feed_forward.h"

#include <atomic>

namespace relgrad {

FeedForward::FeedForward(int64_t d_model_, int64_t d_ff_, Activation activation_, double p,
                         Generator* init_generator)
    : d_model(d_model_), d_ff(d_ff_), activation(activation_) {
  RG_CHECK_T(ShapeError, d_model > 0 && d_ff > 0, "FeedForward", "d_model and d_ff must be positive, got ", d_model,
             " and ", d_ff);
  RG_CHECK(p >= 0.0 && p <= 1.0, "FeedForward", "dropout must be in [0, 1], got ", p);
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, d_ff, true, init_generator));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_ff, d_model, true, init_generator));
}

namespace {
std::atomic<bool> fused_chains_cuda{false};
}  // namespace

bool fused_chains_on(const Device& device) { return device.is_cpu() || fused_chains_cuda.load(); }
void set_fused_chains_on_cuda(bool on) { fused_chains_cuda.store(on); }

Tensor FeedForward::forward(const Tensor& x) const {
  RG_CHECK(x.defined(), "FeedForward", "x is an undefined tensor");
  RG_CHECK_T(ShapeError, x.dim() >= 1 && x.size(-1) == d_model, "FeedForward", "expected input (..., ", d_model,
             "), got ", shape_str(x.shape()));
  Tensor h;  // (..., d_ff)
  if (fused_chains_on(x.device())) {
    h = bias_activation(matmul(x, fc1->weight.transpose(0, 1)), fc1->bias, activation);  // bias + act fused
  } else {
    h = fc1->forward(x);
    h = activation == Activation::Gelu ? gelu_erf(h) : activation == Activation::GeluTanh ? gelu_tanh(h) : relu(h);
  }
  return fc2->forward(dropout->forward(h));  // (..., d_model)
}

}  // namespace relgrad
