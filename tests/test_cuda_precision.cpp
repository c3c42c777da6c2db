// Mixed precision on the GPU (autograd/autocast.h, cuda/blas.h): under autocast the CUDA products run
// cuBLAS's 16-bit GEMMs (bfloat16 or float16 operands, float32 result, float32 accumulation), the
// tensor cores' contract that the CPU emulates with a float32 GEMM of the rounded operands. So the
// GPU's products equal the CPU's on the same rounded operands up to the order of the float32 sums,
// forward and backward; and a bf16 training run on the GPU follows the CPU's. Every case needs a GPU
// (without one it logs "skipped: ..."). The CPU side: tests/test_precision.cpp, test_precision_train.cpp.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "cuda/blas.h"
#include "cuda_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/config.h"
#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// Both devices multiply the same rounded values exactly and sum in float32; only the order of the
// sums differs: a few float32 ulps of the partial sums. The products below sum at most 256 terms of
// size <= 1, whose float32 partial sums stray by well under 1e-4; a lost rounding (a float32 product
// on the GPU) or a wrongly rounded operand is off by 1e-3 (fp16) to 1e-2 (bf16).
constexpr double kAtol = 1e-4, kRtol = 2e-4;

std::string repo_root() { return std::filesystem::path(RELGRAD_GOLDEN_DIR).parent_path().parent_path().string(); }

// The largest |x - y| of two tensors on any devices.
double max_gap(const Tensor& x, const Tensor& y) { return max(abs(sub(x.to(Device::cpu()), y.to(Device::cpu())))).item(); }

}  // namespace

TEST_CASE("cuda precision: autocast products on the GPU equal the CPU's on the same rounded operands, fwd and bwd") {
  if (!have_gpu()) return;
  using Op = std::function<Tensor(const TensorList&)>;
  struct Product {
    const char* name;
    TensorList inputs;  // float32, on the CPU
    Op op;
  };
  const std::vector<Product> products = {
      {"matmul (B, T, k) @ (k, m): one folded GEMM", {uniform({2, 5, 24}, -1, 1, kFloat32, 1), uniform({24, 7}, -1, 1, kFloat32, 2)},
       [](const TensorList& t) { return matmul(t[0], t[1]); }},
      {"matmul (64, 256) @ (256, 48): tensor-core tiles", {uniform({64, 256}, -1, 1, kFloat32, 3), uniform({256, 48}, -1, 1, kFloat32, 4)},
       [](const TensorList& t) { return matmul(t[0], t[1]); }},
      {"bmm (2, 5, 24) @ (2, 24, 7): strided-batched", {uniform({2, 5, 24}, -1, 1, kFloat32, 5), uniform({2, 24, 7}, -1, 1, kFloat32, 6)},
       [](const TensorList& t) { return bmm(t[0], t[1]); }},
      {"addmm: bias (7) + (2, 5, 24) @ Wᵀ, W (7, 24) read transposed",
       {uniform({7}, -1, 1, kFloat32, 7), uniform({2, 5, 24}, -1, 1, kFloat32, 8), uniform({7, 24}, -1, 1, kFloat32, 9)},
       [](const TensorList& t) { return addmm(t[0], t[1], t[2].transpose(0, 1)); }},
      {"q @ kᵀ of (B, T, H, D) heads permuted to (B, H, T, D)",
       {uniform({2, 6, 3, 8}, -1, 1, kFloat32, 10), uniform({2, 6, 3, 8}, -1, 1, kFloat32, 11)},
       [](const TensorList& t) {
         const Tensor q = permute(t[0], {0, 2, 1, 3}), k = permute(t[1], {0, 2, 1, 3});
         return matmul(q, k.transpose(-1, -2));
       }},
      {"broadcast batch (2, 1, 5, 24) @ (1, 3, 24, 7): pointer-array GEMM",
       {uniform({2, 1, 5, 24}, -1, 1, kFloat32, 12), uniform({1, 3, 24, 7}, -1, 1, kFloat32, 13)},
       [](const TensorList& t) { return matmul(t[0], t[1]); }},
  };
  for (DType low : {kBFloat16, kFloat16}) {
    const std::string precision = dtype_name(low);
    CAPTURE(precision);
    for (const Product& p : products) {
      // The op runs under autocast; its backward (run after the guard is gone) multiplies in the
      // forward's precision on both devices.
      CudaParityCase c{std::string(p.name) + " in " + precision, p.inputs,
                       [&](const TensorList& t) -> TensorList {
                         AutocastGuard autocast(low);
                         return {p.op(t)};
                       },
                       kAtol, kRtol};
      CHECK(check_cuda_parity(c));
    }
    // The rounding took effect on the GPU: the autocast product is far (against kAtol) from the plain
    // float32 one there, and within float32 sums of the CPU's on rounded operands.
    const Tensor a = uniform({64, 256}, -1, 1, kFloat32, 3), b = uniform({256, 48}, -1, 1, kFloat32, 4);
    const Device gpu = Device::cuda(0);
    Tensor mixed;
    {
      AutocastGuard autocast(low);
      mixed = matmul(a.to(gpu), b.to(gpu));
    }
    CHECK(mixed.dtype() == kFloat32);
    const Tensor plain = matmul(a.to(gpu), b.to(gpu));
    const Tensor rounded = matmul(a.to(low).to(kFloat32), b.to(low).to(kFloat32));
    MESSAGE(precision, ": GPU autocast vs GPU float32 ", max_gap(mixed, plain), ", vs the CPU on rounded operands ",
            max_gap(mixed, rounded));
    CHECK(max_gap(mixed, plain) > 5 * kAtol);
    CHECK_CLOSE(mixed.to(Device::cpu()), rounded, kAtol, kRtol);
  }
}

