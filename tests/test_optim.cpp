// Optimizers, schedules and clipping (train/). The trajectories are checked step by step against
// torch.optim 1.13 in float64 (tests/golden/optim_trajectories.safetensors, tools/gen_golden_optim.py):
// the same fixed gradients are clipped, the lr set from a warmup + cosine schedule, and a step taken.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "core/cpu/reduce.h"
#include "core/safetensors.h"
#include "testing.h"
#include "thread_count.h"
#include "train/optim/optim.h"
#include "train/optim/schedule.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;

namespace {

constexpr double kAtol = 1e-12, kRtol = 1e-10;
const char* const kHint = "regenerate with /usr/bin/python3 tools/gen_golden_optim.py if the generator changed";
using Named = std::vector<std::pair<std::string, Tensor>>;
using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const Tensor& W, const Tensor& b)>;

const SafetensorsFile& golden() {
  static SafetensorsFile file =
      load_safetensors(std::string(RELGRAD_GOLDEN_DIR) + "/optim_trajectories.safetensors");
  return file;
}
Tensor at(const std::string& key) {
  auto it = golden().tensors.find(key);
  std::string report = "optim_trajectories has no tensor '" + key + "'; " + kHint;
  REQUIRE_MESSAGE(it != golden().tensors.end(), report);
  return it->second;
}
Tensor leaf(const std::string& key) { return at(key).clone().detach().requires_grad_(); }

// The schedule of the golden file: warmup 3, cosine to 0.1 * max_lr at step 10.
LrSchedule golden_schedule(double max_lr) { return LrSchedule(max_lr, 3, 10, 0.1 * max_lr); }

// Sets the golden gradients of `step`, clips at 1.0, sets the lr and steps; returns the clip norm.
double golden_step(Optimizer& opt, Tensor& W, Tensor& b, int64_t step, const LrSchedule& schedule) {
  opt.zero_grad();
  W.set_grad(at("grad.W").select(0, step).clone());
  b.set_grad(at("grad.b").select(0, step).clone());
  double norm = clip_grad_norm_({W, b}, 1.0);
  opt.set_lr(schedule.lr_at(step));
  opt.step();
  return norm;
}

// Replays one configuration of tools/gen_golden_optim.py (keep the hyperparameters in step with it).
void check_trajectory(const std::string& name, double max_lr, const MakeOptimizer& make) {
  Tensor W = leaf("init.W"), b = leaf("init.b");
  auto opt = make(W, b);
  LrSchedule schedule = golden_schedule(max_lr);
  std::vector<double> norms = at(name + ".clip_norm").to_vector<double>();
  std::vector<double> lrs = at(name + ".lr").to_vector<double>();
  for (int64_t step = 0; step < 10; ++step) {
    std::string where = name + " step " + std::to_string(step) + " (" + kHint + ")";
    INFO(where);
    CHECK(schedule.lr_at(step) == doctest::Approx(lrs[step]).epsilon(1e-14));
    double norm = golden_step(*opt, W, b, step, schedule);
    CHECK(std::fabs(norm - norms[step]) <= kAtol + kRtol * norms[step]);
    CHECK_CLOSE(W, at(name + ".W").select(0, step), kAtol, kRtol);
    CHECK_CLOSE(b, at(name + ".b").select(0, step), kAtol, kRtol);
  }
  CHECK(opt->step_count() == 10);
}

Tensor param(const Shape& shape, uint64_t seed) {
  return relgrad::testing::uniform(shape, -1, 1, kFloat64, seed).requires_grad_();
}

}  // namespace

