// Sampling and the KV cache (train/trainer/sampler.h, layers/attention.h): for every positional scheme in
// decoder self-attention, and for the encoder–decoder (the seed's method in cross-attention under
// each alignment), cached decoding gives the logits of uncached decoding at every step (float64,
// 1e-10); greedy is the argmax of the full forward; top-k and top-p keep exactly what they should;
// one seed gives one sample, cached or not; bad options are clear errors.
#include <algorithm>
#include <numeric>
#include <set>

#include "layers/models.h"
#include "testing.h"
#include "train/trainer/sampler.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

const char* kSchemes[] = {"none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl",
                          "cope", "fox", "stick_breaking"};  // content-dependent: FoX's gates cached too

// V = 11, C = 8, H = 2 (D = 4), two layers. Tables are small so that the test sequences reach past
// them (seed/huang t3 = 4, shaw k = 2, T5 8 buckets up to distance 6): the cache must reproduce the
// out-of-range handling too. Dropout is on, so eval mode is exercised.
TransformerConfig small_config(const std::string& self_scheme) {
  TransformerConfig c;
  c.vocab_size = 11;
  c.src_vocab_size = 13;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 2;
  c.dropout = 0.1;
  for (PositionalConfig* p : {&c.encoder_self, &c.decoder_self, &c.cross}) {
    p->max_length = 4;
    p->clip = 2;
    p->num_buckets = 8;
    p->max_distance = 6;
  }
  c.decoder_self.scheme = self_scheme;
  return c;
}

Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  return randint(0, V, {B, T}, kInt64, &g);
}

// Logits at step n (0-based) of uncached decoding: the last row of a full pass over tokens[:, :n+1].
template <class Full>
Tensor uncached_step(const Full& full, const Tensor& tokens, int64_t n) {
  Tensor logits = full(tokens.narrow(1, 0, n + 1).contiguous());  // (B, n + 1, V)
  return logits.narrow(1, n, 1);                                  // (B, 1, V)
}

// Feeds tokens to `cached` first as a chunk of `chunk` tokens (several new queries at once), then one
// at a time, and checks every step's logits against uncached decoding.
template <class Full, class Cached>
void check_cache_matches(const Full& full, const Cached& cached, const Tensor& tokens, int64_t chunk) {
  const int64_t T = tokens.size(1);
  Tensor first = cached(tokens.narrow(1, 0, chunk).contiguous());  // (B, chunk, V)
  for (int64_t n = 0; n < chunk; ++n) {
    INFO("prompt step ", n);
    CHECK_CLOSE(first.narrow(1, n, 1), uncached_step(full, tokens, n), 1e-10, 0);
  }
  for (int64_t n = chunk; n < T; ++n) {
    INFO("step ", n);
    CHECK_CLOSE(cached(tokens.narrow(1, n, 1).contiguous()), uncached_step(full, tokens, n), 1e-10, 0);
  }
}

std::vector<int64_t> ints(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

}  // namespace

// ---- the KV cache ----

TEST_CASE("sampling: DecoderLM cached and uncached decoding give the same logits at every step, every scheme") {
  for (const char* scheme : kSchemes)
    for (bool pre : {true, false}) {
      INFO("decoder_self ", std::string(scheme), ", pre_norm ", pre);
      TransformerConfig c = small_config(scheme);
      c.pre_norm = pre;
      Generator init(7);
      DecoderLM lm(c, &init);
      lm.to(kFloat64);
      lm.eval();
      NoGradGuard no_grad;
      Tensor tokens = random_tokens(2, 10, c.vocab_size, 8);
      std::vector<LayerCache> cache;
      check_cache_matches([&](const Tensor& t) { return lm.forward(t); },
                          [&](const Tensor& t) { return lm.forward(t, Tensor(), &cache); }, tokens, 3);
      REQUIRE(cache.size() == 2);
      CHECK(cache[1].self.k.shape() == Shape{2, 2, 10, 4});  // (B, H, t_cached, D)
      CHECK(!cache[0].cross.k.defined());
    }
}