TEST_CASE("cuda precision: gemm_batched takes bfloat16 and float16 buffers and writes float32, every batch form") {
  if (!have_gpu()) return;
  const Device gpu = Device::cuda(0);
  // a (3, 5, 24), b (3, 24, 7) row-major; c (3, 5, 7) float32. Entry e multiplies a[ia[e]] @ b[ib[e]].
  const Tensor a = uniform({3, 5, 24}, -1, 1, kFloat32, 21), b = uniform({3, 24, 7}, -1, 1, kFloat32, 22);
  const cuda::MatrixLayout la{cuda::MatrixOrder::RowMajor, 24}, lb{cuda::MatrixOrder::RowMajor, 7};
  struct Batch {
    const char* name;
    std::vector<int64_t> ia, ib;
  };
  // In order: one strided-batched call; out of order: pointer arrays uploaded from the host.
  const std::vector<Batch> batches = {{"strided", {0, 1, 2}, {0, 1, 2}}, {"uploaded pointers", {2, 0, 1}, {1, 2, 0}}};
  for (DType low : {kBFloat16, kFloat16}) {
    const std::string precision = dtype_name(low);
    CAPTURE(precision);
    CHECK(cuda::gemm_output_dtype(low) == kFloat32);
    const Tensor a16 = a.to(low).to(gpu), b16 = b.to(low).to(gpu);
    const Tensor ar = a.to(low).to(kFloat32), br = b.to(low).to(kFloat32);
    for (const Batch& batch : batches) {
      CAPTURE(batch.name);
      std::vector<int64_t> a_off, b_off;
      std::vector<Tensor> expected;
      for (size_t e = 0; e < 3; ++e) {
        a_off.push_back(batch.ia[e] * 5 * 24);
        b_off.push_back(batch.ib[e] * 24 * 7);
        expected.push_back(unsqueeze(add(ones({5, 7}, kFloat32), mul(matmul(ar.select(0, batch.ia[e]), br.select(0, batch.ib[e])), 0.5)), 0));
      }
      // c = ones + 0.5 · a_e @ b_e (accumulate), so alpha, beta and C's float32 element size all show.
      Tensor c = ones({3, 5, 7}, TensorOptions(kFloat32).device(gpu));
      cuda::gemm_batched(low, a16.raw_data(), la, a_off, b16.raw_data(), lb, b_off, c.raw_data(), 5, 24, 7, 0.5,
                         /*accumulate=*/true, 0);
      CHECK_CLOSE(c.to(Device::cpu()), cat(expected, 0), kAtol, kRtol);
    }
    // k = 0: an empty sum, so c is float32 zeros (all 3 · 5 · 7 of them, not half as many).
    Tensor c = ones({3, 5, 7}, TensorOptions(kFloat32).device(gpu));
    cuda::gemm_batched(low, a16.raw_data(), la, {0, 0, 0}, b16.raw_data(), lb, {0, 0, 0}, c.raw_data(), 5, 0, 7, 1.0,
                       /*accumulate=*/false, 0);
    CHECK(bitwise_equal(c.to(Device::cpu()), zeros({3, 5, 7}, kFloat32)));
  }
}

TEST_CASE("cuda precision: 10 bf16 steps of the default run on the GPU follow the CPU's within 2e-3") {
  if (!have_gpu()) return;
  // configs/default.toml (dropout 0, so no random stream is involved), 10 steps, warm-up 5. The two
  // devices round the same float32 values to bf16; where their float32 sums differ by an ulp an
  // operand may round the other way (one bf16 ulp, 2^-8 relative), which the loss barely feels: the
  // bf16-vs-float32 gap itself is under 6.1e-4 over 40 steps on the CPU (docs/design.md).
  RunConfig base = RunConfig::defaults();
  load_config_file(base, repo_root() + "/configs/default.toml");
  TempDir dir;
  base.train.steps = 10;
  base.optim.warmup_steps = 5;
  base.train.samples = 0;
  auto run = [&](const std::string& device, DType precision) {
    RunConfig c = base;
    c.train.device = device;
    c.train.precision = precision;
    c.train.out_dir = dir.file(device + "_" + dtype_name(precision));
    Trainer t(trainer_options(c));
    std::vector<double> losses;
    for (int k = 0; k < 10; ++k) losses.push_back(t.train_step());
    return losses;
  };
  const std::vector<double> cpu = run("cpu", kBFloat16), gpu = run("cuda", kBFloat16), gpu32 = run("cuda", kFloat32);
  double gap = 0, policy = 0;
  for (size_t k = 0; k < cpu.size(); ++k) {
    CAPTURE(k);
    CHECK(std::isfinite(gpu[k]));
    gap = std::max(gap, std::fabs(gpu[k] - cpu[k]));
    policy = std::max(policy, std::fabs(gpu[k] - gpu32[k]));
  }
  MESSAGE("bf16, GPU vs CPU: largest loss gap over 10 steps ", gap, "; GPU bf16 vs GPU float32 ", policy);
  CHECK(gap < 2e-3);
  CHECK(policy > 0);  // the GPU's products were rounded
  CHECK(cpu.front() - cpu.back() > 1.0);  // it learns (6.33 -> 2.95 on the CPU), so the curves have a shape
}
