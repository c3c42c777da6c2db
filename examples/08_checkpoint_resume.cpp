// Step 08 of the teaching track: checkpoint, kill -9, resume, and get the very same loss curve.
// A resumable checkpoint holds everything the next step reads: the parameters (model.state_dict()),
// the optimizer state (optimizer.state_tensors(): AdamW's exp_avg, exp_avg_sq and each parameter's
// step count, which bias correction reads), the random stream (the Generator's seed and offset; it
// draws the batches and the dropout masks, so it is the data position too) and the step. It is
// written atomically (temp file, fsync, rename: core/file_io.h), so a kill mid-save leaves the
// previous checkpoint whole. train/trainer/checkpoint.h saves the same pieces (plus checksums); here
// they are written by hand with core/safetensors.h.
//
// Run A trains a tiny DecoderLM for 40 steps. Run B trains in a child process, checkpoints every 5
// steps and is SIGKILLed halfway through saving step 25; the parent resumes from what is on disk
// (step 20) to step 40. The two loss curves must be equal bit for bit.
// Run: ./build/examples/08_checkpoint_resume
// expect: child killed by SIGKILL while saving step 25
// expect: half-written temp file refused
// expect: checkpoint on disk: step 20, loads
// expect: bit-identical: yes
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "relgrad.h"
#include "core/file_io.h"
#include "layers/models.h"
#include "train/optim/optim.h"

using namespace relgrad;
namespace fs = std::filesystem;

const int64_t B = 8, T = 16, V = 16;
const int kSteps = 40, kSaveEvery = 5, kKilledSave = 25;

struct Run {
  std::unique_ptr<DecoderLM> model;
  std::unique_ptr<AdamW> optimizer;
  int step = 0;  // steps done
  Run() {
    TransformerConfig config;
    config.vocab_size = V, config.d_model = 32, config.n_heads = 2, config.d_ff = 64;
    config.n_decoder_layers = 1, config.dropout = 0.1, config.decoder_self = PositionalConfig{"rope"};
    Generator init(1);  // the initial weights; a resumed run overwrites them anyway
    model = std::make_unique<DecoderLM>(config, &init);
    optimizer = std::make_unique<AdamW>(model->parameters(), AdamWOptions(1e-2));
    manual_seed(42);  // the default generator: from here on the batches and the dropout masks
  }
  // One step on rows that count from a random start by a random stride (mod V), learnable in context.
  float train_step() {
    std::vector<int64_t> start = randint(0, V, {B}).to_vector<int64_t>(), xs, ys;
    std::vector<int64_t> stride = randint(1, 4, {B}).to_vector<int64_t>();
    for (int64_t i = 0; i < B * T; ++i) xs.push_back((start[i / T] + i % T * stride[i / T]) % V);
    for (int64_t i = 0; i < B * T; ++i) ys.push_back((xs[i] + stride[i / T]) % V);
    Tensor logits = model->forward(from_vector(xs, {B, T}));
    Tensor loss = cross_entropy(logits.reshape({B * T, V}), from_vector(ys, {B * T}));
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
    ++step;
    return static_cast<float>(loss.item());
  }
};

void save(const std::string& path, const Run& run) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : run.model->state_dict()) tensors["model." + name] = t;
  for (const auto& [name, t] : run.optimizer->state_tensors()) tensors["optim." + name] = t;
  const Generator& rng = default_generator();
  save_safetensors(path, tensors,  // atomic: a temp file, fsync, then rename over `path`
                   {{"step", std::to_string(run.step)}, {"rng_seed", std::to_string(rng.seed())},
                    {"rng_offset", std::to_string(rng.offset())}});
}

void load(const std::string& path, Run& run) {
  SafetensorsFile file = load_safetensors(path);
  std::map<std::string, Tensor> model_state;
  std::vector<std::pair<std::string, Tensor>> optimizer_state;
  for (const auto& [name, t] : file.tensors) {
    if (name.rfind("model.", 0) == 0) model_state[name.substr(6)] = t;
    else optimizer_state.emplace_back(name.substr(6), t);  // "optim." names
  }
  run.model->load_state_dict(model_state);
  run.optimizer->load_state_tensors(optimizer_state);
  default_generator().set_state(std::stoull(file.metadata.at("rng_seed")),
                                std::stoull(file.metadata.at("rng_offset")));
  run.step = std::stoi(file.metadata.at("step"));
}

int main() {
  const fs::path dir = fs::temp_directory_path() / ("relgrad_08_" + std::to_string(getpid()));
  std::error_code ignored;
  try {
    fs::create_directories(dir);
    const std::string path = (dir / "checkpoint.safetensors").string();
    // Run B's first half, in a child. fork() comes before this process computes anything: OpenMP's
    // worker threads do not survive a fork, so a child must not inherit a parent's thread pool.
    const pid_t child = fork();
    if (child == 0) {
      for (Run run; run.step < kSteps;) {
        run.train_step();
        if (run.step == kKilledSave)  // kill -9 halfway through this save (of ~117 kB), from the hook
          set_file_fault_hook([](FileOp, uint64_t written) { return written > 50000 ? raise(SIGKILL) : 0; });
        if (run.step % kSaveEvery == 0) save(path, run);
      }
      _exit(3);  // not reached: the kill comes first (_exit: no destructors, no atexit in the child)
    }
    int status = 0;  // how the child ended
    waitpid(child, &status, 0);
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    std::printf("child %s while saving step %d\n", killed ? "killed by SIGKILL" : "NOT killed", kKilledSave);
    bool temp_refused = false;  // the step-25 save, left in "<path>.tmp.<pid>.<n>"
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().string() == path) continue;
      try {
        load_safetensors(entry.path().string());
      } catch (const std::exception& e) {
        temp_refused = true;
        std::printf("half-written temp file refused: %s\n", e.what());
      }
    }
    std::printf("stale temp files removed: %d\n", remove_stale_temps(path));  // their writer is gone
    Run a;  // run A: 40 steps, never interrupted
    std::vector<float> losses_a;
    while (a.step < kSteps) losses_a.push_back(a.train_step());
    std::printf("run A: loss %.4f at step 1, %.4f at step %d\n", losses_a.front(), losses_a.back(), kSteps);

    Run b;  // run B, second half: a fresh process state, then everything from the checkpoint
    load(path, b);
    std::printf("checkpoint on disk: step %d, loads (rng offset %llu)\n", b.step,
                static_cast<unsigned long long>(default_generator().offset()));
    std::printf(" step  run A (no kill)  run B (resumed)  same bits\n");
    bool identical = b.step == kKilledSave - kSaveEvery;  // the last complete save
    while (b.step < kSteps) {
      const float loss_b = b.train_step(), loss_a = losses_a[b.step - 1];
      const bool same = std::memcmp(&loss_a, &loss_b, sizeof(float)) == 0;  // the bits, not a tolerance
      identical = identical && same;
      std::printf("%5d  %15.9g  %15.9g  %s\n", b.step, loss_a, loss_b, same ? "yes" : "NO");
    }
    std::printf("bit-identical: %s\n", identical ? "yes" : "no");
    fs::remove_all(dir, ignored);
    return killed && temp_refused && identical && losses_a.back() < losses_a.front() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    fs::remove_all(dir, ignored);
    return 1;
  }
}
