// Mixed precision, the numbers (core/base/half.h, autograd/autocast.h): the bfloat16 and float16 casts
// against hand-computed bit patterns (ties to even, subnormals, inf, NaN, float16 overflow) and an
// exhaustive round trip; tensors in the 16-bit storage dtypes (.to, views, item, refused arithmetic);
// the gradient through a cast; and every autocast product (matmul, addmm, bmm, Linear, the fused
// attention core), forward and backward, bit for bit equal to float32 computed on the rounded operands
// and within the 16-bit tolerance of plain float32. The training side: tests/test_precision_train.cpp.
#include <cmath>
#include <cstring>
#include <filesystem>

#include "autograd/autocast.h"
#include "core/safetensors.h"
#include "layers/linear.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The 16-bit patterns a tensor holds.
std::vector<uint16_t> raw16(const Tensor& t) {
  REQUIRE(dtype_size(t.dtype()) == 2);
  Tensor c = t.contiguous();
  std::vector<uint16_t> out(static_cast<size_t>(c.numel()));
  std::memcpy(out.data(), c.raw_data(), out.size() * 2);
  return out;
}

// Leaves a (float32) rounded to `low` and back: what autocast feeds the products.
Tensor rounded_leaf(const Tensor& x, DType low) { return x.detach().to(low).to(kFloat32).requires_grad_(true); }

}  // namespace

TEST_CASE("precision: float -> bfloat16 rounds to nearest even and keeps inf, NaN and the sign") {
  struct Row { uint32_t in; uint16_t out; const char* what; };
  const Row rows[] = {
      {0x3F800000u, 0x3F80, "1"},
      {0x3F808000u, 0x3F80, "1 + 2^-8: a tie, to the even 1"},
      {0x3F818000u, 0x3F82, "1 + 3·2^-8: a tie, to the even 1 + 2^-6"},
      {0x3F808001u, 0x3F81, "just above the tie: up"},
      {0x3F807FFFu, 0x3F80, "just below the tie: down"},
      {0xBF808001u, 0xBF81, "negative: the same magnitude"},
      {0x3FFFFFFFu, 0x4000, "a carry into the exponent"},
      {0x7F7FFFFFu, 0x7F80, "float32's largest rounds to inf"},
      {0x7F800000u, 0x7F80, "inf"},
      {0xFF800000u, 0xFF80, "-inf"},
      {0x7FC00000u, 0x7FC0, "the quiet NaN"},
      {0x7F800001u, 0x7FC0, "a NaN whose payload is in the dropped bits stays a NaN"},
      {0xFFC00000u, 0xFFC0, "a negative NaN"},
      {0x80000000u, 0x8000, "-0"},
      {0x00010000u, 0x0001, "a float32 subnormal that is exactly a bfloat16 one"},
      {0x00008000u, 0x0000, "the tie between 0 and the smallest subnormal: to 0"},
      {0x00018000u, 0x0002, "a subnormal tie: to the even 2"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CHECK(float_to_bf16_bits(from_bits(r.in)) == r.out);
  }
  CHECK(bf16_bits_to_float(0x3F81) == 1.0078125f);
  CHECK(bits_of(bf16_bits_to_float(0xFF80)) == 0xFF800000u);
  CHECK(std::isnan(bf16_bits_to_float(0x7FC1)));
  // Every one of the 65536 patterns survives bfloat16 -> float -> bfloat16 (a NaN as a NaN).
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_bits_to_float(static_cast<uint16_t>(h));
    const uint16_t back = float_to_bf16_bits(f);
    if (std::isnan(f)) CHECK(std::isnan(bf16_bits_to_float(back)));
    else if (back != h) FAIL_CHECK("bfloat16 pattern ", h, " came back as ", back);
  }
}

