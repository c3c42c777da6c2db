// The caches that keep a training step on the GPU free of host-built tensors (core/device_cache.h,
// layers/positional.h): the LRU itself, and each layer's cached maps and tables — a hit for an equal
// geometry, a miss for a new shape or changed content (explicit positions, a scheme's settings), a
// bounded size, and results bitwise equal to a cold object's. These run on the CPU (the caches work
// the same on every device); tests/test_cuda_transfers.cpp counts the copies on a GPU.
#include <stdexcept>
#include <string>

#include "core/backend/index.h"
#include "core/device_cache.h"
#include "layers/absolute_position.h"
#include "layers/attention.h"
#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "layers/rotary.h"
#include "layers/transformer_xl.h"
#include "testing.h"

namespace relgrad::testing {
namespace {

AttentionGeometry geometry(int64_t t2, int64_t t1, bool causal, Tensor positions = Tensor()) {
  AttentionGeometry g = AttentionGeometry::make(2, 2, 4, t2, t1, causal);
  g.query_positions = positions;
  return g;
}

Tensor positions(std::vector<int64_t> p) { return from_vector<int64_t>(p, {int64_t(p.size())}); }

Tensor q_for(const AttentionGeometry& g, uint64_t seed) { return uniform({2, 2, g.t2, 4}, -1, 1, kFloat32, seed); }

}  // namespace

TEST_CASE("device cache: LruCache hits equal keys, misses new ones, keeps the most recent few") {
  LruCache<CacheKey, int> cache(2);
  int made = 0;
  auto get = [&](std::vector<int64_t> v) { return cache.get(CacheKey{v, kInt64, Device::cpu()}, [&] { return ++made; }); };
  CHECK(get({1, 2}) == 1);
  CHECK(get({1, 2}) == 1);  // hit: not made again
  CHECK(cache.hits() == 1);
  CHECK(cache.misses() == 1);
  CHECK(get({1, 3}) == 2);
  CHECK(get({1, 2}) == 1);  // {1, 2} is now the most recent, {1, 3} the least
  CHECK(get({4}) == 3);     // over capacity: {1, 3} goes
  CHECK(cache.size() == 2);
  CHECK(get({1, 2}) == 1);
  CHECK(get({1, 3}) == 4);  // made again
  // The dtype and device are part of the key.
  CHECK(cache.get(CacheKey{{1, 2}, kFloat32, Device::cpu()}, [&] { return ++made; }) == 5);
  // A make() that throws leaves nothing behind, and the next call tries again.
  const size_t before = cache.size();
  CHECK_THROWS_AS(cache.get(CacheKey{{9}, kInt64, Device::cpu()}, []() -> int { throw std::runtime_error("no"); }),
                  std::runtime_error);
  CHECK(cache.size() == before);
  CHECK(cache.get(CacheKey{{9}, kInt64, Device::cpu()}, [&] { return ++made; }) == 6);
  // A copy starts empty (a copied module has its own cache).
  LruCache<CacheKey, int> copy = cache;
  CHECK(copy.size() == 0);
  CHECK(copy.capacity() == 2);
}

TEST_CASE("device cache: cached_index_upload and check_index_values on the CPU") {
  Tensor t = cached_index_upload({3, 1, 2}, {3}, Device::cpu());
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 2});
  // A CPU index is checked at every call: the check runs (and throws its own error) each time.
  int runs = 0;
  auto check = [&](const Tensor& host) {
    ++runs;
    backend::check_indices(host, 3, "test_op", "a table of 3");
  };
  Tensor ok = positions({0, 2, 1});
  backend::check_index_values(ok, 0, 3, check);
  backend::check_index_values(ok, 0, 3, check);
  CHECK(runs == 2);
  check_throws_with([&] { backend::check_index_values(positions({0, 3}), 0, 3, check); },
                    "[test_op] index 3 is out of range for size 3 (a table of 3)");
}

// The key term with no cache at all: relative_index's map over the whole table.
Tensor uncached_scores(const Tensor& q, const Tensor& table, const AttentionGeometry& g, const RelativeIndexOptions& o) {
  return relative_gather(matmul(q, table.transpose(-1, -2)), relative_index(g.t2, g.t1, o), o.table_size());
}