// ---- golden trajectories against torch.optim -------------------------------------------------------
TEST_CASE("optim golden: SGD momentum 0.9, weight decay 0.01") {
  check_trajectory("sgd_momentum", 0.1, [](const Tensor& W, const Tensor& b) {
    return std::make_unique<SGD>(TensorList{W, b}, SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  });
}
TEST_CASE("optim golden: SGD nesterov momentum 0.9, weight decay 0.01") {
  check_trajectory("sgd_nesterov", 0.1, [](const Tensor& W, const Tensor& b) {
    return std::make_unique<SGD>(TensorList{W, b}, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  });
}
TEST_CASE("optim golden: SGD momentum 0.9, dampening 0.3") {
  check_trajectory("sgd_dampening", 0.1, [](const Tensor& W, const Tensor& b) {
    return std::make_unique<SGD>(TensorList{W, b}, SGDOptions(0.1).momentum(0.9).dampening(0.3));
  });
}
TEST_CASE("optim golden: Adam betas (0.9, 0.95), L2 weight decay 0.01") {
  check_trajectory("adam", 0.01, [](const Tensor& W, const Tensor& b) {
    return std::make_unique<Adam>(TensorList{W, b}, AdamOptions(0.01).betas(0.9, 0.95).eps(1e-8).weight_decay(0.01));
  });
}
TEST_CASE("optim golden: AdamW with decay_groups (matrix decays 0.1, vector does not)") {
  check_trajectory("adamw", 0.01, [](const Tensor& W, const Tensor& b) {
    auto groups = decay_groups({{"fc.weight", W}, {"fc.bias", b}}, 0.01, 0.1);
    return std::make_unique<AdamW>(groups, AdamWOptions(0.01).betas(0.9, 0.95).eps(1e-8));
  });
}

// ---- schedules -------------------------------------------------------------------------------------
TEST_CASE("LrSchedule: warmup then cosine, linear or constant, at chosen steps") {
  const double pi = std::acos(-1.0);
  LrSchedule cosine(1.0, 4, 14, 0.1);  // decay over steps 4..14, r = (step - 4) / 10
  CHECK(cosine.lr_at(0) == doctest::Approx(0.25));  // (0 + 1) / 4: the first step already learns
  CHECK(cosine.lr_at(3) == doctest::Approx(1.0));   // warmup reaches max_lr at its last step
  CHECK(cosine.lr_at(4) == doctest::Approx(1.0));   // r = 0
  CHECK(cosine.lr_at(9) == doctest::Approx(0.1 + 0.5 * (1 + std::cos(pi * 0.5)) * 0.9));  // halfway: 0.55
  CHECK(cosine.lr_at(11) == doctest::Approx(0.1 + 0.5 * (1 + std::cos(pi * 0.7)) * 0.9));
  CHECK(cosine.lr_at(14) == doctest::Approx(0.1));
  CHECK(cosine.lr_at(1000) == 0.1);  // after total_steps: min_lr

  LrSchedule linear(2.0, 2, 12, 0.0, LrSchedule::Decay::Linear);
  CHECK(linear.lr_at(0) == doctest::Approx(1.0));
  CHECK(linear.lr_at(7) == doctest::Approx(1.0));   // r = 0.5
  CHECK(linear.lr_at(10) == doctest::Approx(0.4));  // r = 0.8
  CHECK(linear.lr_at(12) == 0.0);

  LrSchedule constant(0.5, 2, 10, 0.0, LrSchedule::Decay::Constant);
  CHECK(constant.lr_at(0) == doctest::Approx(0.25));
  CHECK(constant.lr_at(5) == 0.5);
  CHECK(constant.lr_at(100) == 0.5);

  LrSchedule no_warmup(1.0, 0, 0, 0.2);  // no warmup, no decay phase
  CHECK(no_warmup.lr_at(0) == 0.2);
}

TEST_CASE("LrSchedule: bad inputs name the field") {
  check_throws_with([] { LrSchedule(-1.0, 0, 10); }, "[LrSchedule] invalid max_lr -1");
  check_throws_with([] { LrSchedule(1.0, 0, 10, 2.0); }, "invalid min_lr 2");
  check_throws_with([] { LrSchedule(1.0, 20, 10); }, "need 0 <= warmup_steps <= total_steps");
  check_throws_with([] { LrSchedule(1.0, 2, 10).lr_at(-1); }, "step must be >= 0");
}

// ---- decay_groups ----------------------------------------------------------------------------------
TEST_CASE("decay_groups: matrices decay — biases, norm gains and *norm*/*ln* names do not") {
  Tensor wte = param({10, 4}, 1), qkv_w = param({4, 12}, 2), qkv_b = param({12}, 3);
  Tensor ln_w = param({4}, 4), rms_w = param({4}, 5), ln_2d = param({2, 4}, 6), norm_2d = param({4, 4}, 7);
  Named named = {{"wte.weight", wte},         {"blocks.0.attn.qkv.weight", qkv_w}, {"blocks.0.attn.qkv.bias", qkv_b},
                 {"blocks.0.ln_1.weight", ln_w}, {"blocks.0.rms.weight", rms_w},   {"ln_f.scale2d", ln_2d},
                 {"final_norm.table", norm_2d}};
  auto groups = decay_groups(named, 3e-4, 0.1);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].lr == 3e-4);
  CHECK(groups[0].weight_decay == 0.1);
  CHECK(groups[1].lr == 3e-4);
  CHECK(groups[1].weight_decay == 0.0);
  REQUIRE(groups[0].params.size() == 2);
  CHECK(groups[0].params[0].same(wte));
  CHECK(groups[0].params[1].same(qkv_w));
  REQUIRE(groups[1].params.size() == 5);  // in named_parameters order
  CHECK(groups[1].params[0].same(qkv_b));
  CHECK(groups[1].params[1].same(ln_w));
  CHECK(groups[1].params[2].same(rms_w));
  CHECK(groups[1].params[3].same(ln_2d));
  CHECK(groups[1].params[4].same(norm_2d));
  // An empty group is kept, so AdamW on it works and checkpoint names stay "group1.*".
  auto only_biases = decay_groups({{"bias", qkv_b}}, 1e-3, 0.1);
  CHECK(only_biases[0].params.empty());
  AdamW opt(only_biases, AdamWOptions());
  CHECK(opt.state_tensors().size() == 1 + 3);  // step_count + group1.param0.{step, exp_avg, exp_avg_sq}
  CHECK(opt.state_tensors()[1].first == "group1.param0.step");
}

