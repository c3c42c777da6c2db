// Training on the GPU (train.device = "cuda", relgrad train --device cuda): the trajectory against the
// CPU's, checkpoints across devices, and the clear error when CUDA is asked for but absent. The
// last ones run everywhere (CI has no GPU); the others start with have_gpu().
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/command/cli.h"
#include "train/trainer/trainer.h"

namespace relgrad::testing {
namespace {



// A trainer draws its dropout masks from the process's default generator (train/trainer/trainer.cpp
// sets its state when the trainer is built and when it resumes). Two trainers stepping in turn in one
// process would share that one stream, so here each keeps its own: the state is put back before each
// of its steps and taken after, as if it ran alone.
struct OwnStream {
  Trainer& trainer;
  uint64_t seed = default_generator().seed(), offset = default_generator().offset();  // taken when made
  explicit OwnStream(Trainer& t) : trainer(t) {}
  void enter() const { default_generator().set_state(seed, offset); }
  void leave() { seed = default_generator().seed(), offset = default_generator().offset(); }
  double train_step() {
    enter();
    const double loss = trainer.train_step();
    leave();
    return loss;
  }
};

// What the error says on this machine when CUDA is asked for (only meaningful without a GPU).
std::string expected_no_cuda(const std::string& what) {
  return what + " = cuda, but " +
         (cuda_built() ? std::string("no CUDA device is visible") : std::string("relgrad was built without CUDA support"));
}

// tiny_ed, small and quick, with dropout p (0: the trajectories compare without the RNG).
RunConfig tiny(const std::string& out_dir, double dropout, const std::string& device) {
  RunConfig c = tiny_ed(out_dir);
  c.model.dropout = dropout;
  c.train.steps = 10;
  c.train.device = device;
  return c;
}

// Parameters and optimizer state of a trainer as host tensors, by name.
std::vector<std::pair<std::string, Tensor>> host_state(Trainer& t) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : t.model().module->named_parameters()) out.emplace_back(name, p.detach().to(Device::cpu()));
  for (const auto& [name, s] : t.optimizer().state_tensors()) out.emplace_back("optim." + name, s.to(Device::cpu()));
  return out;
}

void check_states_equal(Trainer& a, Trainer& b) {
  auto x = host_state(a), y = host_state(b);
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(x[i].first);
    REQUIRE(x[i].first == y[i].first);
    CHECK(bitwise_equal(x[i].second, y[i].second));
  }
}

}  // namespace

// ---- without a GPU too --------------------------------------------------------------------------

TEST_CASE("cuda train: asking for CUDA where there is none is a clear usage error before any work") {
  if (cuda_available()) {
    // This machine has a GPU: the "absent" errors cannot happen; a device index beyond the visible
    // ones is the same kind of error.
    CliResult bad = run_relgrad({"eval", "/nonexistent.safetensors", "--device", "cuda:99"});
    CHECK(bad.code == 2);
    CHECK(contains(bad.err, "--device = cuda:99, but only"));
    check_throws_with([&] { resolve_device("cuda:99", "train.device"); }, "train.device = cuda:99, but only");
    return;
  }
  TempDir dir;
  const std::string out_dir = dir.file("run");
  // relgrad train --device cuda: exit 2 (as other config errors), one line, nothing written.
  CliResult r = run_relgrad({"train", "--device", "cuda", "--train.out_dir=" + out_dir, "--train.steps=1", "--optim.warmup_steps=0"});
  CHECK(r.code == 2);
  CHECK(contains(r.err, "relgrad train: error: [config] " + expected_no_cuda("train.device")));
  CHECK_FALSE(contains(r.out, "step "));
  CHECK_FALSE(std::filesystem::exists(out_dir));
  // The config key itself, and the Trainer from C++.
  CliResult key = run_relgrad({"train", "--train.device=cuda", "--train.out_dir=" + out_dir, "--train.steps=1",
                    "--optim.warmup_steps=0"});
  CHECK(key.code == 2);
  CHECK(contains(key.err, expected_no_cuda("train.device")));
  CHECK_FALSE(std::filesystem::exists(out_dir));
  check_throws_with([&] { Trainer t(trainer_options(tiny(out_dir, 0.0, "cuda"))); }, expected_no_cuda("train.device"));
  CHECK_FALSE(std::filesystem::exists(out_dir));
  // --device on sample and eval: checked before the checkpoint is read (it does not exist here).
  for (const char* command : {"sample", "eval"}) {
    CliResult s = run_relgrad({command, dir.file("missing.safetensors"), "--device", "cuda"});
    CHECK(s.code == 2);
    CHECK(contains(s.err, expected_no_cuda("--device")));
  }
  // A name that is no device at all.
  CliResult odd = run_relgrad({"eval", dir.file("missing.safetensors"), "--device", "gpu"});
  CHECK(odd.code == 2);
  CHECK(contains(odd.err, "--device = gpu: expected cpu, cuda or cuda:N"));
  CHECK(resolve_device("cpu", "train.device") == Device::cpu());
}

