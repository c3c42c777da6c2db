// The CUDA backend against the CPU. Every GPU test returns early with a message when no CUDA device
// is present (a build without CUDA, or a machine without a GPU), so they pass trivially there; the
// first test always runs and checks the errors that such a machine gives.
#include <functional>
#include <string>
#include <vector>

#include "cuda/runtime.h"
#include "testing.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::uniform;
using relgrad::testing::have_gpu;

namespace {

Tensor on_gpu(const Tensor& t) { return t.to(Device::cuda()); }
Tensor on_cpu(const Tensor& t) { return t.to(Device::cpu()); }

// Tolerances for a GPU result against the CPU one: the device's libm differs by an ulp or two.
double rtol_for(DType dt) { return dt == kFloat32 ? 1e-5 : 1e-12; }
double atol_for(DType dt) { return dt == kFloat32 ? 1e-6 : 1e-12; }

}  // namespace

TEST_CASE("cuda: without a GPU, asking for one throws DeviceError with a clear message") {
#ifdef RELGRAD_WITH_CUDA
  CHECK(cuda_built());
#else
  CHECK_FALSE(cuda_built());
#endif
  check_throws_with([] { Device::parse("gpu"); }, "unknown device 'gpu'");
  CHECK_THROWS_AS(Device::parse("gpu"), DeviceError);
  if (cuda_available()) {
    check_throws_with([] { zeros({2}, TensorOptions().device(Device::cuda(999))); }, "cuda:999 does not exist");
    return;
  }
  CHECK(cuda_device_count() == 0);
  const std::string expected = cuda_built() ? "no CUDA device available" : "built without CUDA support";
  CHECK_THROWS_AS(zeros({2}, TensorOptions().device(Device::cuda())), DeviceError);
  check_throws_with([] { zeros({2}, TensorOptions().device(Device::cuda())); }, expected);
  Tensor t = ones({2, 3});
  CHECK_THROWS_AS(t.to(Device::cuda()), DeviceError);
  check_throws_with([&] { t.to(Device::cuda()); }, expected);
  // Statistics and empty_cache are harmless without a GPU.
  CHECK(cuda::memory_stats(0).allocated_bytes == 0);
  cuda::empty_cache(0);
}

TEST_CASE("cuda: cuBLAS is loaded at first use, and every entry point relgrad calls resolves (no GPU needed)") {
  if (!cuda_built()) {
    CHECK_FALSE(cuda::cublas_loaded());
    check_throws_with([] { cuda::load_cublas(); }, "built without CUDA support");
    return;
  }
  // Nothing in this process has needed a GEMM on a GPU, so cuBLAS is not loaded: it is not linked
  // (tests/CMakeLists.txt also checks the relgrad binary's needed libraries).
  CHECK_FALSE(cuda::cublas_loaded());
  CHECK_NOTHROW(cuda::load_cublas());  // dlopen + every dlsym, or DeviceError naming what is missing
  CHECK(cuda::cublas_loaded());
  CHECK_NOTHROW(cuda::load_cublas());  // loaded once
}

TEST_CASE("cuda: host -> device -> host round trip of every dtype") {
  if (!have_gpu()) return;
  Tensor f32 = uniform({3, 5}, -2, 2, kFloat32);
  Tensor f64 = uniform({3, 5}, -2, 2, kFloat64);
  Tensor i64 = from_vector<int64_t>({-3, 0, 7, 1LL << 40}, {2, 2});
  Tensor b = from_vector<bool>({true, false, false, true, true}, {5});
  Tensor g = on_gpu(f32);
  CHECK(g.device() == Device::cuda());
  CHECK(g.dtype() == kFloat32);
  CHECK(on_cpu(g).to_vector<float>() == f32.to_vector<float>());
  CHECK(on_cpu(on_gpu(f64)).to_vector<double>() == f64.to_vector<double>());
  CHECK(on_cpu(on_gpu(i64)).to_vector<int64_t>() == i64.to_vector<int64_t>());
  CHECK(on_cpu(on_gpu(b)).to_vector<bool>() == b.to_vector<bool>());
  // Factories that fill on the host and copy over; an empty tensor; item() from the device.
  CHECK(on_cpu(full({4}, 2.5, TensorOptions().device(Device::cuda()))).to_vector<float>() ==
        std::vector<float>(4, 2.5f));
  CHECK(on_cpu(zeros({0, 3}, TensorOptions().device(Device::cuda()))).numel() == 0);
  CHECK(on_gpu(scalar_tensor(7.0, kFloat64)).item() == 7.0);
}

