// The op-level profiler (autograd/profiler.h, train.profile) and train.tf32: the outermost-scope rule,
// FLOPs counted where the GEMMs run, the table of a tiny training run through `relgrad train` (calls
// and FLOPs per step computed by hand from the model, shares adding up, profile.json), a run without
// profiling writing nothing and the same weights bit for bit, the config errors; TF32 on the GPU.
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "autograd/profiler.h"
#include "cli_testing.h"
#include "core/backend/matmul.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/config.h"
#include "train/trainer/checkpoint.h"
#include "train/trainer/trainer.h"
#include "trainer_testing.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// One profiled step of `body` on the CPU.
ProfileReport profile_once(const std::function<void()>& body) {
  Profiler p(Device::cpu());
  p.begin_step();
  body();
  p.end_step();
  return p.report();
}

double calls(const ProfileReport& r, const std::string& op) {
  const ProfileRow* row = r.find(op);
  return row ? double(row->calls) : 0.0;
}
double flops(const ProfileReport& r, const std::string& op) {
  const ProfileRow* row = r.find(op);
  return row ? row->flops : 0.0;
}

}  // namespace

TEST_CASE("profiler: outermost ops only, GEMM FLOPs where they run, rows within the step") {
  Tensor a = uniform({4, 5}, -1, 1, kFloat32, 1).requires_grad_(true);
  Tensor b = uniform({5, 3}, -1, 1, kFloat32, 2).requires_grad_(true);
  Tensor v = uniform({5}, -1, 1, kFloat32, 3);  // no gradient
  ProfileReport r = profile_once([&] {
    Tensor y = matmul(a, b);  // (4,5) @ (5,3): 2·4·3·5 = 120 FLOPs; both gradients: 240 backward
    Tensor z = matmul(a, v);  // 1-D operand: unsqueeze / squeeze inside matmul; only dA: 40 backward
    sum(y).backward();
    sum(z).backward();
  });
  CHECK(r.steps == 1);
  CHECK(calls(r, "matmul") == 2);
  CHECK(flops(r, "matmul") == doctest::Approx(120 + 40));
  CHECK(calls(r, "matmul.backward") == 2);
  CHECK(flops(r, "matmul.backward") == doctest::Approx(240 + 40));
  CHECK(calls(r, "sum") == 2);
  CHECK(calls(r, "sum.backward") == 2);
  // The views matmul makes of a 1-D operand ran inside it: no forward row of their own. Their tape
  // nodes are walked by the engine, each its own backward row (v needs no gradient: no unsqueeze node).
  CHECK(r.find("unsqueeze") == nullptr);
  CHECK(r.find("squeeze") == nullptr);
  CHECK(r.find("unsqueeze.backward") == nullptr);
  CHECK(calls(r, "squeeze.backward") == 1);
  CHECK(calls(r, "accumulate_grad") >= 2);  // a's .grad from two backward passes, b's once
  CHECK(flops(r, "sum") == 0);
  CHECK(r.attributed_seconds() <= r.step_seconds);
  CHECK(r.unattributed_seconds() >= 0);
  // Nothing is recorded outside a step, and a cancelled step leaves the totals as they were.
  Profiler p(Device::cpu());
  matmul(a, b);
  p.begin_step();
  check_throws_with([&] { p.begin_step(); }, "[profile] a profiled step is already open");
  matmul(a, b);
  p.cancel_step();
  matmul(a, b);
  CHECK(p.report().rows.empty());
  CHECK(p.report().steps == 0);
  check_throws_with([&] { p.end_step(); }, "[profile] end_step without begin_step");
}

TEST_CASE("profiler: nested ops count once, under the outermost name") {
  Tensor x = uniform({3, 4}, -1, 1, kFloat32, 4).requires_grad_(true);
  Tensor w = uniform({4, 2}, -1, 1, kFloat32, 5).requires_grad_(true);
  ProfileReport r = profile_once([&] {
    Tensor y = add(x, 2.0);  // add(Tensor, double) makes a scalar tensor and calls add(Tensor, Tensor)
    Tensor z;
    {
      ProfileScope block("my_block");  // a phase of the caller's own: the ops inside are its time
      z = exp(matmul(y, w));
    }
    sum(z).backward();
  });
  CHECK(calls(r, "add") == 1);
  CHECK(calls(r, "my_block") == 1);
  CHECK(flops(r, "my_block") == 2.0 * 3 * 2 * 4);  // the GEMM's FLOPs go to the outermost scope
  CHECK(r.find("matmul") == nullptr);
  CHECK(r.find("exp") == nullptr);
  // The tape still has every op: their backward rows come from the engine.
  CHECK(calls(r, "add.backward") == 1);
  CHECK(calls(r, "matmul.backward") == 1);
  CHECK(calls(r, "exp.backward") == 1);
  // The matmuls inside matmul's backward are not rows of their own either.
  CHECK(flops(r, "matmul.backward") == 2 * 2.0 * 3 * 2 * 4);
}

