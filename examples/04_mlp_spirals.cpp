// Step 04 of the teaching track: a whole training run with nothing but tensors and autograd. A
// two-layer MLP learns to classify three interleaved spirals (N = 600 points made here from a seed),
// written with bare tensors rather than modules so that every step of training is visible:
//
//   x (N, 2) -> x·W1 + b1 (N, H = 64) -> tanh -> ·W2 + b2 (N, 3) -> cross_entropy with labels y (N)
//
// What it teaches:
//   - a model is just tensors with requires_grad on, and the forward pass is ordinary code;
//   - full-batch SGD by hand: forward, loss, backward, p -= lr * p.grad;
//   - grads accumulate across backward() calls (as PyTorch), so each step first drops them;
//   - the update runs under NoGradGuard, so it is not recorded on the tape.
//
// Run: ./build/examples/04_mlp_spirals [steps, default 2000]. Prints the loss every 100 steps and the
// final training accuracy; exits 1 unless the loss fell to under half and the accuracy reached 90 %.
// expect: loss fell from [0-9.]+ to [0-9.]+
// expect: training accuracy (9[0-9]|100)[.][0-9]%
// expect: learned the spirals: yes
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "relgrad.h"

using namespace relgrad;

namespace {

// Three spirals of N/3 points each, with a little noise; labels are the spiral index.
void make_spirals(int64_t n_per_class, Generator& gen, Tensor& x, Tensor& y) {
  const int64_t n = 3 * n_per_class;
  std::vector<double> noise = randn({n, 2}, kFloat64, &gen).to_vector<double>();
  std::vector<float> points(2 * n);
  std::vector<int64_t> labels(n);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < n_per_class; ++i) {
      int64_t k = c * n_per_class + i;
      double r = static_cast<double>(i) / n_per_class;              // radius 0..1
      double theta = 4.0 * r + c * 2.0 * M_PI / 3.0;                // three arms
      points[2 * k] = static_cast<float>(r * std::sin(theta) + 0.03 * noise[2 * k]);
      points[2 * k + 1] = static_cast<float>(r * std::cos(theta) + 0.03 * noise[2 * k + 1]);
      labels[k] = c;
    }
  x = from_vector(points, {n, 2});
  y = from_vector(labels, {n});
}

// A weight initialised as PyTorch's nn.Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor init_uniform(const Shape& shape, int64_t fan_in, Generator& gen) {
  double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  NoGradGuard no_grad;
  return (rand(shape, kFloat32, &gen) * (2 * bound) - bound).requires_grad_();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int64_t hidden = 64;
    const double lr = 0.5;
    Generator gen(1234);
    Tensor x, y;
    make_spirals(200, gen, x, y);

    Tensor w1 = init_uniform({2, hidden}, 2, gen), b1 = init_uniform({hidden}, 2, gen);
    Tensor w2 = init_uniform({hidden, 3}, hidden, gen), b2 = init_uniform({3}, hidden, gen);
    TensorList params = {w1, b1, w2, b2};

    std::printf("relgrad: training a 2-layer MLP (hidden %lld) on 3 spirals, %lld points, %d steps of SGD\n",
                static_cast<long long>(hidden), static_cast<long long>(x.size(0)), steps);
    double first = 0, last = 0;
    for (int step = 0; step <= steps; ++step) {
      Tensor logits = matmul(tanh(matmul(x, w1) + b1), w2) + b2;  // (N, 3)
      Tensor loss = cross_entropy(logits, y);
      for (Tensor& p : params) p.set_grad(Tensor());  // zero_grad: backward() adds into .grad
      loss.backward();
      {
        NoGradGuard no_grad;  // the SGD update itself is not part of the graph
        for (Tensor& p : params) p.sub_(p.grad() * lr);
      }
      last = loss.item();
      if (step == 0) first = last;
      if (step % 100 == 0) std::printf("step %4d  loss %.4f\n", step, last);
    }
    NoGradGuard no_grad;
    Tensor pred = argmax(matmul(tanh(matmul(x, w1) + b1), w2) + b2, 1);
    double accuracy = mean(eq(pred, y).to(kFloat32)).item();
    std::printf("loss %s from %.4f to %.4f, training accuracy %.1f%%\n", last < first ? "fell" : "rose", first,
                last, 100 * accuracy);
    // The spirals are not linearly separable, so 90 % means the hidden layer learned curved boundaries.
    const bool learned = last < 0.5 * first && accuracy >= 0.9;
    std::printf("learned the spirals: %s\n", learned ? "yes" : "no");
    return learned ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
