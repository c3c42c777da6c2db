// Step 05 of the teaching track: a whole language-model training loop in about 40 lines, with no
// Trainer, read top to bottom (in the spirit of llm.c). A small decoder-only transformer learns to
// predict the next byte of the King James Bible (data/kjv.txt, written by tools/setup.sh):
//
//   bytes → train / val split → random (B, T) windows → DecoderLM (layers/models.h, RoPE as
//   configs/char_lm.toml) → cross_entropy → zero_grad, backward, clip_grad_norm_, AdamW step
//
// What it teaches: the loop every trainer hides (train/trainer/trainer.h adds schedules, evaluation,
// checkpoints and logs around exactly this); targets are the inputs shifted by one byte; a seeded
// Generator makes the batches (and so the run) reproducible; eval() and NoGradGuard for validation;
// generation is a plain loop feeding the model its own samples.
//
// Run: ./build/examples/05_training_loop [steps, default 300]. Prints step, loss and time per step,
// the validation loss before and after, and a sampled continuation of "And God said". Exits 1 unless
// the validation loss fell below 2.6 nats, far under the 5.55 (ln 256) of guessing bytes uniformly.
// expect: val loss fell from [0-9.]+ to [12][.][0-9]+
// expect: val loss under 2.6, far below uniform guessing: yes
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "relgrad.h"
#include "layers/models.h"
#include "train/optim/optim.h"

using namespace relgrad;

namespace {

const int64_t B = 16, T = 64, V = 256;  // batch rows, context length, vocabulary (bytes)

// B windows of T + 1 bytes at random starts: x is the first T bytes, y the same shifted by one.
void get_batch(const std::vector<int64_t>& data, Generator& gen, Tensor& x, Tensor& y) {
  std::vector<int64_t> starts = randint(0, data.size() - T - 1, {B}, kInt64, &gen).to_vector<int64_t>();
  std::vector<int64_t> xs, ys;
  for (int64_t s : starts) {
    xs.insert(xs.end(), data.begin() + s, data.begin() + s + T);
    ys.insert(ys.end(), data.begin() + s + 1, data.begin() + s + T + 1);
  }
  x = from_vector(xs, {B, T});
  y = from_vector(ys, {B, T});
}

// Mean loss over the same 8 validation batches every time (their own generator, same seed).
double val_loss(DecoderLM& model, const std::vector<int64_t>& val) {
  NoGradGuard no_grad;
  model.eval();
  Generator gen(7);
  double total = 0;
  for (int i = 0; i < 8; ++i) {
    Tensor x, y;
    get_batch(val, gen, x, y);
    total += cross_entropy(model(x).reshape({B * T, V}), y.reshape({B * T})).item();
  }
  model.train();
  return total / 8;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
    std::ifstream in("data/kjv.txt", std::ios::binary);
    if (!in) {
      // Relative to where the program runs: run elsewhere, the file is there but not here.
      std::fprintf(stderr,
                   "error: no data/kjv.txt in %s: run this from the repository root (where `bash "
                   "tools/setup.sh` writes data/kjv.txt)\n",
                   std::filesystem::current_path().string().c_str());
      return 1;
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<int64_t> bytes(text.begin(), text.end());
    for (int64_t& b : bytes) b &= 0xff;  // char may be signed: tokens are the bytes 0..255
    const size_t n_train = bytes.size() * 95 / 100;  // the last 5 % of the book is held out
    std::vector<int64_t> train(bytes.begin(), bytes.begin() + n_train);
    std::vector<int64_t> val(bytes.begin() + n_train, bytes.end());

    TransformerConfig config;
    config.vocab_size = V;
    config.d_model = 64;
    config.n_heads = 4;
    config.d_ff = 256;
    config.n_decoder_layers = 2;
    config.dropout = 0.0;
    config.decoder_self = PositionalConfig{"rope"};
    Generator gen(1337);  // one seed: the initial weights, then every batch
    DecoderLM model(config, &gen);
    const TensorList params = model.parameters();
    AdamW optimizer(decay_groups(model.named_parameters(), 3e-3, 0.1),  // no weight decay on norms, biases
                    AdamWOptions(3e-3).betas(0.9, 0.95));
    int64_t n_params = 0;
    for (const Tensor& p : params) n_params += p.numel();
    std::printf("DecoderLM with %lld parameters, %zu bytes of text, B %lld, T %lld, %d steps\n",
                static_cast<long long>(n_params), bytes.size(), static_cast<long long>(B),
                static_cast<long long>(T), steps);

    // ---- the training loop ----
    const double val_before = val_loss(model, val);  // above ln 256: the initial logits are not flat
    for (int step = 1; step <= steps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      Tensor x, y;
      get_batch(train, gen, x, y);
      Tensor logits = model(x);  // (B, T, V): at each position, scores for the next byte
      Tensor loss = cross_entropy(logits.reshape({B * T, V}), y.reshape({B * T}));
      optimizer.zero_grad();
      loss.backward();
      const double norm = clip_grad_norm_(params, 1.0);  // rescales all grads if their norm is over 1
      optimizer.step();
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      if (step == 1 || step % 25 == 0)
        std::printf("step %4d | loss %.4f | grad norm %.3f | %.1f ms\n", step, loss.item(), norm, ms.count());
    }
    const double val_after = val_loss(model, val);
    std::printf("val loss %s from %.4f to %.4f (uniform guessing: ln 256 = %.4f)\n",
                val_after < val_before ? "fell" : "rose", val_before, val_after, std::log(256.0));

    // ---- generation: sample the next byte from softmax(logits / 0.8), append it, repeat ----
    NoGradGuard no_grad;
    model.eval();
    std::vector<int64_t> tokens = {'A', 'n', 'd', ' ', 'G', 'o', 'd', ' ', 's', 'a', 'i', 'd'};
    for (int i = 0; i < 120; ++i) {
      const int64_t n = std::min<int64_t>(tokens.size(), T);  // the model was trained on at most T bytes
      std::vector<int64_t> context(tokens.end() - n, tokens.end());
      Tensor last = model(from_vector(context, {1, n})).select(0, 0).select(0, n - 1);  // (V)
      std::vector<float> probs = softmax(last / 0.8, 0).to_vector<float>();
      double u = rand({1}, kFloat64, &gen).item();
      int64_t next = 0;
      while (next < V - 1 && (u -= probs[next]) > 0) ++next;
      tokens.push_back(next);
    }
    std::printf("sample:\n%s\n", std::string(tokens.begin(), tokens.end()).c_str());

    const bool learned = val_after < 2.6 && val_after < val_before;
    std::printf("val loss under 2.6, far below uniform guessing: %s\n", learned ? "yes" : "no");
    return learned ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