TEST_CASE("profiler: attention_flops") {
  CHECK(attention_flops(2, 3, 5, 7, 8, false, false) == 4.0 * 2 * 3 * 5 * 7 * 8);
  CHECK(attention_flops(2, 3, 5, 7, 8, true, false) == 2.0 * 2 * 3 * 5 * 7 * 8);
  CHECK(attention_flops(2, 3, 5, 7, 8, false, true) == 2.5 * 4.0 * 2 * 3 * 5 * 7 * 8);
}

// ---- train.profile through relgrad train ------------------------------------------------------------
namespace {

// A 1-layer byte-level decoder-only LM without positional scheme, the composite attention core:
// per micro-batch its forward runs 4 projections + q·kᵀ + p·v + 2 feed-forward Linears + the tied
// head = 9 GEMMs (matmul or addmm).
const int64_t kB = 4, kT = 16, kD = 16, kH = 2, kFF = 32;
std::vector<std::string> lm_args(const std::string& text, const std::string& out_dir, int64_t steps) {
  return {"--train.out_dir=" + out_dir, "--model.type=decoder-only", "--data.source=text",
          "--data.text_path=" + text, "--data.context=" + std::to_string(kT), "--data.val_fraction=0.2",
          "--data.batch_size=" + std::to_string(kB), "--model.d_model=" + std::to_string(kD),
          "--model.n_heads=" + std::to_string(kH), "--model.d_ff=" + std::to_string(kFF),
          "--model.n_decoder_layers=1", "--model.decoder_self.scheme=none", "--model.fused_attention=false",
          "--model.absolute_position=none", "--model.norm=layer_norm", "--model.pre_norm=true",
          "--model.activation=gelu", "--model.tie_weights=true",
          "--model.dropout=0", "--optim.warmup_steps=1", "--train.steps=" + std::to_string(steps),
          "--train.log_every=1", "--train.eval_every=0", "--train.eval_batches=1", "--train.save_every=0",
          "--train.samples=0", "--train.target_accuracy=0", "--train.threads=1", "--train.batch_shards=1"};
}

std::string write_corpus(const TempDir& dir) {
  std::string text;
  for (int k = 0; k < 40; ++k) text += "In the beginning " + std::to_string(k * 7 % 13) + " the quick brown fox.\n";
  write_bytes(dir.file("corpus.txt"), text);
  return dir.file("corpus.txt");
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// profile.json's rows by op.
std::map<std::string, nlohmann::json> rows_of(const nlohmann::json& j) {
  std::map<std::string, nlohmann::json> rows;
  for (const auto& row : j.at("ops")) rows[row.at("op").get<std::string>()] = row;
  return rows;
}

// `shards` > 1: the batch in that many shards (train.batch_shards) at as many threads; a profiled step
// runs them one after another, so every shard's ops are counted (each Linear once per shard).
void check_profiled_run(const std::string& device, int shards = 1) {
  TempDir dir;
  const std::string text = write_corpus(dir), run = dir.file("run");
  const int64_t steps = 5, profiled = 3;
  const std::string n = std::to_string(shards);
  CliResult r = run_relgrad(with({"train"}, with(lm_args(text, run, steps),
                                                 {"--train.profile=" + std::to_string(profiled), "--train.device=" + device,
                                                  "--train.batch_shards=" + n, "--train.threads=" + n})));
  CHECK_CLI(r, 0);
  CHECK(contains(r.out, "profile: 3 steps (steps 2-4) on " + (device == "cpu" ? std::string("cpu") : "cuda:0")));
  CHECK(contains(r.out, "profile written to " + run + "/profile.json"));
  REQUIRE(fs::exists(run + "/profile.json"));
  const nlohmann::json j = nlohmann::json::parse(read_bytes(run + "/profile.json"));
  CHECK(j.at("steps") == profiled);
  CHECK(j.at("first_step") == 2);
  std::map<std::string, nlohmann::json> rows = rows_of(j);
  for (const char* op : {"matmul", "matmul.backward", "layer_norm", "layer_norm.backward", "masked_softmax",
                         "masked_softmax.backward", "cross_entropy", "cross_entropy.backward", "bias_activation",
                         "bias_activation.backward", "residual_layer_norm", "residual_layer_norm.backward",
                         "embedding.backward", "optimizer.step", "clip_grad_norm_", "accumulate_grad"})
    CHECK_MESSAGE(rows.count(op), op << " missing from " << j.dump());
  auto per_step = [&](const std::string& op, const char* field) {
    return rows.count(op) ? rows[op].at(field).get<double>() / double(profiled) : 0.0;
  };
  // GEMM calls: 9 per step (see lm_args), whichever of matmul and addmm each Linear uses; attention's
  // two causal products are window_scores and window_apply where those skip the future (autograd/ops.h).
  auto gemms = [&](const std::string& pass, const char* field) {
    double total = 0;
    for (const char* op : {"matmul", "addmm", "window_scores", "window_apply"}) total += per_step(op + pass, field);
    return total;
  };
  CHECK(gemms("", "calls") == 9 * shards);
  CHECK(gemms(".backward", "calls") == 9 * shards);
  std::vector<int64_t> positions(static_cast<size_t>(kT));
  for (int64_t i = 0; i < kT; ++i) positions[i] = i;
  // the same machine and library as the run's (at kT keys the window does not pay, so this is false)
  const bool windows = window_products_skip(zeros({1}), *MatrixWindow::causal(positions, kT, "test"));
  CHECK(per_step("window_scores", "calls") == (windows ? shards : 0));
  CHECK(per_step("window_apply", "calls") == (windows ? shards : 0));
  CHECK(per_step("optimizer.step", "calls") == 1);
  CHECK(per_step("cross_entropy", "calls") == shards);
  CHECK(per_step("layer_norm", "calls") == 2 * shards);           // before attention, the final one
  CHECK(per_step("residual_layer_norm", "calls") == shards);  // the residual add and the norm before the feed-forward
  // GEMM FLOPs per step, from the shapes by hand: 2·M·N·K each, the causal products' times the share of
  // (query, key) pairs they compute, (T + 1) / 2T, when they skip the future. Every operand needs its
  // gradient, so the backward does two GEMMs of the same size for each.
  RunConfig c = RunConfig::defaults();
  apply_overrides(c, lm_args(text, run, steps));
  c.derive_from_data();
  const double BT = double(kB * kT), V = double(c.model.vocab_size), Dh = double(kD / kH);
  const double causal_share = windows ? double(kT + 1) / double(2 * kT) : 1.0;
  const double forward = 4 * 2 * BT * kD * kD + 2 * (2.0 * kB * kH * kT * kT * Dh) * causal_share +
                         2 * (2 * BT * kD * kFF) + 2 * BT * kD * V;
  CHECK(gemms("", "flops") == doctest::Approx(forward).epsilon(1e-12));
  CHECK(gemms(".backward", "flops") == doctest::Approx(2 * forward).epsilon(1e-12));
  CHECK(rows["matmul"].at("gflops_per_s").get<double>() > 0);
  CHECK(rows["layer_norm"].at("gflops_per_s").is_null());
  // Shares: each in [0, 1], adding up to the whole step with the unattributed remainder.
  double total_share = j.at("unattributed_share").get<double>(), total_s = j.at("unattributed_s").get<double>();
  CHECK(total_share >= 0);
  for (const auto& [op, row] : rows) {
    CHECK(row.at("share").get<double>() >= 0);
    CHECK(row.at("share").get<double>() <= 1);
    total_share += row.at("share").get<double>();
    total_s += row.at("total_s").get<double>();
  }
  CHECK(total_share == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(total_s == doctest::Approx(j.at("step_total_s").get<double>()).epsilon(1e-9));
}

std::map<std::string, Tensor> weights_of(const std::string& run) { return load_checkpoint(run + "/checkpoint.safetensors").model; }

}  // namespace

TEST_CASE("profiler: train.profile through relgrad train (CPU)") { check_profiled_run("cpu"); }
TEST_CASE("profiler: train.profile with 2 batch shards at 2 threads counts both shards' ops") { check_profiled_run("cpu", 2); }

TEST_CASE("profiler: train.profile through relgrad train (GPU)") {
  if (!have_gpu()) return;
  check_profiled_run("cuda");
}

TEST_CASE("profiler: without train.profile nothing is written, and profiling changes no result") {
  TempDir dir;
  const std::string text = write_corpus(dir);
  const std::string plain = dir.file("plain"), off = dir.file("off"), on = dir.file("on");
  CHECK_CLI(run_relgrad(with({"train"}, lm_args(text, plain, 4))), 0);
  CliResult r_off = run_relgrad(with({"train"}, with(lm_args(text, off, 4), {"--train.profile=0"})));
  CHECK_CLI(r_off, 0);
  CHECK_CLI(run_relgrad(with({"train"}, with(lm_args(text, on, 4), {"--train.profile=2"}))), 0);
  CHECK_FALSE(fs::exists(plain + "/profile.json"));
  CHECK_FALSE(fs::exists(off + "/profile.json"));
  CHECK_FALSE(contains(r_off.out, "profile:"));
  CHECK(fs::exists(on + "/profile.json"));
  const auto base = weights_of(plain);
  for (const std::string& run : {off, on}) {
    const auto w = weights_of(run);
    REQUIRE(w.size() == base.size());
    for (const auto& entry : base) {
      const auto& name = entry.first;
      const auto& t = entry.second;
      CHECK_MESSAGE(bitwise_equal(t, w.at(name)), run << ": " << name << " differs");
    }
  }
}

TEST_CASE("profiler: a run shorter than train.profile reports the steps it profiled") {
  TempDir dir;
  const std::string text = write_corpus(dir), run = dir.file("run");
  RunConfig c = RunConfig::defaults();
  apply_overrides(c, with(lm_args(text, run, 6), {"--train.profile=4"}));
  c.validate();
  std::ostringstream out;
  Trainer t(trainer_options(c), &out);
  // Interrupted during step 3 (as by Ctrl-C): steps 2 and 3 of the 4 asked for were profiled.
  t.set_after_backward([](Trainer& tr) {
    if (tr.step() == 2) request_training_stop(2);
  });
  TrainResult result = t.train();
  clear_training_stop();
  CHECK(result.interrupted_by == 2);
  CHECK(contains(out.str(), "profile: 2 steps (steps 2-3)"));
  CHECK(contains(out.str(), "the run ended after 2 of the 4 steps of train.profile"));
  const nlohmann::json j = nlohmann::json::parse(read_bytes(run + "/profile.json"));
  CHECK(j.at("steps") == 2);
  CHECK(j.at("first_step") == 2);
}

TEST_CASE("profiler: bad train.profile and train.tf32 values are config errors naming the key") {
  TempDir dir;
  const std::string text = write_corpus(dir), run = dir.file("run");
  struct Case {
    std::string arg, expected;
  };
  for (const Case& k : std::vector<Case>{
           {"--train.profile=-1", "train.profile must be in [0, train.steps - 1 = 4]"},
           {"--train.profile=5", "train.profile must be in [0, train.steps - 1 = 4]"},
           {"--train.profile=two", "train.profile"},
           {"--train.tf32=maybe", "train.tf32"},
       }) {
    CliResult r = run_relgrad(with({"train"}, with(lm_args(text, run, 5), {k.arg})));
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, k.expected), k.arg << ": " << r.err);
  }
  CHECK_FALSE(fs::exists(run));  // nothing written
  CliResult dry = run_relgrad(with({"train", "--dry-run"}, with(lm_args(text, run, 5), {"--train.tf32=true", "--train.profile=4"})));
  CHECK_CLI(dry, 0);
  CHECK(contains(dry.out, "tf32 = true"));
  CHECK(contains(dry.out, "profile = 4"));
}