TEST_CASE("device cache: the learned tables' index maps are cached by geometry and settings") {
  const LruCache<CacheKey, RelativeMap>& maps = relative_map_cache();
  SeedRelativeEmbedding seed(4, 3, 0, OutOfRange::Zero);
  const AttentionGeometry g = geometry(6, 6, false);
  const Tensor q = q_for(g, 1);
  const uint64_t hits = maps.hits(), misses = maps.misses();
  const Tensor first = seed.score_term(q, g);
  const Tensor second = seed.score_term(q, g);
  CHECK(maps.hits() == hits + 1);
  CHECK(bitwise_equal(first, second));
  CHECK_CLOSE(second, uncached_scores(q, seed.table, g, seed.index_options(g)), 1e-6, 1e-6);
  // Another layer with the same settings shares the map.
  SeedRelativeEmbedding other(4, 3, 0, OutOfRange::Zero);
  other.score_term(q, g);
  CHECK(maps.hits() == hits + 2);
  // A new shape misses; so does a changed policy (Zero → Clip changes the rows beyond the table).
  const AttentionGeometry g5 = geometry(5, 6, false);
  seed.score_term(q_for(g5, 2), g5);
  seed.policy = OutOfRange::Clip;
  const Tensor clipped = seed.score_term(q, g);
  CHECK(maps.misses() >= misses + 2);
  CHECK(maps.hits() == hits + 2);
  CHECK_CLOSE(clipped, uncached_scores(q, seed.table, g, seed.index_options(g)), 1e-6, 1e-6);
  CHECK_FALSE(bitwise_equal(clipped, first));
  // Explicit positions are keyed by value: changing them between calls is a miss with the new map.
  const AttentionGeometry p1 = geometry(3, 6, false, positions({0, 2, 4})), p2 = geometry(3, 6, false, positions({1, 3, 5}));
  const Tensor q3 = q_for(p1, 3);
  const Tensor a = seed.score_term(q3, p1), b = seed.score_term(q3, p2);
  CHECK_CLOSE(a, uncached_scores(q3, seed.table, p1, seed.index_options(p1)), 1e-6, 1e-6);
  CHECK_CLOSE(b, uncached_scores(q3, seed.table, p2, seed.index_options(p2)), 1e-6, 1e-6);
  CHECK_FALSE(bitwise_equal(a, b));
  const uint64_t before_same = maps.hits();
  CHECK(bitwise_equal(seed.score_term(q3, geometry(3, 6, false, positions({0, 2, 4}))), a));  // new tensor, same values
  CHECK(maps.hits() == before_same + 1);
  // The Error policy's refusal is thrown at every call, never cached.
  seed.policy = OutOfRange::Error;
  for (int k = 0; k < 2; ++k) CHECK_THROWS_AS(seed.score_term(q, g), IndexError);
  // Bounded: many lengths keep at most the capacity.
  seed.policy = OutOfRange::Zero;
  for (int64_t t = 1; t <= 40; ++t) seed.score_term(q_for(geometry(t, 5, false), 4), geometry(t, 5, false));
  CHECK(maps.size() == maps.capacity());
}

TEST_CASE("device cache: Shaw's value term and Huang's and Transformer-XL's maps come from the cache") {
  const LruCache<CacheKey, RelativeMap>& maps = relative_map_cache();
  ShawRelativeEmbedding shaw(4, 2, 0, true);
  const AttentionGeometry g = geometry(5, 5, false);
  const Tensor w = uniform({2, 2, 5, 5}, 0, 1, kFloat32, 5), q = q_for(g, 6);
  const Tensor v1 = shaw.value_term(w, g), s1 = shaw.score_term(q, g);
  const uint64_t misses = maps.misses();
  CHECK(bitwise_equal(shaw.value_term(w, g), v1));
  CHECK(bitwise_equal(shaw.score_term(q, g), s1));
  CHECK(maps.misses() == misses);
  const RelativeIndexOptions o = shaw.index_options(g);
  CHECK_CLOSE(v1, matmul(relative_scatter(w, relative_index(5, 5, o), o.table_size()), shaw.value_table), 1e-6, 1e-6);
  CHECK_CLOSE(s1, uncached_scores(q, shaw.key_table, g, o), 1e-6, 1e-6);

  HuangRelativeEmbedding huang(4, 4);
  const AttentionGeometry c = geometry(6, 6, true);
  const Tensor h1 = huang.score_term(q_for(c, 7), c);
  const uint64_t hits = maps.hits();
  CHECK(bitwise_equal(huang.score_term(q_for(c, 7), c), h1));
  CHECK(maps.hits() == hits + 1);
  CHECK_CLOSE(h1, uncached_scores(q_for(c, 7), huang.table, c, huang.index_options(c)), 1e-6, 1e-6);
}

