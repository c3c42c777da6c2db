// Optimizers on CUDA parameters against the same optimizers on the CPU: the fused Adam / AdamW
// kernel (cuda/adam.cu), the composite Adam for layouts the kernel does not take, SGD through tensor
// ops, optimizer state on the parameter's device, and state moved between devices. Every case needs
// a GPU and skips without one.
#include <memory>
#include <string>
#include <vector>

#include "testing.h"
#include "train/optim/optim.h"

using namespace relgrad;
using relgrad::testing::bitwise_equal;
using relgrad::testing::have_gpu;
using relgrad::testing::uniform;

namespace {

Tensor gpu(const Tensor& t) { return t.to(Device::cuda()); }
Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

enum class Kind { AdamW, Adam, SGD };

// Two groups as a transformer has them: a matrix with weight decay, a vector without.
std::unique_ptr<Optimizer> make(Kind kind, const TensorList& params) {
  std::vector<ParamGroup> groups{{{params[0]}, 1e-2, 0.1}, {{params[1]}, 1e-2, 0.0}};
  switch (kind) {
    case Kind::AdamW: return std::make_unique<AdamW>(groups, AdamWOptions().betas(0.9, 0.95));
    case Kind::Adam: return std::make_unique<Adam>(groups, AdamOptions().betas(0.9, 0.95));
    case Kind::SGD: return std::make_unique<SGD>(groups, SGDOptions().momentum(0.9).nesterov(true));
  }
  return nullptr;
}

const char* kind_name(Kind k) { return k == Kind::AdamW ? "AdamW" : k == Kind::Adam ? "Adam" : "SGD"; }

// The same parameters and the same gradient sequence on the CPU and on the GPU; `transposed_gpu`
// makes the GPU matrix a non-contiguous leaf (so Adam takes its composite path there).
struct Pair {
  Tensor wc, bc, wg, bg;
  std::unique_ptr<Optimizer> oc, og;
  Pair(Kind kind, DType dt, bool transposed_gpu = false) {
    Tensor w0 = uniform({17, 33}, -1, 1, dt, 1), b0 = uniform({33}, -1, 1, dt, 2);
    wc = w0.clone().requires_grad_();
    bc = b0.clone().requires_grad_();
    wg = transposed_gpu ? gpu(w0.t().contiguous()).t() : gpu(w0);
    wg.requires_grad_();
    bg = gpu(b0).requires_grad_();
    oc = make(kind, {wc, bc});
    og = make(kind, {wg, bg});
  }
  void steps(int count, DType dt) {
    for (int s = 0; s < count; ++s) {
      Tensor gw = uniform({17, 33}, -1, 1, dt, 10 + s), gb = uniform({33}, -1, 1, dt, 50 + s);
      wc.set_grad(gw);
      bc.set_grad(gb);
      wg.set_grad(gpu(gw));
      bg.set_grad(gpu(gb));
      oc->step();
      og->step();
    }
  }
};

// The task's bounds: float32 within 1e-6 relative, float64 within 1e-12 (plus a tiny absolute
// floor for elements that pass near zero).
void check_follows(const Tensor& gpu_t, const Tensor& cpu_t, DType dt) {
  CHECK(gpu_t.device() == Device::cuda());
  if (dt == kFloat32) CHECK_CLOSE(host(gpu_t), cpu_t, 1e-9, 1e-6);
  else CHECK_CLOSE(host(gpu_t), cpu_t, 1e-15, 1e-12);
}

}  // namespace

TEST_CASE("cuda optim: Adam, AdamW and SGD on the GPU follow the CPU over 5 steps, state on the device") {
  if (!have_gpu()) return;
  for (Kind kind : {Kind::AdamW, Kind::Adam, Kind::SGD})
    for (DType dt : {kFloat32, kFloat64}) {
      INFO(kind_name(kind), " ", dtype_name(dt));
      Pair p(kind, dt);
      p.steps(5, dt);
      check_follows(p.wg, p.wc, dt);
      check_follows(p.bg, p.bc, dt);
      // The parameter handles stay on the device; every slot tensor was created there and follows the CPU's.
      auto sc = p.oc->state_tensors(), sg = p.og->state_tensors();
      REQUIRE(sc.size() == sg.size());
      for (size_t i = 0; i < sc.size(); ++i) {
        INFO(sg[i].first);
        CHECK(sg[i].first == sc[i].first);
        if (sg[i].second.dtype() == kInt64) {  // step counters
          CHECK(sg[i].second.item() == sc[i].second.item());
          continue;
        }
        check_follows(sg[i].second, sc[i].second, dt);
      }
    }
}

TEST_CASE("cuda optim: the fused Adam / AdamW kernel gives the CPU kernel's bits") {
  if (!have_gpu()) return;
  // Both kernels do the same IEEE operations in the same order with no FMA contraction.
  for (Kind kind : {Kind::AdamW, Kind::Adam})
    for (DType dt : {kFloat32, kFloat64}) {
      INFO(kind_name(kind), " ", dtype_name(dt));
      Pair p(kind, dt);
      p.steps(5, dt);
      CHECK(bitwise_equal(host(p.wg), p.wc));
      CHECK(bitwise_equal(host(p.bg), p.bc));
      auto sc = p.oc->state_tensors(), sg = p.og->state_tensors();
      for (size_t i = 0; i < sc.size(); ++i)
        if (sc[i].second.dtype() != kInt64) CHECK(bitwise_equal(host(sg[i].second), sc[i].second));
    }
}

TEST_CASE("cuda optim: a non-contiguous GPU parameter takes the composite Adam path and still follows the CPU") {
  if (!have_gpu()) return;
  for (DType dt : {kFloat32, kFloat64}) {
    Pair p(Kind::AdamW, dt, /*transposed_gpu=*/true);
    REQUIRE_FALSE(p.wg.is_contiguous());
    p.steps(5, dt);
    check_follows(p.wg, p.wc, dt);
    check_follows(p.bg, p.bc, dt);
  }
}

TEST_CASE("cuda optim: state saved on the GPU loads on the CPU and continues the same trajectory") {
  if (!have_gpu()) return;
  const DType dt = kFloat64;
  Pair p(Kind::AdamW, dt);
  p.steps(3, dt);
  // A fresh CPU optimizer over copies of the GPU parameters, loaded from the GPU state.
  Tensor w = host(p.wg).detach().clone().requires_grad_(), b = host(p.bg).detach().clone().requires_grad_();
  auto cpu_opt = make(Kind::AdamW, {w, b});
  cpu_opt->load_state_tensors(p.og->state_tensors());
  Tensor gw = uniform({17, 33}, -1, 1, dt, 99), gb = uniform({33}, -1, 1, dt, 98);
  w.set_grad(gw);
  b.set_grad(gb);
  cpu_opt->step();
  p.wg.set_grad(gpu(gw));
  p.bg.set_grad(gpu(gb));
  p.og->step();
  check_follows(p.wg, w, dt);
  check_follows(p.bg, b, dt);
}