// ---- zero_grad, skipped params --------------------------------------------------------------------
TEST_CASE("Optimizer: zero_grad drops grads — params without a grad are not updated") {
  Tensor a = param({3}, 1), b = param({2, 2}, 2);
  Tensor b_before = b.clone().detach();
  SGD opt(TensorList{a, b}, SGDOptions(0.5).momentum(0.9));
  a.set_grad(ones({3}, kFloat64));
  opt.step();
  CHECK(opt.step_count() == 1);
  CHECK_CLOSE(b, b_before, 0, 0);  // b had no grad
  auto state = opt.state_tensors();
  CHECK(state[1].first == "group0.param0.step");
  CHECK(state[1].second.item() == 1);
  CHECK(state[3].first == "group0.param1.step");
  CHECK(state[3].second.item() == 0);
  b.set_grad(ones({2, 2}, kFloat64));
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());
  CHECK(GradMode::is_enabled());  // step() restored grad mode
}

// ---- checkpoints -----------------------------------------------------------------------------------
namespace {
// Runs steps [from, to) of the golden gradients.
void run_steps(Optimizer& opt, Tensor& W, Tensor& b, int64_t from, int64_t to) {
  for (int64_t step = from; step < to; ++step) golden_step(opt, W, b, step, golden_schedule(0.05));
}

// 10 steps straight vs 5 steps, state through a safetensors file into a fresh optimizer, 5 more.
void check_round_trip(const MakeOptimizer& make) {
  Tensor W = leaf("init.W"), b = leaf("init.b");
  auto straight = make(W, b);
  run_steps(*straight, W, b, 0, 10);

  Tensor W1 = leaf("init.W"), b1 = leaf("init.b");
  auto first = make(W1, b1);
  run_steps(*first, W1, b1, 0, 5);
  auto dir = std::filesystem::temp_directory_path();
  std::string path = (dir / ("relgrad_optim_state_" + std::to_string(getpid()) + ".safetensors")).string();
  Named saved = first->state_tensors();
  save_safetensors(path, std::map<std::string, Tensor>(saved.begin(), saved.end()));
  SafetensorsFile file = load_safetensors(path);
  std::filesystem::remove(path);

  Tensor W2 = W1.clone().detach().requires_grad_(), b2 = b1.clone().detach().requires_grad_();
  auto second = make(W2, b2);
  second->load_state_tensors(Named(file.tensors.begin(), file.tensors.end()));
  CHECK(second->step_count() == 5);
  run_steps(*second, W2, b2, 5, 10);
  CHECK(second->step_count() == 10);
  CHECK_CLOSE(W2, W, 0, 0);  // bit-identical: the state is all there is
  CHECK_CLOSE(b2, b, 0, 0);
}
}  // namespace