TEST_CASE("device cache: T5 buckets and ALiBi distances follow settings and positions") {
  T5RelativeBias t5(2, 8, 16, true), cold(2, 8, 16, true);  // cold: its own cache, empty
  cold.table = t5.table;
  const AttentionGeometry g = geometry(12, 12, false);
  const Tensor b1 = t5.logit_bias(g);
  CHECK(bitwise_equal(t5.logit_bias(g), b1));
  CHECK(t5.bucket_maps.hits() == 1);
  CHECK(bitwise_equal(b1, cold.logit_bias(g)));
  t5.max_distance = 6;  // another log scale: other buckets, a miss
  cold.max_distance = 6;
  const Tensor b2 = t5.logit_bias(g);
  CHECK(t5.bucket_maps.misses() == 2);
  CHECK(bitwise_equal(b2, cold.logit_bias(g)));
  CHECK_FALSE(bitwise_equal(b1, b2));

  ALiBi alibi(2, true), alibi_cold(2, true);
  const AttentionGeometry p1 = geometry(3, 5, false, positions({0, 1, 2})), p2 = geometry(3, 5, false, positions({2, 3, 4}));
  const Tensor a1 = alibi.logit_bias(p1), a2 = alibi.logit_bias(p2);
  CHECK(alibi.distance_tables.misses() == 2);
  CHECK(bitwise_equal(alibi.logit_bias(p1), a1));
  CHECK(alibi.distance_tables.hits() == 1);
  CHECK(bitwise_equal(a1, alibi_cold.logit_bias(p1)));
  CHECK(bitwise_equal(a2, alibi_cold.logit_bias(p2)));
  alibi.bidirectional = false;  // causal distances now (with a causal geometry)
  alibi_cold.bidirectional = false;
  const AttentionGeometry c = geometry(3, 5, true, positions({0, 1, 2}));
  CHECK(bitwise_equal(alibi.logit_bias(c), alibi_cold.logit_bias(c)));
}

TEST_CASE("device cache: RoPE's tables, Transformer-XL's sinusoid and map, absolute sinusoids, causal masks") {
  RoPE rope(4), rope_cold(4);
  const Tensor x = uniform({2, 2, 5, 4}, -1, 1, kFloat32, 8);
  const Tensor at = arange(5.0, kInt64), shifted = arange(2.0, 7.0, 1.0, kInt64);
  const Tensor r1 = rope.rotate(x, at);
  CHECK(bitwise_equal(rope.rotate(x, at), r1));
  CHECK(rope.rotary_tables.hits() == 1);
  CHECK(bitwise_equal(rope.rotate(x, shifted), rope_cold.rotate(x, shifted)));  // other positions: a miss
  CHECK(rope.rotary_tables.misses() == 2);
  rope.base = 500.0;  // the base is in the key
  rope_cold.base = 500.0;
  CHECK(bitwise_equal(rope.rotate(x, at), rope_cold.rotate(x, at)));
  CHECK(rope.rotary_tables.misses() == 3);

  Generator gen(3);
  TransformerXL txl(8, 2, &gen);
  const AttentionGeometry g = geometry(5, 5, true);
  const Tensor q = q_for(g, 9);
  const Tensor s1 = txl.score_term(q, g);
  const uint64_t map_hits = relative_map_cache().hits();
  CHECK(bitwise_equal(txl.score_term(q, g), s1));
  CHECK(relative_map_cache().hits() == map_hits + 1);
  CHECK(txl.sinusoid_tables.hits() == 1);
  const Tensor expected_rows = txl_sinusoid(4, 0, 8);
  CHECK(bitwise_equal(txl.sinusoid_tables.get(CacheKey{{4, 0, 8}, kFloat32, Device::cpu()}, [] { return Tensor(); }),
                      expected_rows));

  AbsolutePosition pe(AbsolutePositionKind::Sinusoidal, 6, 0, "test");
  const Tensor e = uniform({2, 4, 6}, -1, 1, kFloat32, 10);
  const Tensor y = pe.forward(e, 3);
  CHECK(bitwise_equal(pe.forward(e, 3), y));
  CHECK(pe.sinusoid_rows.hits() == 1);
  CHECK(bitwise_equal(y, e + sinusoidal_positions(3, 4, 6, TensorOptions(kFloat32))));

  MultiHeadAttention mha(8, 2);
  const Tensor in = uniform({2, 4, 8}, -1, 1, kFloat32, 11);
  AttentionOptions o;
  o.causal = true;
  const Tensor out1 = mha.forward(in, in, o).output;
  CHECK(bitwise_equal(mha.forward(in, in, o).output, out1));
  CHECK(mha.causal_masks.hits() == 1);
  o.query_positions = positions({1, 1, 2, 3});  // another mask: a miss, and the output follows it
  const Tensor out2 = mha.forward(in, in, o).output;
  CHECK(mha.causal_masks.misses() == 2);
  CHECK_FALSE(bitwise_equal(out1, out2));
}

}  // namespace relgrad::testing