TEST_CASE("cuda train: a checkpoint whose config says cuda samples, evaluates and resumes on the CPU") {
  // As if written on a GPU machine: checkpoints hold host tensors whatever device trained them, so
  // only the config's train.device tells; it must not stop a CPU machine from using the file.
  TempDir dir;
  RunConfig config = tiny(dir.file("run"), 0.0, "cpu");
  config.train.steps = 2;
  {
    Trainer cpu(trainer_options(config));
    cpu.train();
  }
  const std::string ck = dir.file("run/checkpoint.safetensors");
  Checkpoint saved = load_checkpoint(ck);
  RunConfig as_gpu = config;
  as_gpu.train.device = "cuda";
  CheckpointMeta meta = saved.meta;
  meta.config_json = config_to_json(as_gpu);
  const std::string gpu_ck = dir.file("gpu_checkpoint.safetensors");
  {
    LoadedRun loaded = load_run(ck);
    save_checkpoint(gpu_ck, *loaded.model->module, nullptr, meta);
  }
  LoadedRun back = load_run(gpu_ck);  // the default device: the CPU
  CHECK(back.config.train.device == "cuda");
  CHECK(back.model->device == Device::cpu());
  CHECK(device_of(*back.model->module) == Device::cpu());
  CliResult s = run_relgrad({"sample", gpu_ck, "-n", "1"});
  CHECK(s.code == 0);
  CliResult e = run_relgrad({"eval", gpu_ck, "--batches", "1", "--device", "cpu"});
  CHECK(e.code == 0);
  CHECK(contains(e.out, "held-out loss"));
}

// ---- on a GPU -----------------------------------------------------------------------------------

TEST_CASE("cuda train: a 10-step trajectory on the GPU follows the CPU's within 1e-3") {
  if (!have_gpu()) return;
  for (double dropout : {0.0, 0.1}) {  // 0.1: the GPU's dropout masks are the CPU's (one Philox stream)
    INFO("dropout ", dropout);
    TempDir dir;
    Trainer cpu(trainer_options(tiny(dir.file("cpu"), dropout, "cpu")));
    OwnStream cpu_stream(cpu);
    Trainer gpu(trainer_options(tiny(dir.file("gpu"), dropout, "cuda")));
    OwnStream gpu_stream(gpu);
    CHECK(gpu.model().device.is_cuda());
    for (const auto& [name, p] : gpu.model().module->named_parameters()) CHECK(p.device().is_cuda());
    for (const auto& [name, s] : gpu.optimizer().state_tensors())
      if (s.numel() > 1) CHECK(s.device().is_cuda());
    // The same initial weights: both are drawn on the host from train.seed.
    for (size_t i = 0; i < cpu.model().module->parameters().size(); ++i)
      CHECK(bitwise_equal(cpu.model().module->parameters()[i].detach(),
                          gpu.model().module->parameters()[i].detach().to(Device::cpu())));
    for (int step = 0; step < 10; ++step) {
      INFO("step ", step);
      const double a = cpu_stream.train_step(), b = gpu_stream.train_step();
      CHECK(std::isfinite(b));
      CHECK(std::fabs(a - b) <= 1e-3);
      CHECK(std::fabs(cpu.last_grad_norm() - gpu.last_grad_norm()) <= 1e-3 * std::max(1.0, cpu.last_grad_norm()));
    }
    auto pc = cpu.model().module->named_parameters(), pg = gpu.model().module->named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      INFO(pc[i].first);
      CHECK_CLOSE(pg[i].second.detach().to(Device::cpu()), pc[i].second.detach(), 1e-3, 1e-3);
    }
    EvalResult ec = cpu.evaluate(), eg = gpu.evaluate();
    CHECK(std::fabs(ec.loss - eg.loss) <= 1e-3);
    CHECK(eg.tokens == ec.tokens);
  }
}

