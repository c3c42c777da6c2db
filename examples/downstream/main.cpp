// A program written against an installed relgrad (examples/downstream/CMakeLists.txt for
// find_package, README "Use relgrad in your own project" for pkg-config and the Debian package).
// It trains a two-layer MLP with AdamW to fit XOR-like quadrants, saves a checkpoint, loads it into
// a fresh model and checks that both give the same loss.
//
// Prints the library's version, the loss before and after, the checkpoint's writer, then
// "downstream: ok", and exits 0 only if the loss fell below a tenth of where it started and the
// reloaded model matches.
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "relgrad.h"
#include "train/optim/optim.h"
#include "train/trainer/checkpoint.h"

using namespace relgrad;

namespace {

struct Mlp : Module {
  std::shared_ptr<Linear> fc1, fc2;
  explicit Mlp(Generator& gen) {
    fc1 = register_module("fc1", std::make_shared<Linear>(2, 16, true, &gen));
    fc2 = register_module("fc2", std::make_shared<Linear>(16, 2, true, &gen));
  }
  Tensor operator()(const Tensor& x) const { return (*fc2)(tanh((*fc1)(x))); }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string checkpoint = argc > 1 ? argv[1] : "downstream.safetensors";
    std::printf("relgrad %s\n", version());
    // 64 points on a grid over [-1, 1]^2; the class is whether x and y have the same sign (XOR).
    std::vector<float> points;
    std::vector<int64_t> labels;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) {
        const float x = -0.875f + 0.25f * static_cast<float>(i), y = -0.875f + 0.25f * static_cast<float>(j);
        points.insert(points.end(), {x, y});
        labels.push_back((x > 0) == (y > 0) ? 1 : 0);
      }
    const Tensor x = from_vector(points, {64, 2}), y = from_vector(labels, {64});

    Generator gen(7);
    Mlp model(gen);
    AdamW opt(model.parameters(), AdamWOptions(0.05).weight_decay(0.0));
    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      opt.zero_grad();
      Tensor loss = cross_entropy(model(x), y);
      loss.backward();
      opt.step();
      last = loss.item();
      if (step == 0) first = last;
    }
    std::printf("loss fell from %.4f to %.4f\n", first, last);

    CheckpointMeta meta;
    meta.step = 300;
    save_checkpoint(checkpoint, model, &opt, meta);
    Checkpoint ck = load_checkpoint(checkpoint);
    Generator other(8);
    Mlp fresh(other);
    restore(ck, fresh, nullptr, nullptr);
    std::printf("checkpoint writer: %s\n", ck.meta.writer.c_str());
    NoGradGuard no_grad;
    const double reloaded = cross_entropy(fresh(x), y).item(), trained = cross_entropy(model(x), y).item();

    const bool ok = last < 0.1 * first && reloaded == trained && ck.meta.writer == std::string("relgrad ") + version();
    std::printf("downstream: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "downstream: error: %s\n", e.what());
    return 1;
  }
}