TEST_CASE("precision: float -> float16 rounds to nearest even, overflows to inf, makes subnormals") {
  struct Row { float in; uint16_t out; const char* what; };
  const Row rows[] = {
      {1.0f, 0x3C00, "1"},
      {1.0f + 0x1p-11f, 0x3C00, "1 + 2^-11: a tie, to the even 1"},
      {1.0f + 3 * 0x1p-11f, 0x3C02, "1 + 3·2^-11: a tie, to the even 1 + 2^-9"},
      {-2.5f, 0xC100, "-2.5"},
      {65504.0f, 0x7BFF, "the largest half"},
      {65519.996f, 0x7BFF, "below the halfway point to 2^16: down to 65504"},
      {65520.0f, 0x7C00, "the halfway point: to inf (65504's mantissa is odd)"},
      {1e6f, 0x7C00, "overflow"},
      {-1e6f, 0xFC00, "negative overflow"},
      {0x1p-14f, 0x0400, "the smallest normal"},
      {0x1p-24f, 0x0001, "the smallest subnormal"},
      {0x1p-25f, 0x0000, "the tie between 0 and 2^-24: to 0"},
      {3 * 0x1p-25f, 0x0002, "the tie between 1 and 2 units: to 2"},
      {1023 * 0x1p-24f + 0x1p-25f, 0x0400, "the largest subnormal's tie: up to the smallest normal"},
      {1e-10f, 0x0000, "underflow to 0"},
      {-1e-10f, 0x8000, "underflow to -0"},
      {INFINITY, 0x7C00, "inf"},
      {-INFINITY, 0xFC00, "-inf"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CHECK(float_to_fp16_bits(r.in) == r.out);
  }
  CHECK((float_to_fp16_bits(NAN) & 0x7E00) == 0x7E00);                   // a quiet NaN
  CHECK((float_to_fp16_bits(from_bits(0xFF800001u)) & 0xFE00) == 0xFE00);  // signalling, negative: quiet, sign kept
  CHECK(fp16_bits_to_float(0x0001) == 0x1p-24f);
  CHECK(fp16_bits_to_float(0x7BFF) == 65504.0f);
  CHECK(bits_of(fp16_bits_to_float(0x8000)) == 0x80000000u);
  CHECK(fp16_bits_to_float(0xFC00) == -INFINITY);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_bits_to_float(static_cast<uint16_t>(h));
    const uint16_t back = float_to_fp16_bits(f);
    if (std::isnan(f)) CHECK(std::isnan(fp16_bits_to_float(back)));
    else if (back != h) FAIL_CHECK("float16 pattern ", h, " came back as ", back);
  }
  // Nearest, ties to even, on 200,000 floats spread over float16's whole range (both signs): the
  // result is at least as close as either neighbour, and on a tie it is the even one.
  Generator g(7);
  std::vector<float> xs = mul(sub(rand({200000}, kFloat32, &g), 0.5), 2.0).to_vector<float>();
  int64_t bad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float x = std::ldexp(xs[i], static_cast<int>(i % 42) - 26);  // 2^-26 … 2^15 magnitudes
    const uint16_t h = float_to_fp16_bits(x);
    const double v = fp16_bits_to_float(h), err = std::fabs(double(x) - v);
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + d);
      if ((n & 0x7C00) == 0x7C00 || (n & 0x7FFF) == 0x7FFF) continue;  // no finite neighbour there
      const double nerr = std::fabs(double(x) - double(fp16_bits_to_float(n)));
      if (nerr < err || (nerr == err && (h & 1))) ++bad;
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("precision: bfloat16 and float16 tensors: casts, views, item, and arithmetic refused") {
  Tensor x = from_vector(std::vector<float>{1.0f + 0x1p-8f, -3.0f, 65520.0f, 0x1p-25f, NAN, 1.0f + 3 * 0x1p-8f}, {2, 3});
  Tensor b = x.to(kBFloat16);
  CHECK(b.dtype() == kBFloat16);
  CHECK(dtype_size(kBFloat16) == 2);
  CHECK(std::string(dtype_name(kBFloat16)) == "bfloat16");
  CHECK(raw16(b) == std::vector<uint16_t>{0x3F80, 0xC040, 0x4780, 0x3300, 0x7FC0, 0x3F82});
  Tensor h = x.to(kFloat16);
  CHECK(std::string(dtype_name(h.dtype())) == "float16");
  CHECK(raw16(h) == std::vector<uint16_t>{0x3C04, 0xC200, 0x7C00, 0x0000, 0x7E00, 0x3C0C});  // 2^-8 is exact here
  // Back to float32: exact. float64 goes through float32 (as PyTorch); 16 -> 16 through float.
  std::vector<float> back = b.to(kFloat32).to_vector<float>();
  CHECK(back[0] == 1.0f);
  CHECK(back[5] == 1.0f + 0x1p-6f);
  CHECK(std::isnan(back[4]));
  CHECK(bitwise_equal(x.to(kFloat64).to(kBFloat16), b));
  CHECK(raw16(b.to(kFloat16))[2] == 0x7C00);  // bf16 65536 overflows float16
  // Views and copies of a 16-bit tensor move the patterns untouched.
  CHECK(raw16(b.transpose(0, 1).contiguous()) == std::vector<uint16_t>{0x3F80, 0x3300, 0xC040, 0x7FC0, 0x4780, 0x3F82});
  CHECK(b.select(0, 0).select(0, 2).item() == 65536.0);
  CHECK(full({2}, 0.1, kBFloat16).to(kFloat32).to_vector<float>()[1] == bf16_bits_to_float(float_to_bf16_bits(0.1f)));
  // Storage, not arithmetic: an op names the dtype and the way out.
  check_throws_with([&] { add(b, b); }, "bfloat16 is a storage dtype; cast it with .to(kFloat32)");
  check_throws_with([&] { matmul(h, h.transpose(0, 1)); }, "float16 is a storage dtype");
}