TEST_CASE("cuda train: checkpoints go from the GPU to the CPU and back, optimizer state included") {
  if (!have_gpu()) return;
  TempDir dir;
  RunConfig gpu_config = tiny(dir.file("gpu"), 0.1, "cuda");
  gpu_config.train.steps = 3;
  gpu_config.train.save_every = 3;
  Trainer gpu(trainer_options(gpu_config));
  gpu.train();
  OwnStream gpu_stream(gpu);
  const std::string gpu_ck = gpu.checkpoint_path();

  // GPU → CPU: the same weights, moments, step counts and data position, bit for bit.
  RunConfig cpu_config = tiny(dir.file("cpu"), 0.1, "cpu");
  cpu_config.train.steps = gpu_config.train.steps;  // the same schedule: steps 4 and 5 take the same rate
  Trainer cpu(trainer_options(cpu_config));
  cpu.resume(gpu_ck);
  OwnStream cpu_stream(cpu);  // the stream the checkpoint carried: the GPU trainer's, after step 3
  CHECK(cpu_stream.seed == gpu_stream.seed);
  CHECK(cpu_stream.offset == gpu_stream.offset);
  CHECK(cpu.step() == 3);
  CHECK(cpu.data_position() == gpu.data_position());
  check_states_equal(cpu, gpu);
  for (const auto& [name, p] : cpu.model().module->named_parameters()) CHECK(p.device().is_cpu());
  // ... and both continue alike (the dropout generator's state came along too).
  for (int step = 0; step < 2; ++step) CHECK(std::fabs(cpu_stream.train_step() - gpu_stream.train_step()) <= 1e-3);

  // CPU → GPU: resume the CPU's checkpoint on the GPU.
  cpu_stream.enter();  // the checkpoint records the CPU trainer's stream
  cpu.save(dir.file("cpu_checkpoint.safetensors"));
  Trainer gpu2(trainer_options(tiny(dir.file("gpu2"), 0.1, "cuda")));  // 10 steps: the checkpoint is at 5
  gpu2.resume(dir.file("cpu_checkpoint.safetensors"));
  OwnStream gpu2_stream(gpu2);
  CHECK(gpu2.step() == cpu.step());
  check_states_equal(gpu2, cpu);
  for (const auto& [name, p] : gpu2.model().module->named_parameters()) CHECK(p.device().is_cuda());
  for (const auto& [name, s] : gpu2.optimizer().state_tensors())
    if (s.numel() > 1) CHECK(s.device().is_cuda());
  CHECK(std::fabs(cpu_stream.train_step() - gpu2_stream.train_step()) <= 1e-3);

  // load_run onto either device, and the command line.
  LoadedRun on_gpu = load_run(gpu_ck, Device::cuda());
  LoadedRun on_cpu = load_run(gpu_ck);
  CHECK(device_of(*on_gpu.model->module).is_cuda());
  RunData data(on_cpu.config);
  EvalResult a = evaluate(*on_cpu.model, data.dataset(), 2), b = evaluate(*on_gpu.model, data.dataset(), 2);
  CHECK(std::fabs(a.loss - b.loss) <= 1e-4);
  CHECK(a.tokens == b.tokens);
  CliResult e = run_relgrad({"eval", gpu_ck, "--batches", "2", "--device", "cuda"});
  CHECK(e.code == 0);
  CliResult s = run_relgrad({"sample", gpu_ck, "-n", "2", "--device", "cuda"});
  CHECK(s.code == 0);
  CHECK(run_relgrad({"sample", gpu_ck, "-n", "2"}).out == s.out);  // greedy on both devices: the same tokens
  CliResult t = run_relgrad({"train", "--resume", gpu_ck, "--device", "cuda", "--train.steps=5",
                  "--train.out_dir=" + dir.file("cli")});
  CHECK(t.code == 0);
  CHECK(contains(t.out, "on cuda:0"));
}

}  // namespace relgrad::testing