TEST_CASE("Optimizer: state save/load round trip continues exactly (SGD nesterov, Adam, AdamW)") {
  SUBCASE("SGD") {
    check_round_trip([](const Tensor& W, const Tensor& b) {
      return std::make_unique<SGD>(TensorList{W, b}, SGDOptions().momentum(0.9).nesterov(true));
    });
  }
  SUBCASE("Adam") {
    check_round_trip([](const Tensor& W, const Tensor& b) {
      return std::make_unique<Adam>(TensorList{W, b}, AdamOptions().weight_decay(0.01));
    });
  }
  SUBCASE("AdamW") {
    check_round_trip([](const Tensor& W, const Tensor& b) {
      return std::make_unique<AdamW>(decay_groups({{"w", W}, {"b", b}}, 1e-3, 0.1), AdamWOptions());
    });
  }
}

TEST_CASE("Optimizer: mismatched state is refused with a message, and nothing is changed") {
  Tensor W = param({3, 4}, 1), b = param({4}, 2);
  AdamW opt(TensorList{W, b}, AdamWOptions());
  W.set_grad(ones({3, 4}, kFloat64));
  opt.step();
  Named good = opt.state_tensors();
  for (auto& [name, t] : good) t = t.clone();
  REQUIRE(good.size() == 7);  // step_count + 2 params x {step, exp_avg, exp_avg_sq}

  Named missing(good.begin(), good.end() - 1);
  check_throws_with([&] { opt.load_state_tensors(missing); },
                    "[AdamW.load_state_tensors] missing entry 'group0.param1.exp_avg_sq'");
  Named bad_shape = good;
  bad_shape[2].second = zeros({4, 3}, kFloat64);
  check_throws_with([&] { opt.load_state_tensors(bad_shape); },
                    "entry 'group0.param0.exp_avg' has shape (4,3) but this optimizer expects (3,4)");
  Named extra = good;
  extra.emplace_back("group0.param2.exp_avg", zeros({1}, kFloat64));
  check_throws_with([&] { opt.load_state_tensors(extra); }, "unexpected entry 'group0.param2.exp_avg'");
  Named negative_step = good;
  negative_step[0].second = scalar_tensor(-3, kInt64);
  check_throws_with([&] { opt.load_state_tensors(negative_step); }, "entry 'step_count' must be a count >= 0");
  CHECK(opt.step_count() == 1);  // the failed loads changed nothing

  // An SGD with momentum has momentum_buffer, not Adam's slots.
  SGD sgd(TensorList{W, b}, SGDOptions().momentum(0.9));
  check_throws_with([&] { sgd.load_state_tensors(good); }, "[SGD.load_state_tensors] missing entry 'group0.param0.momentum_buffer'");
}

// ---- bad hyperparameters ---------------------------------------------------------------------------
TEST_CASE("Optimizer: bad inputs name the optimizer and the value") {
  Tensor w = param({2, 2}, 1);
  check_throws_with([&] { SGD(TensorList{w}, SGDOptions(-0.1)); }, "[SGD] invalid learning rate -0.1");
  check_throws_with([&] { Adam(TensorList{w}, AdamOptions(-1)); }, "[Adam] invalid learning rate -1");
  check_throws_with([&] { AdamW(TensorList{w}, AdamWOptions().betas(1.0, 0.999)); }, "[AdamW] invalid beta1 1");
  check_throws_with([&] { AdamW(TensorList{w}, AdamWOptions().betas(0.9, -0.1)); }, "[AdamW] invalid beta2 -0.1");
  check_throws_with([&] { AdamW(TensorList{w}, AdamWOptions().eps(-1e-8)); }, "[AdamW] invalid eps");
  check_throws_with([&] { AdamW(TensorList{w}, AdamWOptions().weight_decay(-0.1)); }, "[AdamW] invalid weight_decay");
  check_throws_with([&] { SGD(TensorList{w}, SGDOptions().nesterov(true)); }, "[SGD] nesterov momentum requires");
  check_throws_with([&] { SGD(TensorList{w}, SGDOptions().momentum(-0.5)); }, "[SGD] invalid momentum");
  check_throws_with([&] { SGD(TensorList{}, SGDOptions()); }, "[SGD] got an empty parameter list");
  check_throws_with([&] { SGD(TensorList{w, w}, SGDOptions()); }, "appears more than once");
  check_throws_with([&] { SGD(TensorList{w * 2.0}, SGDOptions()); }, "is not a leaf");
  check_throws_with([&] { SGD(TensorList{zeros({2}, kInt64)}, SGDOptions()); }, "has dtype int64");
  // A schedule that sets a negative lr is caught at step().
  AdamW opt(TensorList{w}, AdamWOptions());
  opt.set_lr(-1e-3);
  check_throws_with([&] { opt.step(); }, "[AdamW] invalid learning rate -0.001 in group 0");
}