TEST_CASE("sampling: DecoderLM cache with a key padding mask over all keys matches the full pass") {
  TransformerConfig c = small_config("t5");
  Generator init(9);
  DecoderLM lm(c, &init);
  lm.to(kFloat64);
  lm.eval();
  NoGradGuard no_grad;
  Tensor tokens = random_tokens(2, 6, c.vocab_size, 10);
  // Row 1 has a padded key at position 1 (left padding of a prompt, say).
  Tensor mask = from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, {2, 6}).to(kBool);
  Tensor full = lm.forward(tokens, mask);  // (B, 6, V)
  std::vector<LayerCache> cache;
  Tensor a = lm.forward(tokens.narrow(1, 0, 4).contiguous(), mask.narrow(1, 0, 4).contiguous(), &cache);
  Tensor b = lm.forward(tokens.narrow(1, 4, 2).contiguous(), mask, &cache);
  CHECK_CLOSE(cat({a, b}, 1), full, 1e-10, 0);
  check_throws_with([&] { lm.forward(tokens.narrow(1, 0, 1).contiguous(), mask, &cache); }, "covers all keys");
}

TEST_CASE("sampling: EncoderDecoder cached and uncached decoding give the same logits at every step") {
  // Seed's method in cross-attention (left alignment), T5 in encoder self-attention, every scheme in
  // decoder self-attention; the source has padding.
  // Then the other cross schemes (RoPE's cached keys are stored rotated) with T5 self-attention.
  std::vector<std::pair<const char*, const char*>> cases;
  for (const char* self : kSchemes) cases.push_back({self, "seed"});
  for (const char* cross : {"none", "shaw", "t5", "alibi", "rope"}) cases.push_back({"t5", cross});
  for (const auto& entry : cases) {
    const auto& self = entry.first;
    const auto& cross = entry.second;
    INFO("decoder_self ", std::string(self), ", cross ", std::string(cross));
    TransformerConfig c = small_config(self);
    c.encoder_self.scheme = "t5";
    c.cross.scheme = cross;
    Generator init(11);
    EncoderDecoder model(c, &init);
    model.to(kFloat64);
    model.eval();
    NoGradGuard no_grad;
    Tensor src = random_tokens(2, 6, 13, 12);
    Tensor src_mask = from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 6}).to(kBool);
    Tensor memory = model.encode(src, src_mask);
    Tensor tgt = random_tokens(2, 9, c.vocab_size, 13);
    std::vector<LayerCache> cache;
    check_cache_matches([&](const Tensor& t) { return model.decode(t, memory, src_mask); },
                        [&](const Tensor& t) { return model.decode(t, memory, src_mask, Tensor(), &cache); }, tgt,
                        2);
    REQUIRE(cache.size() == 2);
    CHECK(cache[0].cross.k.shape() == Shape{2, 2, 6, 4});  // projected once: (B, H, t1, D)
  }
}

TEST_CASE("sampling: a cross scheme under Right or Scaled alignment refuses the cache — generate recomputes") {
  // There π(i) of every earlier target query moves as the target grows, so cached states go stale.
  for (Alignment a : {Alignment::Right, Alignment::Scaled}) {
    INFO("cross alignment ", static_cast<int>(a));
    TransformerConfig c = small_config("t5");
    c.cross.scheme = "seed";
    c.cross_alignment = aligned_by(a);
    Generator init(27);
    EncoderDecoder model(c, &init);
    Tensor src = random_tokens(1, 5, 13, 28);
    Tensor memory = model.encode(src);
    std::vector<LayerCache> cache;
    check_throws_with([&] { model.decode(random_tokens(1, 2, 11, 29), memory, Tensor(), Tensor(), &cache); },
                      "needs cross_alignment Left");
    SamplingOptions o = SamplingOptions().max_new_tokens_(4).seed_(5).eos_(-1);
    CHECK(ints(generate(model, src, Tensor(), o)) == ints(generate(model, src, Tensor(), o, false)));
  }
}