TEST_CASE("precision: the gradient through a cast is cast back (float32 -> bfloat16 -> float32)") {
  Tensor x = uniform({3, 4}, -1, 1, kFloat32, 3).requires_grad_(true);
  Tensor w = uniform({3, 4}, -1, 1, kFloat32, 4);
  Tensor y = x.to(kBFloat16);
  CHECK(y.requires_grad());
  Tensor z = y.to(kFloat32);
  CHECK(bitwise_equal(z, x.detach().to(kBFloat16).to(kFloat32)));
  sum(mul(z, w)).backward();
  // dz = w; to(float32)'s backward casts it to bfloat16, to(bfloat16)'s back to float32.
  CHECK(bitwise_equal(x.grad(), w.to(kBFloat16).to(kFloat32)));
  CHECK_FALSE(bitwise_equal(x.grad(), w));  // the rounding is visible, so the check above can fail
  Tensor x2 = uniform({5}, -1, 1, kFloat32, 5).requires_grad_(true);
  sum(x2.to(kFloat16).to(kFloat32)).backward();
  CHECK(bitwise_equal(x2.grad(), ones({5})));
}

namespace {

// One autocast product: out = f(operands) under AutocastGuard(low), and its gradients for upstream
// gradient w, against (1) f on the rounded operands with autocast off and upstream w rounded — bit for
// bit, forward and backward — and (2) plain float32, within `rtol` of the largest value. The first
// `kept` operands are not product operands (addmm's c): they stay float32, and so does their gradient
// (the sum of the float32 upstream gradient), equal bit for bit to plain float32's.
void check_autocast_product(const char* what, DType low, const TensorList& operands,
                            const std::function<Tensor(const TensorList&)>& f, double rtol, size_t kept = 0) {
  const std::string product = what, precision = dtype_name(low);
  CAPTURE(product);
  CAPTURE(precision);
  TensorList a, r, p;  // autocast, rounded reference, plain float32
  for (const Tensor& x : operands) {
    a.push_back(x.detach().clone().requires_grad_(true));
    r.push_back(r.size() < kept ? x.detach().clone().requires_grad_(true) : rounded_leaf(x, low));
    p.push_back(x.detach().clone().requires_grad_(true));
  }
  Tensor out;
  {
    AutocastGuard autocast(low);
    out = f(a);
  }
  CHECK(out.dtype() == kFloat32);
  const Tensor w = uniform(out.shape(), -1, 1, kFloat32, 77);
  sum(mul(out, w)).backward();
  const Tensor ref = f(r);
  sum(mul(ref, w.to(low).to(kFloat32))).backward();
  CHECK(bitwise_equal(out, ref));
  const Tensor plain = f(p);
  sum(mul(plain, w)).backward();
  CHECK_FALSE(bitwise_equal(out, plain));  // the rounding shows, so the equality above means something
  const double scale = max(abs(plain)).item();
  CHECK_CLOSE(out, plain, rtol * scale, 0.0);
  for (size_t i = 0; i < operands.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].grad().defined());
    CHECK(bitwise_equal(a[i].grad(), i < kept ? p[i].grad() : r[i].grad()));
    CHECK_CLOSE(a[i].grad(), p[i].grad(), rtol * max(abs(p[i].grad())).item(), 0.0);
  }
}

}  // namespace

