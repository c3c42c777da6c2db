// Tensors: factories, dtypes, item/to_vector, printing, the seeded generator, errors.
#include <random>

#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

TEST_CASE("tensor factories") {
  Tensor z = zeros({2, 3});
  CHECK(z.dtype() == kFloat32);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.numel() == 6);
  CHECK(z.is_contiguous());
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(ones({2}, kFloat64).to_vector<double>() == std::vector<double>{1, 1});
  CHECK(full({2, 2}, 2.5, kFloat64).to_vector<double>() == std::vector<double>(4, 2.5));
  CHECK(arange(5.0, kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, kFloat64).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(arange(3.0, 0.0, -1.0, kFloat64).to_vector<double>() == std::vector<double>{3, 2, 1});
  CHECK(scalar_tensor(4.0).dim() == 0);
  CHECK(scalar_tensor(4.0).item() == 4.0);
  Tensor v = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(v.dtype() == kFloat64);
  CHECK(v.select(1, 2).to_vector<double>() == std::vector<double>{3, 6});
  CHECK(from_vector<int64_t>({7, 8}, {2}).dtype() == kInt64);
  CHECK(from_vector<double>({1, 2}, {2}, kFloat32).dtype() == kFloat32);
  float raw[4] = {1, 2, 3, 4};
  Tensor b = from_blob(raw, {2, 2}, kFloat32);
  raw[0] = 100;  // from_blob copies
  CHECK(b.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  CHECK(zeros({0, 3}).numel() == 0);
  CHECK(zeros_like(v).shape() == v.shape());
  CHECK(ones_like(v).dtype() == kFloat64);
}

TEST_CASE("tensor factory errors") {
  check_throws_with([] { zeros({2, -1}); }, "[empty] negative size in shape (2,-1)");
  check_throws_with([] { from_vector<double>({1, 2, 3}, {2, 2}); }, "[from_vector] got 3 values for shape (2,2)");
  check_throws_with([] { arange(0.0, 1.0, 0.0); }, "[arange] invalid range");
  check_throws_with([] { arange(0.0, 5.0, -1.0); }, "[arange] step -1 goes away from end");
  check_throws_with([] { zeros({2}).item(); }, "[item] only a one-element tensor can be converted");
  check_throws_with([] { zeros({2}).data_ptr<double>(); }, "[data_ptr] tensor has dtype float32, asked for float64");
  check_throws_with([] { zeros({2}).size(2); }, "[size] dim 2 out of range for a tensor of 1 dimensions");
  check_throws_with([] { zeros({2}, kInt64).requires_grad_(); }, "only floating tensors can require gradients");
  check_throws_with([] { Tensor().shape(); }, "[shape] called on an undefined tensor");
  check_throws_with([] { Device::parse("gpu"); }, "[device] unknown device 'gpu'");
}

TEST_CASE("tensor printing") {
  Tensor x = from_vector<double>({1, 2.5, -3, 4}, {2, 2});
  CHECK(to_string(x) == "tensor([[1.0000, 2.5000],\n        [-3.0000, 4.0000]], dtype=float64)");
  CHECK(to_string(arange(3.0, kInt64)) == "tensor([0, 1, 2], dtype=int64)");
  CHECK(to_string(scalar_tensor(2.0)) == "tensor(2.0000)");
  CHECK(to_string(zeros({10})).find("...") != std::string::npos);
  CHECK(to_string(Tensor()) == "tensor(undefined)");
}

TEST_CASE("rng: seeded, counter-based, reproducible") {
  Generator g1(42), g2(42), g3(43);
  Tensor a = randn({1000}, kFloat64, &g1), b = randn({1000}, kFloat64, &g2), c = randn({1000}, kFloat64, &g3);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(a.to_vector<double>() != c.to_vector<double>());
  CHECK(g1.offset() == 1);
  // the next draw differs from the first (the offset advanced)
  CHECK(randn({1000}, kFloat64, &g1).to_vector<double>() != a.to_vector<double>());
  // moments of 100k normals and uniforms
  Generator g(7);
  std::vector<double> n = randn({100000}, kFloat64, &g).to_vector<double>();
  double m = 0, s = 0;
  for (double v : n) m += v;
  m /= n.size();
  for (double v : n) s += (v - m) * (v - m);
  s /= n.size();
  CHECK(std::fabs(m) < 0.02);
  CHECK(std::fabs(s - 1.0) < 0.02);
  std::vector<double> u = rand({100000}, kFloat64, &g).to_vector<double>();
  double um = 0, lo = 1, hi = 0;
  for (double v : u) { um += v; lo = std::min(lo, v); hi = std::max(hi, v); }
  CHECK(std::fabs(um / u.size() - 0.5) < 0.01);
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  std::vector<int64_t> r = randint(-3, 4, {10000}, kInt64, &g).to_vector<int64_t>();
  std::vector<int> counts(7, 0);
  for (int64_t v : r) { REQUIRE(v >= -3); REQUIRE(v < 4); counts[v + 3]++; }
  for (int cnt : counts) CHECK(cnt > 1200);  // ~1428 expected each
  // float32 draws are the float64 values rounded
  Generator ga(5), gb(5);
  std::vector<float> f32 = rand({50}, kFloat32, &ga).to_vector<float>();
  std::vector<double> f64 = rand({50}, kFloat64, &gb).to_vector<double>();
  for (size_t i = 0; i < f32.size(); ++i) CHECK(f32[i] == static_cast<float>(f64[i]));
  // the default generator follows manual_seed
  manual_seed(11);
  Tensor d1 = rand({5});
  manual_seed(11);
  CHECK(rand({5}).to_vector<float>() == d1.to_vector<float>());
  check_throws_with([] { randint(3, 3, {2}); }, "[randint] empty range [3, 3)");
  check_throws_with([] { rand({2}, kInt64); }, "[rand] dtype must be floating");
}

TEST_CASE("rng: known Philox4x32-10 answer") {
  // Known-answer vector from the Random123 distribution (kat_vectors: philox4x32_10, counter and key all ones).
  philox::Block out = philox::philox4x32(philox::Block{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                                         0xffffffffu, 0xffffffffu);
  CHECK(out.x[0] == 0x408f276du);
  CHECK(out.x[1] == 0x41c83b0eu);
  CHECK(out.x[2] == 0xa20bc7c6u);
  CHECK(out.x[3] == 0x6d5451fdu);
  philox::Block zero = philox::philox4x32(philox::Block{{0, 0, 0, 0}}, 0, 0);
  CHECK(zero.x[0] == 0x6627e8d5u);
  CHECK(zero.x[1] == 0xe169c58du);
  CHECK(zero.x[2] == 0xbc57ac4cu);
  CHECK(zero.x[3] == 0x9b00dbd8u);
}

TEST_CASE("cpu allocator: large blocks are reused, statistics, out-of-memory message") {
  cpu_allocator::empty_cache();
  CpuMemoryStats before = cpu_allocator::stats();
  void* first = nullptr;
  {
    Tensor a = empty({1 << 18});  // 1 MiB: cached when freed
    first = a.raw_data();
    CHECK(cpu_allocator::stats().allocated_bytes == before.allocated_bytes + (size_t(1) << 20));
  }
  CHECK(cpu_allocator::stats().cached_bytes == size_t(1) << 20);
  {
    Tensor b = empty({1 << 18});  // the same size gets the same block back
    CHECK(b.raw_data() == first);
    CHECK(cpu_allocator::stats().cached_bytes == 0);
  }
  CHECK(cpu_allocator::stats().peak_allocated_bytes >= before.allocated_bytes + (size_t(1) << 20));
  cpu_allocator::empty_cache();
  CHECK(cpu_allocator::stats().cached_bytes == 0);
  CHECK(cpu_allocator::stats().allocated_bytes == before.allocated_bytes);
  // small blocks are not cached; from 4 KiB on they are
  { Tensor s = empty({16}); }
  CHECK(cpu_allocator::stats().cached_bytes == 0);
  { Tensor s = empty({1024}); }
  CHECK(cpu_allocator::stats().cached_bytes == 4096);
  cpu_allocator::empty_cache();
  // sizes round up to eight per doubling: 1 MiB + 4 bytes and 1 MiB + 100 KiB share a block of
  // 1.125 MiB, and 1.125 MiB + 4 bytes takes the next size, 1.25 MiB
  {
    Tensor a = empty({(1 << 18) + 1});
    first = a.raw_data();
    CHECK(cpu_allocator::stats().allocated_bytes == before.allocated_bytes + (size_t(9) << 17));
  }
  {
    Tensor b = empty({(1 << 18) + 25600});
    CHECK(b.raw_data() == first);
    Tensor c = empty({(9 << 15) + 1});
    CHECK(cpu_allocator::stats().allocated_bytes == before.allocated_bytes + (size_t(9) << 17) + (size_t(10) << 17));
  }
  cpu_allocator::empty_cache();
  CHECK(cpu_allocator::stats().allocated_bytes == before.allocated_bytes);
  // a request beyond the address space fails with the byte count, and nothing leaks
  check_throws_with([] { empty({int64_t(1) << 48}); }, "[alloc] out of memory: could not allocate 1125899906842624 bytes");
  check_throws_with([] { empty({int64_t(1) << 40, int64_t(1) << 40}); }, "[empty] shape (1099511627776,1099511627776) of float32 is too large");
  CHECK(cpu_allocator::stats().allocated_bytes == before.allocated_bytes);
}

TEST_CASE("strided_offsets: every index's offset, against the element number divided out dim by dim") {
  // core/shape.cpp walks the index as an odometer; the reference divides each element's number by the
  // dims. Shapes of 0-4 dims with sizes 0-4 (a 0 dim: no offsets), strides -3..7 (0: a broadcast dim).
  std::mt19937 rng(7);
  int64_t checked = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int nd = static_cast<int>(rng() % 5);
    Shape shape(nd), strides(nd);
    for (int d = 0; d < nd; ++d) shape[d] = static_cast<int64_t>(rng() % 5), strides[d] = static_cast<int64_t>(rng() % 11) - 3;
    const std::vector<int64_t> got = strided_offsets(shape, strides);
    REQUIRE(static_cast<int64_t>(got.size()) == shape_numel(shape));
    for (int64_t e = 0; e < shape_numel(shape); ++e) {
      int64_t rem = e, want = 0;
      for (int d = nd - 1; d >= 0; --d) want += (rem % shape[d]) * strides[d], rem /= shape[d];
      if (got[static_cast<size_t>(e)] != want) {
        const std::string where = shape_str(shape) + " element " + std::to_string(e);
        CAPTURE(where);
        CHECK(got[static_cast<size_t>(e)] == want);
        break;
      }
      ++checked;
    }
  }
  CHECK(checked > 10000);
}
