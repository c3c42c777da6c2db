// The backend seam for the softmax family (kernels: core/cpu/softmax.h, cuda/softmax.h). Every
// tensor argument is contiguous unless said otherwise; outputs are allocated here, on the input's device.
#pragma once
#include "core/base/softmax_layout.h"
#include "core/tensor.h"

namespace relgrad::backend {

// x contiguous, seen as L's (outer, C, inner) around the softmax dim → y (x's shape), softmax or log_softmax.
Tensor softmax_forward(const Tensor& x, const SoftmaxLayout& L);
// y the forward's output, g contiguous, both (outer, C, inner) → gx.
Tensor softmax_backward(const Tensor& y, const Tensor& g, const SoftmaxLayout& L);

// y (x's shape, (rows, C) with C the last dim) = softmax(scale · x + bias) with masked positions 0.
// x contiguous; bias (x's dtype) and mask (bool) optional (undefined) and read in place through
// their broadcast strides to x's shape.
Tensor masked_softmax_forward(const Tensor& x, double scale, const Tensor& bias, const Tensor& mask);
// gx (rows, C), and gz (the gradient of scale · x + bias, before the bias is summed to its shape)
// when want_bias, from y and the contiguous g.
struct MaskedSoftmaxGrads {
  Tensor gx, gz;
};
MaskedSoftmaxGrads masked_softmax_backward(const Tensor& y, const Tensor& g, double scale, bool want_bias);

// logits x (N, C, D) contiguous with targets t (N, D) contiguous int64 on x's device, already checked
// on the host (`t_host`, t itself on the CPU) → the loss per position (N, D) and its logsumexp (N, D),
// each shaped `target_shape`.
struct CrossEntropyForward {
  Tensor loss, lse;
};
CrossEntropyForward cross_entropy_forward(const Tensor& x, const Tensor& t, const Tensor& t_host,
                                          const Shape& target_shape, const CrossEntropyLayout& L);
// The sum of loss (n values) in a fixed order (serial on the CPU, the reduction kernel on CUDA),
// divided by `count` when `mean` (0/0 = NaN, as PyTorch), as a 0-d tensor on loss's device.
Tensor sum_positions(const Tensor& loss, bool mean, int64_t count);
// gx (N, C, D) from the saved x, t, lse and g: a 0-d g when `reduced` (times `scale`), else (N, D).
Tensor cross_entropy_backward(const Tensor& x, const Tensor& t, const Tensor& lse, const Tensor& g, bool reduced,
                              double scale, const CrossEntropyLayout& L);

}  // namespace relgrad::backend