TEST_CASE("sampling: generate wants tgt_positions exactly when the model's cross alignment is explicit") {
  TransformerConfig c = small_config("t5");
  c.cross.scheme = "seed";
  c.cross_alignment = CrossAlignment::Scaled;
  Generator init(31);
  EncoderDecoder aligned(c, &init);
  Tensor src = random_tokens(1, 5, 13, 32);
  SamplingOptions o = SamplingOptions().max_new_tokens_(3).seed_(5).eos_(-1);
  Tensor positions = from_vector<int64_t>({0, 1, 2, 3}, {4});
  check_throws_with([&] { generate(aligned, src, Tensor(), o, true, positions); },
                    "tgt_positions given, but the model aligns cross-attention itself (model.cross_alignment = "
                    "\"scaled\")");
  c.cross_alignment = CrossAlignment::Explicit;
  EncoderDecoder placed(c, &init);
  check_throws_with([&] { generate(placed, src, Tensor(), o); },
                    "the model places its cross-attention queries explicitly (model.cross_alignment = \"explicit\")");
  check_throws_with([&] { generate(placed, src, Tensor(), o, true, positions.narrow(0, 0, 3)); },
                    "tgt_positions must be int64 (L) with L >= 1 + max_new_tokens = 4");
  CHECK(generate(placed, src, Tensor(), o, true, positions).size(1) >= 1);
}

TEST_CASE("sampling: a cache needs a causal block") {
  Generator init(3);
  EncoderBlock block(8, 2, 16, BlockOptions{}, nullptr, &init);
  LayerCache cache;
  check_throws_with([&] { block.forward(uniform({1, 2, 8}, -1, 1), Tensor(), cache); }, "needs a causal block");
}

// ---- generate ----

TEST_CASE("sampling: greedy equals the argmax of the full forward, cached or not — temperature 0 ignores filters") {
  for (const char* scheme : {"t5", "rope", "alibi"}) {
    INFO("decoder_self ", std::string(scheme));
    Generator init(5);
    DecoderLM lm(small_config(scheme), &init);
    Tensor prompt = random_tokens(2, 3, 11, 6);
    SamplingOptions o;
    o.max_new_tokens = 6;
    o.temperature = 0;
    o.eos = -1;  // no stop: every step is checked
    Tensor out = generate(lm, prompt, o);
    REQUIRE(out.shape() == Shape{2, 9});
    CHECK(lm.is_training());  // the mode is restored
    CHECK(ints(out.narrow(1, 0, 3)) == ints(prompt));
    lm.eval();
    Tensor logits = lm.forward(out.narrow(1, 0, 8).contiguous());  // (B, 8, V)
    CHECK(ints(argmax(logits, -1).narrow(1, 2, 6)) == ints(out.narrow(1, 3, 6)));
    lm.train();
    CHECK(ints(generate(lm, prompt, o, false)) == ints(out));
    // Temperature 0 is greedy whatever the filters and the seed.
    CHECK(ints(generate(lm, prompt, SamplingOptions(o).top_k_(3).top_p_(0.5).seed_(99))) == ints(out));
    // top_k = 1 at any temperature is greedy too.
    CHECK(ints(generate(lm, prompt, SamplingOptions(o).temperature_(1.7).top_k_(1))) == ints(out));
  }
}

