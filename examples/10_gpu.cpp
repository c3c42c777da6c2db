// 10 the GPU: one small decoder-only model (learned relative positions, the "seed" scheme) trained
// twice from the same initial weights, on the CPU and on CUDA. The training loop is written once;
// the only differences are `model->to(Device::cuda())` and moving each batch with `.to(device)`.
// Both loss curves are printed side by side and must agree to float32 accuracy (relative 1e-3):
// the CUDA kernels compute the same functions, only the order of their sums differs (TF32 matmuls,
// which would round to ~1e-3, are off unless asked for: docs/cuda.md).
//
// Run: ./build/examples/10_gpu   It needs a CUDA build (cmake -DRELGRAD_CUDA=ON, docs/cuda.md) and a
// GPU; without either it prints one line "SKIPPED: <why>" and exits 0, which ctest reports as skipped.
// expect: cpu and cuda agree: yes
// expect: time per step: cpu [0-9.]+ ms, cuda [0-9.]+ ms
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "relgrad.h"
#include "layers/models.h"
#include "train/optim/optim.h"

using namespace relgrad;

namespace {

constexpr int64_t kVocab = 16, kBatch = 32, kLength = 64, kLag = 3;
constexpr int kSteps = 20;
constexpr double kTolerance = 1e-3;  // relative, per step

TransformerConfig small_config() {
  TransformerConfig config;
  config.vocab_size = kVocab;
  config.d_model = 64;
  config.n_heads = 4;
  config.d_ff = 128;
  config.n_decoder_layers = 2;
  config.tie_weights = false;  // an untied head starts near ln(V), so the curves fall from the start
  config.dropout = 0.0;  // no random masks, so both runs compute exactly the same functions
  config.decoder_self = PositionalConfig{"seed"};
  config.decoder_self.max_length = kLength;
  return config;
}

// Lag-k copy: the target at position t is the token k positions back (nothing to predict for t < k).
void lag_copy_batch(Generator& gen, Tensor& tokens, Tensor& targets) {
  tokens = randint(0, kVocab, {kBatch, kLength}, kInt64, &gen);
  const std::vector<int64_t> x = tokens.to_vector<int64_t>();
  std::vector<int64_t> y(x.size(), -100);  // -100: cross_entropy's ignore_index
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t t = kLag; t < kLength; ++t) y[b * kLength + t] = x[b * kLength + t - kLag];
  targets = from_vector(y, {kBatch, kLength});
}

struct Run {
  std::vector<double> losses;
  double ms_per_step = 0;
};

// The whole training loop, the same for both devices: `device` is where the model already lives.
Run train(DecoderLM& model, Device device) {
  Adam optimizer(model.parameters(), AdamOptions(3e-3));
  Generator data(2024);  // the same batches for both runs, drawn on the host
  Run run;
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < kSteps; ++step) {
    // The first step pays for warming up (on CUDA: the context, cuBLAS, loading kernels): untimed.
    if (step == 1) start = std::chrono::steady_clock::now();
    Tensor tokens, targets;
    lag_copy_batch(data, tokens, targets);
    tokens = tokens.to(device);
    targets = targets.to(device);
    Tensor logits = model(tokens);  // (B, T, V)
    Tensor loss = cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    run.losses.push_back(loss.item());  // item() copies to the host, so it waits for the GPU's work
  }
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  run.ms_per_step = elapsed.count() / (kSteps - 1);
  return run;
}

}  // namespace

int main() {
  try {
    if (!cuda_built()) {
      std::printf("SKIPPED: relgrad was built without CUDA (configure with -DRELGRAD_CUDA=ON)\n");
      return 0;
    }
    if (cuda_device_count() == 0) {
      std::printf("SKIPPED: relgrad was built with CUDA, but no CUDA device is visible "
                  "(check nvidia-smi and CUDA_VISIBLE_DEVICES)\n");
      return 0;
    }
    const Device cuda = Device::cuda();
    // Two models from one seed: the initial weights are drawn on the host, so they are the same.
    Generator init_cpu(7), init_cuda(7);
    auto cpu_model = std::make_shared<DecoderLM>(small_config(), &init_cpu);
    auto cuda_model = std::make_shared<DecoderLM>(small_config(), &init_cuda);
    cuda_model->to(cuda);  // the one change: every parameter now lives in GPU memory
    const TensorList on_cpu = cpu_model->parameters(), on_cuda = cuda_model->parameters();
    for (size_t i = 0; i < on_cpu.size(); ++i) {
      NoGradGuard no_grad;
      if (!on_cuda[i].device().is_cuda() || max(abs(on_cuda[i].to(Device::cpu()) - on_cpu[i])).item() != 0) {
        std::fprintf(stderr, "parameter %zu: not the CPU model's initial value on %s\n", i,
                     cuda.str().c_str());
        return 1;
      }
    }
    std::printf("a decoder-only LM, %zu parameter tensors, on cpu and on %s (%d device(s)); %d Adam steps "
                "of lag-%lld copy\n", on_cpu.size(), cuda.str().c_str(), cuda_device_count(), kSteps,
                static_cast<long long>(kLag));

    const Run cpu_run = train(*cpu_model, Device::cpu());
    const Run cuda_run = train(*cuda_model, cuda);

    std::printf("step   cpu loss  cuda loss  relative difference\n");
    double worst = 0;
    bool finite = true;
    for (int step = 0; step < kSteps; ++step) {
      const double a = cpu_run.losses[step], b = cuda_run.losses[step];
      const double relative = std::fabs(a - b) / std::max(std::fabs(a), 1e-12);
      finite = finite && std::isfinite(a) && std::isfinite(b);
      worst = std::max(worst, relative);
      std::printf("%4d  %9.5f  %9.5f  %.2e\n", step, a, b, relative);
    }
    const bool agree = finite && worst <= kTolerance;
    std::printf("cpu and cuda agree: %s (largest relative difference %.2e, tolerance %.0e)\n",
                agree ? "yes" : "NO", worst, kTolerance);
    std::printf("time per step: cpu %.2f ms, cuda %.2f ms (steps 2..%d)\n", cpu_run.ms_per_step,
                cuda_run.ms_per_step, kSteps);
    if (!finite) std::fprintf(stderr, "a loss is not finite\n");
    return agree ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