TEST_CASE("precision: autocast products take rounded operands, accumulate and return float32") {
  // bfloat16 keeps 8 significant bits (relative rounding 2^-9), float16 11 (2^-12); a sum of k products
  // of rounded values strays by about that times sqrt(k) of the largest term: 2e-2 and 3e-3 of the
  // largest output here are several times that.
  for (DType low : {kBFloat16, kFloat16}) {
    const double rtol = low == kBFloat16 ? 2e-2 : 3e-3;
    const Tensor a = uniform({2, 5, 24}, -1, 1, kFloat32, 1), b = uniform({24, 7}, -1, 1, kFloat32, 2);
    const Tensor bias = uniform({7}, -1, 1, kFloat32, 3), bb = uniform({2, 24, 7}, -1, 1, kFloat32, 4);
    check_autocast_product("matmul (B, T, k) @ (k, m)", low, {a, b}, [](const TensorList& t) { return matmul(t[0], t[1]); }, rtol);
    check_autocast_product("batched matmul", low, {a, bb}, [](const TensorList& t) { return matmul(t[0], t[1]); }, rtol);
    check_autocast_product("bmm", low, {a, bb}, [](const TensorList& t) { return bmm(t[0], t[1]); }, rtol);
    check_autocast_product("addmm (a Linear's bias + x @ W)", low, {bias, a, b},
                           [](const TensorList& t) { return addmm(t[0], t[1], t[2]); }, rtol, /*kept=*/1);
    check_autocast_product("matmul of a 1-D operand", low, {a, uniform({24}, -1, 1, kFloat32, 5)},
                           [](const TensorList& t) { return matmul(t[0], t[1]); }, rtol);
    check_autocast_product("attention scores q @ kᵀ of (B, H, T, D) heads", low,
                           {uniform({2, 2, 6, 8}, -1, 1, kFloat32, 6), uniform({2, 2, 6, 8}, -1, 1, kFloat32, 7)},
                           [](const TensorList& t) { return matmul(t[0], t[1].transpose(-1, -2)); }, rtol);
  }
}

TEST_CASE("precision: the fused attention core under autocast takes rounded q, k, v and a rounded gradient") {
  // P·V keeps float32 weights P on the CPU (autograd/ops/flash_attention.cpp says why), in both runs.
  for (DType low : {kBFloat16, kFloat16}) {
    FlashAttentionOptions f;
    f.causal = true;
    const Tensor q = uniform({2, 2, 9, 8}, -1, 1, kFloat32, 11), k = uniform({2, 2, 9, 8}, -1, 1, kFloat32, 12);
    const Tensor v = uniform({2, 2, 9, 8}, -1, 1, kFloat32, 13);
    check_autocast_product("flash_relative_attention", low, {q, k, v},
                           [&](const TensorList& t) { return flash_relative_attention(t[0], t[1], t[2], f); },
                           low == kBFloat16 ? 2e-2 : 3e-3);
  }
}