TEST_CASE("sampling: EncoderDecoder greedy equals the argmax of decode, cached or not") {
  TransformerConfig c = small_config("t5");
  c.cross.scheme = "seed";
  Generator init(15);
  EncoderDecoder model(c, &init);
  Tensor src = random_tokens(2, 5, 13, 16);
  Tensor src_mask = from_vector<int64_t>({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5}).to(kBool);
  SamplingOptions o = SamplingOptions().max_new_tokens_(5).temperature_(0).eos_(-1);
  Tensor out = generate(model, src, src_mask, o);
  REQUIRE(out.shape() == Shape{2, 6});
  CHECK(ints(out.narrow(1, 0, 1)) == std::vector<int64_t>{kBos, kBos});
  model.eval();
  NoGradGuard no_grad;
  Tensor logits = model.forward(src, out.narrow(1, 0, 5).contiguous(), src_mask);
  CHECK(ints(argmax(logits, -1)) == ints(out.narrow(1, 1, 5)));
  CHECK(ints(generate(model, src, src_mask, o, false)) == ints(out));
  // Sampling: the same seed gives the same tokens with and without the cache.
  o.temperature = 1.0;
  o.seed = 4;
  CHECK(ints(generate(model, src, src_mask, o, false)) == ints(generate(model, src, src_mask, o)));
}

TEST_CASE("sampling: the same seed gives the same samples, cached or not — another seed differs") {
  Generator init(17);
  DecoderLM lm(small_config("shaw"), &init);
  Tensor prompt = random_tokens(3, 2, 11, 18);
  SamplingOptions o = SamplingOptions().max_new_tokens_(12).temperature_(1.5).seed_(123).eos_(-1);
  Tensor a = generate(lm, prompt, o);
  CHECK(ints(generate(lm, prompt, o)) == ints(a));
  CHECK(ints(generate(lm, prompt, o, false)) == ints(a));
  CHECK(ints(generate(lm, prompt, SamplingOptions(o).seed_(124))) != ints(a));  // 36 draws over 11 ids
}

TEST_CASE("sampling: generation stops at EOS — a finished row is padded") {
  Generator init(19);
  DecoderLM lm(small_config("alibi"), &init);
  Tensor prompt = random_tokens(2, 3, 11, 20);
  SamplingOptions o = SamplingOptions().max_new_tokens_(6).temperature_(0).eos_(-1);
  std::vector<int64_t> free_run = ints(generate(lm, prompt, o));  // (2, 9)
  // Make row 0's second new token the stop token: row 0 then stops, row 1 runs on.
  o.eos = free_run[4];
  std::vector<int64_t> row1(free_run.begin() + 9 + 3, free_run.end());
  auto first_eos = std::find(row1.begin(), row1.end(), o.eos);
  Tensor out = generate(lm, prompt, o);
  std::vector<int64_t> got = ints(out);
  const int64_t T = out.size(1);
  // Row 0 has EOS at column 4 (or earlier, if the same token came first) then only PAD.
  auto row0_eos = std::find(got.begin() + 3, got.begin() + T, o.eos);
  REQUIRE(row0_eos != got.begin() + T);
  for (auto it = row0_eos + 1; it != got.begin() + T; ++it) CHECK(*it == kPad);
  // The length is set by the row that ends last (or max_new_tokens).
  const int64_t row1_new = first_eos == row1.end() ? 6 : (first_eos - row1.begin()) + 1;
  const int64_t row0_new = (row0_eos - got.begin()) - 3 + 1;
  CHECK(T == 3 + std::max(row0_new, row1_new));
  // max_new_tokens = 0 returns the prompt.
  CHECK(ints(generate(lm, prompt, SamplingOptions().max_new_tokens_(0))) == ints(prompt));
}

// ---- the filters ----

TEST_CASE("sampling: top-k never picks outside the k most likely ids") {
  std::vector<double> z;
  for (int64_t v : ints(random_tokens(1, 11, 1000, 21))) z.push_back(static_cast<double>(v) / 100.0);
  std::vector<size_t> order(z.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return z[a] > z[b]; });
  for (int64_t k : {1, 3, 5}) {
    INFO("top_k ", k);
    SamplingOptions o = SamplingOptions().top_k_(k).temperature_(2.0);
    std::set<int64_t> top(order.begin(), order.begin() + k);
    std::vector<double> p = sampling_distribution(z, o);
    double sum = 0;
    for (size_t id = 0; id < p.size(); ++id) {
      sum += p[id];
      CHECK((p[id] > 0) == (top.count(static_cast<int64_t>(id)) == 1));
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-12));
    Tensor logits = from_vector<double>(z, {1, 11}).expand({400, 11}).contiguous();
    Generator g(22);
    std::vector<int64_t> picks = sample_rows(logits, rand({400}, kFloat64, &g).to_vector<double>(), o);
    std::set<int64_t> seen(picks.begin(), picks.end());
    for (int64_t id : seen) CHECK(top.count(id) == 1);
    CHECK(seen.size() == static_cast<size_t>(k));  // 400 draws reach every kept id
  }
}