TEST_CASE("cuda: strided, transposed, broadcast and converting copies") {
  if (!have_gpu()) return;
  Tensor x = uniform({3, 4, 5}, -2, 2, kFloat64);
  Tensor g = on_gpu(x);
  SUBCASE("a transposed view made contiguous on the device") {
    CHECK(on_cpu(g.transpose(0, 2).contiguous()).to_vector<double>() ==
          x.transpose(0, 2).contiguous().to_vector<double>());
  }
  SUBCASE("a strided view copied to the host") {
    Tensor v = g.slice(1, 0, 4, 2).permute({2, 0, 1});
    CHECK_FALSE(v.is_contiguous());
    CHECK(on_cpu(v).to_vector<double>() == x.slice(1, 0, 4, 2).permute({2, 0, 1}).contiguous().to_vector<double>());
  }
  SUBCASE("a host tensor copied into a strided device view") {
    Tensor dst = zeros({5, 3}, TensorOptions(kFloat64).device(Device::cuda()));
    Tensor src = uniform({3, 5}, -1, 1, kFloat64);
    dst.t().copy_(src);
    CHECK(on_cpu(dst).to_vector<double>() == src.t().contiguous().to_vector<double>());
  }
  SUBCASE("a broadcast (expanded) view materialised") {
    Tensor row = uniform({1, 5}, -1, 1, kFloat64);
    CHECK(on_cpu(on_gpu(row).expand({4, 5}).contiguous()).to_vector<double>() ==
          row.expand({4, 5}).contiguous().to_vector<double>());
  }
  SUBCASE("dtype conversions on the device") {
    Tensor h = from_vector<double>({-2.5, -1, 0, 0.25, 3}, {5});
    Tensor d = on_gpu(h);
    CHECK(on_cpu(d.to(kFloat32)).to_vector<float>() == h.to(kFloat32).to_vector<float>());
    CHECK(on_cpu(d.to(kInt64)).to_vector<int64_t>() == h.to(kInt64).to_vector<int64_t>());
    CHECK(on_cpu(d.to(kBool)).to_vector<bool>() == h.to(kBool).to_vector<bool>());
    CHECK(on_cpu(d.to(kBool).to(kFloat64)).to_vector<double>() == h.to(kBool).to(kFloat64).to_vector<double>());
    CHECK(on_cpu(g.transpose(0, 1).to(kFloat32)).to_vector<float>() ==
          x.transpose(0, 1).to(kFloat32).contiguous().to_vector<float>());
  }
  SUBCASE("more than 8 dims: merged when possible, else a clear error") {
    Shape shape(10, 2);
    Tensor h = uniform(shape, -1, 1, kFloat64);
    Tensor d = on_gpu(h);
    CHECK(on_cpu(d.to(kFloat32)).to_vector<float>() == h.to(kFloat32).to_vector<float>());  // merges to 1-d
    Shape reversed = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    check_throws_with([&] { d.permute(reversed).contiguous(); }, "the 8 the CUDA kernel supports");
  }
}