TEST_CASE("precision: a Linear under autocast rounds its float32 master weight at every call") {
  Generator init(5);
  Linear lin(16, 8, true, &init);
  const Tensor x = uniform({4, 16}, -1, 1, kFloat32, 6);
  Tensor y;
  {
    AutocastGuard autocast(kBFloat16);
    y = lin(x);
  }
  CHECK(lin.weight.dtype() == kFloat32);  // the master copy is untouched
  const Tensor ref = addmm(lin.bias, x.to(kBFloat16).to(kFloat32), lin.weight.detach().to(kBFloat16).to(kFloat32).transpose(0, 1));
  CHECK(bitwise_equal(y, ref));
  sum(y).backward();
  REQUIRE(lin.weight.grad().defined());
  CHECK(lin.weight.grad().dtype() == kFloat32);
}

TEST_CASE("precision: autocast leaves float64 alone, nests, restores, and refuses other dtypes") {
  const Tensor a = uniform({3, 5}, -1, 1, kFloat64, 1), b = uniform({5, 2}, -1, 1, kFloat64, 2);
  const Tensor plain = matmul(a, b);
  {
    AutocastGuard autocast(kBFloat16);
    CHECK(Autocast::dtype() == kBFloat16);
    CHECK(bitwise_equal(matmul(a, b), plain));  // gradient checks run in float64 under any policy
    {
      AutocastGuard off(kFloat32);
      CHECK(Autocast::dtype() == kFloat32);
    }
    CHECK(Autocast::dtype() == kBFloat16);
  }
  CHECK(Autocast::dtype() == kFloat32);
  check_throws_with([] { AutocastGuard bad(kInt64); }, "[autocast] the precision is float32 (off), bfloat16 or float16, got int64");
}

TEST_CASE("precision: safetensors files hold BF16 and F16 tensors, the bits unchanged") {
  const std::string path = (std::filesystem::temp_directory_path() / "relgrad_precision_test.safetensors").string();
  const Tensor x = uniform({3, 5}, -100, 100, kFloat32, 9);
  save_safetensors(path, {{"b", x.to(kBFloat16)}, {"h", x.to(kFloat16)}}, {});
  const SafetensorsFile f = load_safetensors(path);
  std::filesystem::remove(path);
  CHECK(f.tensors.at("b").dtype() == kBFloat16);
  CHECK(f.tensors.at("h").dtype() == kFloat16);
  CHECK(bitwise_equal(f.tensors.at("b"), x.to(kBFloat16)));
  CHECK(bitwise_equal(f.tensors.at("h"), x.to(kFloat16)));
}

TEST_CASE("precision: on the GPU, casts and an autocast product give the CPU's bits") {
  if (!have_gpu()) return;
  const Device gpu = Device::cuda(0);
  const Tensor x = uniform({7, 33}, -70000, 70000, kFloat32, 21);  // past float16's range too
  for (DType low : {kBFloat16, kFloat16}) {
    CHECK(bitwise_equal(x.to(gpu).to(low).to(Device::cpu()), x.to(low)));
    CHECK(bitwise_equal(x.to(low).to(gpu).to(kFloat32).to(Device::cpu()), x.to(low).to(kFloat32)));
    CHECK(bitwise_equal(x.to(gpu).transpose(0, 1).to(low).to(Device::cpu()), x.transpose(0, 1).to(low)));
  }
  // The product on the GPU is cuBLAS's bf16 GEMM (exact products, float32 sums): the CPU's float32
  // GEMM of the rounded operands within float32 rounding of the sums (tests/test_cuda_precision.cpp
  // has every product, both precisions and the backward).
  const Tensor a = uniform({16, 64}, -1, 1, kFloat32, 22), b = uniform({64, 8}, -1, 1, kFloat32, 23);
  Tensor on_gpu;
  {
    AutocastGuard autocast(kBFloat16);
    on_gpu = matmul(a.to(gpu), b.to(gpu)).to(Device::cpu());
  }
  const Tensor ref = matmul(a.to(kBFloat16).to(kFloat32), b.to(kBFloat16).to(kFloat32));
  CHECK_CLOSE(on_gpu, ref, 1e-5, 1e-5);
}