// ---- clipping --------------------------------------------------------------------------------------
TEST_CASE("clip_grad_norm_: total norm, scaling only above max_norm, params without grads skipped") {
  Tensor a = param({2}, 1), b = param({2, 2}, 2), none = param({3}, 3);
  a.set_grad(from_vector<double>({3, 0}, {2}));
  b.set_grad(from_vector<double>({0, 4, 0, 0}, {2, 2}));
  CHECK(clip_grad_norm_({a, b, none}, 10.0) == doctest::Approx(5.0));  // no clipping: grads unchanged
  CHECK_CLOSE(a.grad(), from_vector<double>({3, 0}, {2}), 0, 0);
  double total = clip_grad_norm_({a, b, none}, 1.0);
  CHECK(total == doctest::Approx(5.0));
  double scale = 1.0 / (5.0 + 1e-6);
  CHECK_CLOSE(a.grad(), from_vector<double>({3 * scale, 0}, {2}), 1e-15, 0);
  CHECK_CLOSE(b.grad(), from_vector<double>({0, 4 * scale, 0, 0}, {2, 2}), 1e-15, 0);
  CHECK(clip_grad_norm_({none}, 1.0) == 0.0);
}

// The CPU float32 path sums the squares in one pass (core/cpu/reduce.h: sum_of_squares); its twin is
// the composite it replaced, float64 copy, square, sum, tensor by tensor: the same bits, including
// non-contiguous gradients (which take the composite) and float32 NaN/Inf.
TEST_CASE("clip_grad_norm_: the one-pass float32 norm is the composite's bits") {
  Generator gen(31);
  TensorList params;
  for (int64_t n : {1, 7, 1000, 70000}) {
    Tensor p = zeros({n}, kFloat32).requires_grad_();
    p.set_grad(mul(randn({n}, {}, &gen), 1.0 + double(n % 13)));
    params.push_back(p);
  }
  Tensor t = zeros({30, 40}, kFloat32).requires_grad_();  // a transposed (non-contiguous) gradient
  t.set_grad(randn({40, 30}, {}, &gen).transpose(0, 1));
  params.push_back(t);
  double composite = 0;
  for (const Tensor& p : params) {
    const Tensor g64 = p.grad().to(kFloat64);
    composite += sum(mul(g64, g64)).item();
  }
  CHECK(clip_grad_norm_(params, INFINITY) == std::sqrt(composite));
  params[1].grad().copy_(full({7}, 3e20, kFloat32));  // squares past float32's range: float64 holds them
  const double huge = clip_grad_norm_(params, INFINITY);
  CHECK(std::isfinite(huge));
  CHECK(huge > 3e20);
}

// Above 32,768 CPU gradient elements (kParallelGrain) the tensors' sums and scaling are shared out to
// the threads (train/optim/optim.cpp); the sums still add up in the parameters' order, so the norm and
// the clipped gradients are the same bits at any thread count, with a float64 and a transposed
// gradient (the composite) and a parameter without one between the shared ones.
TEST_CASE("clip_grad_norm_: the same norm and clipped gradients at 1, 2 and 3 threads") {
  auto make = [] {
    Generator gen(47);
    TensorList params;
    for (int64_t n : {40000, 3, 20000, 1, 9000}) {
      Tensor p = zeros({n}, kFloat32).requires_grad_();
      p.set_grad(mul(randn({n}, {}, &gen), 1.0 + double(n % 7)));
      params.push_back(p);
    }
    params.insert(params.begin() + 2, zeros({3}, kFloat32).requires_grad_());  // no gradient
    Tensor d = zeros({500}, kFloat64).requires_grad_();
    d.set_grad(randn({500}, TensorOptions(kFloat64), &gen));
    params.insert(params.begin() + 1, d);
    Tensor t = zeros({30, 40}, kFloat32).requires_grad_();
    t.set_grad(randn({40, 30}, {}, &gen).transpose(0, 1));
    params.insert(params.begin() + 4, t);
    return params;
  };
  std::vector<double> norms;
  std::vector<TensorList> clipped;
  for (int threads : {1, 2, 3}) {
    testing::ThreadCount count(threads);
    TensorList params = make();
    norms.push_back(clip_grad_norm_(params, 1.0));
    clipped.push_back(params);
  }
  // The composite on one thread: the reference the fast path must equal.
  TensorList reference = make();
  double composite = 0;
  for (const Tensor& p : reference)
    if (p.grad().defined()) {
      const Tensor g64 = p.grad().to(kFloat64);
      composite += sum(mul(g64, g64)).item();
    }
  CHECK(norms[0] == std::sqrt(composite));
  REQUIRE(norms[0] > 1.0);  // so the gradients were scaled
  for (size_t k = 1; k < norms.size(); ++k) {
    CHECK(norms[k] == norms[0]);
    for (size_t i = 0; i < clipped[0].size(); ++i) {
      const Tensor a = clipped[0][i].grad(), b = clipped[k][i].grad();
      REQUIRE(a.defined() == b.defined());
      if (a.defined()) CHECK(testing::bitwise_equal(a, b));
    }
  }
  // Every gradient scaled as mul_ scales it, the float32 ones (scaled in place by the threads) too.
  const double scale = 1.0 / (std::sqrt(composite) + 1e-6);
  for (size_t i = 0; i < reference.size(); ++i)
    if (reference[i].grad().defined()) {
      CAPTURE(i);
      CHECK(testing::bitwise_equal(clipped[2][i].grad(), mul(reference[i].grad(), scale)));
    }
}