// ---- train.tf32 ----------------------------------------------------------------------------------------
TEST_CASE("tf32: a Trainer sets the GEMM mode for its life and restores it, the CPU banner says it does nothing") {
  TempDir dir;
  RunConfig c = tiny_ed(dir.file("run"));
  c.train.tf32 = true;
  REQUIRE_FALSE(backend::allow_tf32());
  {
    Trainer t(trainer_options(c));
    // Only a CUDA build has the switch; without CUDA it stays off (there are no GPU GEMMs to change).
    CHECK(backend::allow_tf32() == cuda_built());
  }
  CHECK_FALSE(backend::allow_tf32());
  const std::string text = write_corpus(dir);
  CliResult r = run_relgrad(with({"train"}, with(lm_args(text, dir.file("cpu"), 2), {"--train.tf32=true"})));
  CHECK_CLI(r, 0);
  CHECK(contains(r.out, "note: train.tf32 = true has no effect on the CPU"));
  CHECK_FALSE(backend::allow_tf32());
}

TEST_CASE("tf32: on the GPU a TF32 GEMM differs by ~1e-3 relative, without it the GPU matches the CPU") {
  if (!have_gpu()) return;
  REQUIRE_FALSE(backend::allow_tf32());
  Tensor a = uniform({256, 512}, -1, 1, kFloat32, 7), b = uniform({512, 192}, -1, 1, kFloat32, 8);
  Tensor cpu = matmul(a, b);
  auto on_gpu = [&] { return matmul(a.to(Device::cuda()), b.to(Device::cuda())).to(Device::cpu()); };
  Tensor full = on_gpu();
  backend::set_allow_tf32(true);
  Tensor tf32 = on_gpu();
  backend::set_allow_tf32(false);
  auto relative = [](const Tensor& x, const Tensor& y) {
    return max(abs(sub(x, y))).item() / max(abs(y)).item();
  };
  CHECK(relative(full, cpu) < 1e-5);
  const double d = relative(tf32, full);
  MESSAGE("TF32 relative difference: " << d);
  CHECK(d > 1e-5);  // TF32 rounds the operands to 10 mantissa bits: it does differ ...
  CHECK(d < 1e-2);  // ... by about 1e-3
}