TEST_CASE("cuda: every unary op, forward and backward, matches the CPU") {
  if (!have_gpu()) return;
  struct UnaryRow { const char* name; Tensor (*op)(const Tensor&); };
  const std::vector<UnaryRow> rows = {
#define RG_UNARY(name, Functor) {#name, [](const Tensor& x) { return relgrad::name(x); }},
#include "core/base/unary_ops.def"
#undef RG_UNARY
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const UnaryRow& row : rows) {
      std::string n = row.name;
      bool positive_only = n == "log" || n == "sqrt" || n == "rsqrt";
      CAPTURE(n);
      CAPTURE(dtype_name(dt));
      Tensor x = positive_only ? uniform({4, 33}, 0.1, 3, dt, 3) : uniform({4, 33}, -4, 4, dt, 3);
      Tensor gy = uniform({4, 33}, -1, 1, dt, 4);
      // forward
      CHECK_CLOSE(on_cpu(row.op(on_gpu(x))), row.op(x), atol_for(dt), rtol_for(dt));
      // forward of a non-contiguous input
      CHECK_CLOSE(on_cpu(row.op(on_gpu(x).t())), row.op(x.t()), atol_for(dt), rtol_for(dt));
      // backward: the CPU leaf receives the gradient through to(cuda)'s backward
      Tensor xc = x.clone().requires_grad_();
      row.op(xc).backward(gy);
      Tensor xg = x.clone().requires_grad_();
      Tensor y = row.op(on_gpu(xg));
      CHECK(y.device() == Device::cuda());
      y.backward(on_gpu(gy));
      REQUIRE(xg.grad().defined());
      CHECK_CLOSE(xg.grad(), xc.grad(), atol_for(dt), rtol_for(dt));
    }
  }
}

TEST_CASE("cuda: pow forward and backward match the CPU") {
  if (!have_gpu()) return;
  for (DType dt : {kFloat32, kFloat64}) {
    for (double p : {2.0, 0.5, -1.5, 3.0, 0.0}) {
      CAPTURE(p);
      Tensor x = uniform({50}, 0.1, 3, dt, 5);
      Tensor gy = uniform({50}, -1, 1, dt, 6);
      Tensor xc = x.clone().requires_grad_();
      Tensor yc = pow(xc, p);
      yc.backward(gy);
      Tensor xg = x.clone().requires_grad_();
      Tensor yg = pow(on_gpu(xg), p);
      yg.backward(on_gpu(gy));
      CHECK_CLOSE(on_cpu(yg), yc, atol_for(dt), rtol_for(dt));
      CHECK_CLOSE(xg.grad(), xc.grad(), atol_for(dt), rtol_for(dt));
    }
  }
}