// clip_grad_norm_'s sums, four chains side by side (core/cpu/reduce.h): each tensor's sum is
// sum_of_squares' chain, bit for bit, whatever the sizes around it (empty, shorter, equal, longer)
// and however many tensors share the chains.
TEST_CASE("clip_grad_norm_: sums of squares side by side are each tensor's own chain") {
  Generator gen(5);
  const std::vector<int64_t> sizes = {0, 1, 5000, 3, 5000, 17, 12345, 0, 2, 999, 4096, 1, 6};
  std::vector<Tensor> xs;
  std::vector<const float*> data;
  for (int64_t n : sizes) {
    xs.push_back(mul(randn({n}, {}, &gen), 1.0 + double(n % 5)));
    data.push_back(xs.back().data_ptr<float>());
  }
  for (size_t count : {size_t(1), size_t(3), size_t(4), size_t(5), sizes.size()}) {
    CAPTURE(count);
    std::vector<double> out(count, -1.0);
    cpu::sums_of_squares(data.data(), sizes.data(), out.data(), static_cast<int64_t>(count));
    for (size_t t = 0; t < count; ++t) {
      CAPTURE(t);
      const double one = cpu::sum_of_squares(data[t], sizes[t]);
      CHECK(std::memcmp(&out[t], &one, sizeof one) == 0);
    }
  }
  // Reversing each chain's order changes the bits of at least one of these sums: the test can tell.
  bool order_matters = false;
  for (size_t t = 0; t < sizes.size(); ++t) {
    double reversed = 0;
    for (int64_t i = sizes[t] - 1; i >= 0; --i) reversed += double(data[t][i]) * double(data[t][i]);
    order_matters = order_matters || reversed != cpu::sum_of_squares(data[t], sizes[t]);
  }
  CHECK(order_matters);
}

TEST_CASE("clip_grad_norm_: float32 grads accumulate in float64 — non-finite norm returned, grads untouched") {
  Tensor big = zeros({2}, kFloat32).requires_grad_();
  big.set_grad(full({2}, 3e20, kFloat32));  // squares overflow float32, not float64
  CHECK(clip_grad_norm_({big}, 1e30) == doctest::Approx(std::sqrt(2.0) * 3e20).epsilon(1e-6));

  Tensor w = param({2}, 1);
  w.set_grad(from_vector<double>({1.0, INFINITY}, {2}));
  double total = 0;
  CHECK_NOTHROW(total = clip_grad_norm_({w}, 1.0));
  CHECK(std::isinf(total));
  CHECK(w.grad().to_vector<double>()[0] == 1.0);
  w.set_grad(from_vector<double>({NAN, 1.0}, {2}));
  CHECK(std::isnan(clip_grad_norm_({w}, 1.0)));
  CHECK(w.grad().to_vector<double>()[1] == 1.0);
  check_throws_with([&] { clip_grad_norm_({w}, -1.0); }, "[clip_grad_norm_] invalid max_norm -1");
}