TEST_CASE("sampling: top-p keeps the smallest set of most likely ids with mass >= p") {
  // Known probabilities 0.5, 0.3, 0.15, 0.05 (ids shuffled): log-probabilities as logits.
  std::vector<double> probs = {0.15, 0.5, 0.05, 0.3};
  std::vector<double> z;
  for (double p : probs) z.push_back(std::log(p));
  auto kept = [&](double top_p) {
    std::vector<double> p = sampling_distribution(z, SamplingOptions().top_p_(top_p));
    std::set<int64_t> ids;
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] > 0) ids.insert(static_cast<int64_t>(i));
    return ids;
  };
  CHECK(kept(0.3) == std::set<int64_t>{1});
  CHECK(kept(0.7) == std::set<int64_t>{1, 3});
  CHECK(kept(0.9) == std::set<int64_t>{0, 1, 3});
  CHECK(kept(0.97) == std::set<int64_t>{0, 1, 2, 3});
  CHECK(kept(1.0) == std::set<int64_t>{0, 1, 2, 3});
  std::vector<double> p = sampling_distribution(z, SamplingOptions().top_p_(0.7));
  CHECK(p[1] == doctest::Approx(0.5 / 0.8).epsilon(1e-12));  // renormalised over the kept set
  CHECK(p[3] == doctest::Approx(0.3 / 0.8).epsilon(1e-12));
  // Random logits, many p: the kept set is a prefix of the sorted ids, its mass is ≥ p, and without
  // its least likely member the mass would fall below p (the smallest such set).
  std::vector<double> r;
  for (int64_t v : ints(random_tokens(1, 11, 1000, 23))) r.push_back(static_cast<double>(v) / 300.0);
  std::vector<double> full = sampling_distribution(r, SamplingOptions());
  std::vector<size_t> order(r.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r[a] > r[b]; });
  for (double top_p : {0.05, 0.2, 0.5, 0.8, 0.95, 0.999}) {
    INFO("top_p ", top_p);
    std::vector<double> q = sampling_distribution(r, SamplingOptions().top_p_(top_p));
    size_t n = 0;
    while (n < order.size() && q[order[n]] > 0) ++n;
    for (size_t m = n; m < order.size(); ++m) CHECK(q[order[m]] == 0);
    double mass = 0;
    for (size_t m = 0; m < n; ++m) mass += full[order[m]];
    CHECK(mass >= top_p);
    CHECK(mass - full[order[n - 1]] < top_p);
  }
}

TEST_CASE("sampling: bad options are clear errors") {
  Generator init(25);
  DecoderLM lm(small_config("none"), &init);
  Tensor prompt = random_tokens(1, 2, 11, 26);
  auto fails = [&](const SamplingOptions& o, const std::string& what) {
    check_throws_with([&] { generate(lm, prompt, o); }, what);
  };
  fails(SamplingOptions().top_p_(0), "[generate] top_p must be in (0, 1]");
  fails(SamplingOptions().top_p_(1.5), "[generate] top_p must be in (0, 1]");
  fails(SamplingOptions().temperature_(-0.5), "[generate] temperature must be finite and >= 0");
  fails(SamplingOptions().max_new_tokens_(-1), "[generate] max_new_tokens must be >= 0");
  fails(SamplingOptions().top_k_(-2), "[generate] top_k must be >= 0");
  check_throws_with([&] { generate(lm, from_vector<double>({1.0, 2.0}, {1, 2}), SamplingOptions()); },
                    "[generate] prompt must be int64 (B, T)");
}