TEST_CASE("cuda: binary ops and comparisons with broadcasting match the CPU") {
  if (!have_gpu()) return;
  using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, BinaryFn>> rows = {
#define RG_BINARY(name, Functor, is_bool) \
  {#name, [](const Tensor& a, const Tensor& b) { return relgrad::name(a, b); }},
#include "core/base/binary_ops.def"
#undef RG_BINARY
  };
  for (DType dt : {kFloat32, kFloat64}) {
    // (3, 1, 4) op (5, 1) -> (3, 5, 4); rounding to a grid of 0.5 makes some elements equal.
    Tensor a = div(mul(uniform({3, 1, 4}, -4, 4, dt, 7), 2.0).to(kInt64).to(dt), 2.0);
    Tensor b = div(mul(uniform({5, 1}, 0.5, 4, dt, 8), 2.0).to(kInt64).to(dt), 2.0);  // never 0
    for (const auto& entry : rows) {
      const auto& name = entry.first;
      const auto& op = entry.second;
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      Tensor expected = op(a, b);
      Tensor actual = op(on_gpu(a), on_gpu(b));
      CHECK(actual.shape() == Shape{3, 5, 4});
      CHECK(actual.dtype() == expected.dtype());
      if (expected.dtype() == kBool) {
        CHECK(on_cpu(actual).to_vector<bool>() == expected.to_vector<bool>());
      } else {
        CHECK_CLOSE(on_cpu(actual), expected, atol_for(dt), rtol_for(dt));
      }
    }
  }
  SUBCASE("int64 comparisons, as for masks of indices") {
    Tensor i = from_vector<int64_t>({0, 5, -1, 5}, {4});
    Tensor j = from_vector<int64_t>({5}, {1});
    CHECK(on_cpu(eq(on_gpu(i), on_gpu(j))).to_vector<bool>() == std::vector<bool>{false, true, false, true});
    CHECK(on_cpu(lt(on_gpu(i), on_gpu(j))).to_vector<bool>() == std::vector<bool>{true, false, true, false});
  }
  SUBCASE("scalar operands") {
    Tensor x = uniform({7}, -2, 2, kFloat32, 9);
    CHECK_CLOSE(on_cpu(on_gpu(x) * 3.0 + 1.0), x * 3.0 + 1.0, 1e-6, 1e-5);
    CHECK(on_cpu(gt(on_gpu(x), 0.0)).to_vector<bool>() == gt(x, 0.0).to_vector<bool>());
  }
}

TEST_CASE("cuda: the caching allocator's statistics") {
  if (!have_gpu()) return;
  cuda::synchronize(0);
  cuda::empty_cache(0);
  cuda::MemoryStats s0 = cuda::memory_stats(0);
  CHECK(s0.cached_bytes == 0);
  const size_t four_mb = size_t(4) << 20;
  {
    Tensor t = empty({1 << 20}, TensorOptions(kFloat32).device(Device::cuda()));  // 4 MiB
    cuda::MemoryStats s1 = cuda::memory_stats(0);
    CHECK(s1.allocated_bytes == s0.allocated_bytes + four_mb);
    CHECK(s1.peak_allocated_bytes >= s1.allocated_bytes);
    Tensor small = empty({1}, TensorOptions(kFloat32).device(Device::cuda()));  // rounded up to 512 bytes
    CHECK(cuda::memory_stats(0).allocated_bytes == s1.allocated_bytes + 512);
  }
  cuda::MemoryStats s2 = cuda::memory_stats(0);
  CHECK(s2.allocated_bytes == s0.allocated_bytes);
  CHECK(s2.cached_bytes == four_mb + 512);
  CHECK(s2.peak_allocated_bytes >= s0.allocated_bytes + four_mb + 512);
  {
    // A slightly smaller request reuses the cached 4 MiB block (it is less than twice the size) ...
    Tensor t = empty({(1 << 20) - 1000}, TensorOptions(kFloat32).device(Device::cuda()));
    cuda::MemoryStats s3 = cuda::memory_stats(0);
    CHECK(s3.cached_bytes == 512);
    CHECK(s3.allocated_bytes == s0.allocated_bytes + four_mb);
    // ... but a request of under half its size does not.
    Tensor u = empty({1 << 18}, TensorOptions(kFloat32).device(Device::cuda()));  // 1 MiB
    CHECK(cuda::memory_stats(0).cached_bytes == 512);
  }
  CHECK(cuda::memory_stats(0).cached_bytes == four_mb + (size_t(1) << 20) + 512);
  cuda::empty_cache(0);
  CHECK(cuda::memory_stats(0).cached_bytes == 0);
  CHECK(cuda::memory_stats(0).allocated_bytes == s0.allocated_bytes);
}

TEST_CASE("cuda: out of memory is a DeviceError that names the size, and the device stays usable") {
  if (!have_gpu()) return;
  CHECK_THROWS_AS(cuda::device_malloc(size_t(1) << 50, 0), DeviceError);
  check_throws_with([] { empty({int64_t(1) << 48}, TensorOptions(kFloat32).device(Device::cuda())); },
                    "[cuda_malloc] out of memory: tried to allocate 1125899906842624 bytes on cuda:0");
  check_throws_with([] { cuda::device_malloc(size_t(1) << 50, 0); }, "reduce the batch size, the sequence length or the model size");
  // The failed cudaMalloc must not poison the next kernel launch.
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  CHECK_CLOSE(on_cpu(exp(on_gpu(x))), exp(x), 1e-6, 1e-5);
  cuda::synchronize(0);
}
