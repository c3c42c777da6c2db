// Absolute position terms (layers/absolute_position.h) and explicit cross-attention positions
// (TransformerConfig::cross_alignment Explicit, layers/models.h): the sinusoid table against Vaswani's formula
// written out, the models against a hand composition (embed + PE → blocks → head), float64 gradchecks,
// cached decoding against the full pass, explicit positions against the alignments they reproduce,
// every scheme at π = t1, state-dict names, order and the init draw, and every error.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layers/absolute_position.h"
#include "layers/models.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

Tensor random_tokens(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  return randint(0, V, {B, T}, kInt64, &g);
}

Tensor positions(const std::vector<int64_t>& p) {
  return from_vector<int64_t>(p, {static_cast<int64_t>(p.size())});
}

// V = 11 (source 13), C = 8, H = 2, two layers per stack, no dropout; small relative tables, so the
// sequences reach past them.
TransformerConfig small_config(const std::string& absolute) {
  TransformerConfig c;
  c.vocab_size = 11;
  c.src_vocab_size = 13;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.dropout = 0.0;
  for (PositionalConfig* p : {&c.encoder_self, &c.decoder_self, &c.cross}) {
    p->max_length = 4;
    p->clip = 2;
    p->num_buckets = 8;
    p->max_distance = 6;
  }
  c.absolute_position = absolute_position_from_name(absolute, "small_config");
  c.max_positions = 12;
  return c;
}

// Vaswani et al. (2017), section 3.5, written out per pair of columns: PE(pos, 2i) and PE(pos, 2i+1).
double vaswani_pe(int64_t pos, int64_t column, int64_t d_model) {
  const int64_t i = column / 2;
  const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(i) / d_model);
  return column % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

// The term a model should add for positions first … first + T − 1, (T, C) float64, built without the
// layer under test: the formula above, or the learned table's rows read one by one.
Tensor reference_term(const AbsolutePosition& pe, int64_t first, int64_t T) {
  std::vector<double> out(static_cast<size_t>(T * pe.d_model));
  std::vector<double> table = pe.kind == AbsolutePositionKind::Learned ? values(pe.weight) : std::vector<double>();
  const int64_t C = pe.d_model;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c)
      out[static_cast<size_t>(t * C + c)] =
          pe.kind == AbsolutePositionKind::Learned ? table[static_cast<size_t>((first + t) * C + c)] : vaswani_pe(first + t, c, C);
  return from_vector<double>(out, {T, pe.d_model});
}

// Tied head: logits = (h · C^−1/2) · Eᵀ (layers/models.h).
Tensor tied_logits(const Tensor& h, const Embedding& embed) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(embed.embedding_dim));
  return matmul(h * scale, embed.weight.transpose(0, 1));
}

// Feeds `tokens` to `cached` as a first chunk, then one token at a time, and checks each call's rows
// against the same rows of `full` (logits of the whole sequence).
template <class Cached>
void check_cached_equals_full(const Tensor& full, const Tensor& tokens, int64_t chunk, Cached cached) {
  const int64_t T = tokens.size(1);
  CHECK_CLOSE(cached(tokens.narrow(1, 0, chunk).contiguous()), full.narrow(1, 0, chunk), 1e-10, 0);
  for (int64_t n = chunk; n < T; ++n) {
    INFO("step ", n);
    CHECK_CLOSE(cached(tokens.narrow(1, n, 1).contiguous()), full.narrow(1, n, 1), 1e-10, 0);
  }
}

std::vector<std::string> parameter_names(const Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, p] : m.named_parameters()) names.push_back(name);
  return names;
}

}  // namespace

// ---- the layer ----

TEST_CASE("absolute position: the sinusoid table is Vaswani's formula, odd d_model included") {
  for (int64_t d : {8, 7, 1}) {
    INFO("d_model ", d);
    Tensor got = sinusoidal_positions(3, 20, d, kFloat64);  // positions 3 … 22
    REQUIRE(got.shape() == Shape{20, d});
    std::vector<double> v = values(got);
    double worst = 0;
    for (int64_t t = 0; t < 20; ++t)
      for (int64_t c = 0; c < d; ++c)
        worst = std::max(worst, std::fabs(v[static_cast<size_t>(t * d + c)] - vaswani_pe(3 + t, c, d)));
    CHECK(worst < 1e-12);
  }
  // A few values by hand: position 0 is (0, 1, 0, 1, …); position 1, column 0 is sin 1, column 1 cos 1;
  // with C = 8 column 2 has the frequency 10000^(−2/8) = 0.1.
  std::vector<double> v = values(sinusoidal_positions(0, 2, 8, kFloat64));
  CHECK(v[0] == 0.0);
  CHECK(v[1] == 1.0);
  CHECK(std::fabs(v[8] - std::sin(1.0)) < 1e-15);
  CHECK(std::fabs(v[9] - std::cos(1.0)) < 1e-15);
  CHECK(std::fabs(v[10] - std::sin(0.1)) < 1e-15);
  CHECK(sinusoidal_positions(0, 2, 8).dtype() == kFloat32);
}

TEST_CASE("absolute position: the layer adds the term at first … first + T − 1, and its gradient checks") {
  for (const char* kind : {"sinusoidal", "learned"}) {
    INFO(std::string(kind));
    Generator init(3);
    AbsolutePosition pe(absolute_position_from_name(kind, "test"), 6, 9, "test", &init);
    pe.to(kFloat64);
    Tensor x = uniform({2, 4, 6}, -1, 1, kFloat64, 5);
    CHECK_CLOSE(pe.forward(x, 5), x + reference_term(pe, 5, 4), 1e-14, 0);
    CHECK_CLOSE(pe.forward(x), x + reference_term(pe, 0, 4), 1e-14, 0);
    std::vector<Tensor*> params;
    if (pe.kind == AbsolutePositionKind::Learned) params.push_back(&pe.weight);
    gradcheck_with_params(params, {x.requires_grad_()},
                          [&](const TensorList& in) { return pe.forward(in[0], 2); });
  }
  Generator init(3);
  AbsolutePosition learned(AbsolutePositionKind::Learned, 6, 9, "test", &init);
  CHECK(learned.named_parameters().size() == 1);
  CHECK(learned.weight.shape() == Shape{9, 6});
  CHECK(AbsolutePosition(AbsolutePositionKind::Sinusoidal, 6, 0, "test").named_parameters().empty());
  CHECK(AbsolutePosition(AbsolutePositionKind::Sinusoidal, 6, 0, "test").named_buffers().empty());
  // Rows 6 … 8 are the last that fit: 3 tokens after 6 cached.
  CHECK(learned.forward(zeros({1, 3, 6}), 6).shape() == Shape{1, 3, 6});
}

// ---- the models against a hand composition ----

TEST_CASE("absolute position: DecoderLM output = blocks(embed + PE) by hand, both kinds, pre and post norm") {
  for (const char* kind : {"sinusoidal", "learned"})
    for (bool pre : {true, false}) {
      INFO(std::string(kind), ", pre_norm ", pre);
      TransformerConfig c = small_config(kind);
      c.pre_norm = pre;
      Generator init(11);
      DecoderLM lm(c, &init);
      lm.to(kFloat64);
      REQUIRE(lm.pos_embed);
      Tensor tok = random_tokens(2, 7, c.vocab_size, 12);
      Tensor h = lm.embed->forward(tok) + reference_term(*lm.pos_embed, 0, 7);
      for (const auto& block : lm.layers->items) h = block->forward(h);
      if (lm.final_norm) h = lm.final_norm->forward(h);
      CHECK_CLOSE(lm(tok), tied_logits(h, *lm.embed), 1e-12, 1e-10);
      // And the term matters: the model without it (same parameters otherwise) differs.
      Tensor plain = lm.embed->forward(tok);
      for (const auto& block : lm.layers->items) plain = block->forward(plain);
      if (lm.final_norm) plain = lm.final_norm->forward(plain);
      CHECK(values(lm(tok)) != values(tied_logits(plain, *lm.embed)));
    }
}

TEST_CASE("absolute position: EncoderDecoder adds its term in both stacks (hand composition)") {
  for (const char* kind : {"sinusoidal", "learned"}) {
    INFO(std::string(kind));
    TransformerConfig c = small_config(kind);
    c.cross.scheme = "seed";
    Generator init(13);
    EncoderDecoder model(c, &init);
    model.to(kFloat64);
    REQUIRE(model.encoder->pos_embed);
    REQUIRE(model.decoder->pos_embed);
    Tensor src = random_tokens(2, 6, c.src_vocab_size, 14), tgt = random_tokens(2, 5, c.vocab_size, 15);
    Tensor m = model.encoder->embed->forward(src) + reference_term(*model.encoder->pos_embed, 0, 6);
    for (const auto& block : model.encoder->layers->items) m = block->forward(m);
    m = model.encoder->final_norm->forward(m);
    Tensor h = model.decoder->embed->forward(tgt) + reference_term(*model.decoder->pos_embed, 0, 5);
    for (const auto& block : model.decoder->layers->items) h = block->forward(h, m);
    h = model.decoder->final_norm->forward(h);
    CHECK_CLOSE(model(src, tgt), tied_logits(h, *model.decoder->embed), 1e-12, 1e-10);
  }
}

TEST_CASE("absolute position: without relative schemes, the term alone tells positions apart") {
  // decoder_self "none", one layer: without positions the last token's attention sees the set of earlier
  // tokens, not their order, so the last logits of (a, b, c) and (b, a, c) agree; with a term they differ.
  for (const char* kind : {"none", "sinusoidal", "learned"}) {
    INFO(std::string(kind));
    TransformerConfig c = small_config(kind);
    c.decoder_self.scheme = "none";
    c.n_decoder_layers = 1;
    Generator init(17);
    DecoderLM lm(c, &init);
    lm.to(kFloat64);
    Tensor a = lm(from_vector<int64_t>({1, 2, 3}, {1, 3})).narrow(1, 2, 1);
    Tensor b = lm(from_vector<int64_t>({2, 1, 3}, {1, 3})).narrow(1, 2, 1);
    if (std::string(kind) == "none")
      CHECK_CLOSE(a, b, 1e-12, 1e-10);
    else
      CHECK(compare(a, b, 1e-6, 0) != "");
  }
}

// ---- gradients ----

TEST_CASE("absolute position: float64 gradcheck of DecoderLM and EncoderDecoder with each kind") {
  for (const char* kind : {"sinusoidal", "learned"}) {
    INFO(std::string(kind));
    TransformerConfig c = small_config(kind);
    c.n_encoder_layers = c.n_decoder_layers = 1;
    c.cross.scheme = "t5";
    Generator init(19);
    DecoderLM lm(c, &init);
    lm.to(kFloat64);
    Tensor tok = random_tokens(1, 4, c.vocab_size, 20);
    std::vector<Tensor*> lm_params{&lm.embed->weight, &lm.layers->items[0]->self_attn->q_proj->weight};
    if (lm.pos_embed->kind == AbsolutePositionKind::Learned) lm_params.push_back(&lm.pos_embed->weight);
    gradcheck_with_params(lm_params, {}, [&](const TensorList&) { return lm(tok); });

    EncoderDecoder ed(c, &init);
    ed.to(kFloat64);
    Tensor src = random_tokens(1, 5, c.src_vocab_size, 21), tgt = random_tokens(1, 3, c.vocab_size, 22);
    std::vector<Tensor*> ed_params{&ed.encoder->embed->weight, &ed.decoder->embed->weight};
    if (ed.decoder->pos_embed->kind == AbsolutePositionKind::Learned) {
      ed_params.push_back(&ed.encoder->pos_embed->weight);
      ed_params.push_back(&ed.decoder->pos_embed->weight);
    }
    gradcheck_with_params(ed_params, {}, [&](const TensorList&) { return ed(src, tgt); });
    // Every parameter, the learned tables included, is reached by backward.
    check_every_parameter_gets_gradient(ed, ed(src, tgt));
  }
}

TEST_CASE("explicit cross positions: float64 gradcheck through the cross scheme at given positions") {
  TransformerConfig c = small_config("none");
  c.n_encoder_layers = c.n_decoder_layers = 1;
  c.cross.scheme = "seed";
  c.cross_alignment = CrossAlignment::Explicit;
  Generator init(23);
  EncoderDecoder ed(c, &init);
  ed.to(kFloat64);
  auto* seed =
      dynamic_cast<SeedRelativeEmbedding*>(ed.decoder->layers->items[0]->cross_attn->positional.get());
  REQUIRE(seed);
  Tensor src = random_tokens(1, 5, c.src_vocab_size, 24), tgt = random_tokens(1, 3, c.vocab_size, 25);
  Tensor pi = positions({0, 3, 5});  // π = t1 for the last query
  gradcheck_with_params({&seed->table, &ed.decoder->layers->items[0]->cross_attn->k_proj->weight}, {},
                        [&](const TensorList&) { return ed(src, tgt, Tensor(), Tensor(), pi); });
}

// ---- cached decoding ----

TEST_CASE("absolute position: cached decoding equals the full pass (DecoderLM, EncoderDecoder, both kinds)") {
  for (const char* kind : {"sinusoidal", "learned"}) {
    INFO(std::string(kind));
    TransformerConfig c = small_config(kind);
    c.cross.scheme = "seed";
    Generator init(27);
    DecoderLM lm(c, &init);
    lm.to(kFloat64);
    Tensor tok = random_tokens(2, 9, c.vocab_size, 28);
    std::vector<LayerCache> cache;
    check_cached_equals_full(lm(tok), tok, 3,
                             [&](const Tensor& t) { return lm.forward(t, Tensor(), &cache); });

    EncoderDecoder ed(c, &init);
    ed.to(kFloat64);
    Tensor src = random_tokens(2, 6, c.src_vocab_size, 29);
    Tensor memory = ed.encode(src);
    std::vector<LayerCache> dcache;
    check_cached_equals_full(ed.decode(tok, memory), tok, 2, [&](const Tensor& t) {
      return ed.decode(t, memory, Tensor(), Tensor(), &dcache);
    });
  }
}

TEST_CASE("explicit cross positions: cached decoding equals the full pass, every cross scheme") {
  for (const char* scheme : {"seed", "shaw", "t5", "alibi", "rope"}) {
    INFO(std::string(scheme));
    TransformerConfig c = small_config("learned");
    c.cross.scheme = scheme;
    c.cross_alignment = CrossAlignment::Explicit;  // unlike Scaled, which alone cannot be cached
    Generator init(31);
    EncoderDecoder ed(c, &init);
    ed.to(kFloat64);
    Tensor src = random_tokens(2, 5, c.src_vocab_size, 32), tgt = random_tokens(2, 7, c.vocab_size, 33);
    Tensor pi = positions({0, 0, 1, 3, 3, 4, 5});  // non-decreasing, the last one past the source (t1 = 5)
    Tensor memory = ed.encode(src);
    std::vector<LayerCache> cache;
    int64_t seen = 0;
    check_cached_equals_full(ed.decode(tgt, memory, Tensor(), Tensor(), pi), tgt, 3, [&](const Tensor& t) {
      seen += t.size(1);
      return ed.decode(t, memory, Tensor(), Tensor(), &cache, pi.narrow(0, 0, seen).contiguous());
    });
  }
}

// ---- explicit positions against the alignments ----

TEST_CASE("explicit cross positions: π of Left and Scaled give those alignments' logits, other π differ") {
  const int64_t t1 = 7, t2 = 4;
  for (const char* scheme : {"seed", "shaw", "t5", "alibi", "rope"})
    for (Alignment a : {Alignment::Left, Alignment::Scaled})
      for (bool fused : {false, true}) {
        if (fused && a == Alignment::Left) continue;  // the fused core (slow on the CPU): once per scheme
        INFO(std::string(scheme), a == Alignment::Left ? " Left" : " Scaled", fused ? ", fused core" : "");
        TransformerConfig c = small_config("sinusoidal");
        c.attention_core = fused ? AttentionCore::Fused : AttentionCore::Composite;
        c.cross.scheme = scheme;
        c.cross_alignment = aligned_by(a);
        Generator init_a(35), init_b(35);
        EncoderDecoder aligned(c, &init_a);
        c.cross_alignment = CrossAlignment::Explicit;
        EncoderDecoder given(c, &init_b);  // the same draws: the alignment changes no parameter
        aligned.to(kFloat64);
        given.to(kFloat64);
        std::vector<int64_t> pi;
        for (int64_t i = 0; i < t2; ++i) pi.push_back(a == Alignment::Left ? i : i * t1 / t2);  // ⌊i·t1/t2⌋
        Tensor src = random_tokens(2, t1, c.src_vocab_size, 36), tgt = random_tokens(2, t2, c.vocab_size, 37);
        Tensor want = aligned(src, tgt);
        CHECK_CLOSE(given(src, tgt, Tensor(), Tensor(), positions(pi)), want, 1e-12, 1e-10);
        std::vector<int64_t> shifted = pi;
        for (int64_t& p : shifted) p += 2;
        CHECK(compare(given(src, tgt, Tensor(), Tensor(), positions(shifted)), want, 1e-6, 0) != "");
      }
}

TEST_CASE("explicit cross positions: every cross scheme accepts π = t1 and beyond, with finite logits") {
  for (const char* scheme : {"none", "seed", "shaw", "t5", "alibi", "rope"})
    for (OutOfRange policy : {OutOfRange::Zero, OutOfRange::Clip}) {
      INFO(std::string(scheme), policy == OutOfRange::Zero ? " Zero" : " Clip");
      TransformerConfig c = small_config("none");
      c.cross.scheme = scheme;
      c.cross.out_of_range = policy;
      c.cross.max_length = 16;
      c.cross_alignment = CrossAlignment::Explicit;
      Generator init(39);
      EncoderDecoder ed(c, &init);
      Tensor src = random_tokens(1, 4, c.src_vocab_size, 40), tgt = random_tokens(1, 3, c.vocab_size, 41);
      for (double v : values(ed(src, tgt, Tensor(), Tensor(), positions({2, 4, 9}))))
        REQUIRE(std::isfinite(v));
    }
  // Under the Error policy the seed's table (|δ| ≤ t3 − 1 = 7) takes π = t1 = 4 (δ from −4 to −1) and
  // refuses π = 9 (δ = −9 and −8 fall outside), as it refuses such a distance under any alignment.
  TransformerConfig c = small_config("none");
  c.cross.scheme = "seed";
  c.cross.out_of_range = OutOfRange::Error;
  c.cross.max_length = 8;
  c.cross_alignment = CrossAlignment::Explicit;
  EncoderDecoder ed(c);
  Tensor src = random_tokens(1, 4, c.src_vocab_size, 42), tgt = random_tokens(1, 2, c.vocab_size, 43);
  CHECK(ed(src, tgt, Tensor(), Tensor(), positions({1, 4})).size(1) == 2);
  check_throws_with([&] { ed(src, tgt, Tensor(), Tensor(), positions({1, 9})); }, "(position 9)");
}

// ---- parameters: names, order, init ----

TEST_CASE("absolute position: state-dict names and order, and the init draw") {
  TransformerConfig c = small_config("learned");
  c.max_positions = 10;
  Generator init(45);
  DecoderLM lm(c, &init);
  std::vector<std::string> names = parameter_names(lm);
  REQUIRE(names.size() >= 3);
  CHECK(names[0] == "embed.weight");
  CHECK(names[1] == "pos_embed.weight");
  CHECK(names[2].rfind("layers.0.", 0) == 0);
  CHECK(lm.pos_embed->weight.shape() == Shape{10, 8});
  {
    // Drawn right after the token table, N(0, 1) float32, from the same generator.
    Generator g(45);
    NoGradGuard no_grad;
    Tensor e = randn({11, 8}, kFloat32, &g);
    Tensor p = randn({10, 8}, kFloat32, &g);
    CHECK(bitwise_equal(lm.embed->weight, e));
    CHECK(bitwise_equal(lm.pos_embed->weight, p));
  }
  // One seed, one model; another seed, another table.
  Generator again(45), other(46);
  DecoderLM same(c, &again), different(c, &other);
  for (size_t i = 0; i < names.size(); ++i) CHECK(bitwise_equal(lm.parameters()[i], same.parameters()[i]));
  CHECK(!bitwise_equal(lm.pos_embed->weight, different.pos_embed->weight));

  Generator init_ed(47);
  EncoderDecoder ed(c, &init_ed);
  std::vector<std::string> ed_names = parameter_names(ed);
  auto index_of = [&](const std::string& n) {
    return std::find(ed_names.begin(), ed_names.end(), n) - ed_names.begin();
  };
  CHECK(index_of("encoder.pos_embed.weight") == index_of("encoder.embed.weight") + 1);
  CHECK(index_of("decoder.pos_embed.weight") == index_of("decoder.embed.weight") + 1);
  CHECK(index_of("decoder.pos_embed.weight") < static_cast<ptrdiff_t>(ed_names.size()));

  // Sinusoidal: no parameter, no buffer, and the same draws as "none" (nothing is drawn for it).
  for (bool encoder_decoder : {false, true}) {
    INFO("encoder_decoder ", encoder_decoder);
    TransformerConfig s = small_config("sinusoidal"), n = small_config("none");
    Generator gs(49), gn(49);
    std::shared_ptr<Module> ms, mn;
    if (encoder_decoder) {
      ms = std::make_shared<EncoderDecoder>(s, &gs);
      mn = std::make_shared<EncoderDecoder>(n, &gn);
    } else {
      ms = std::make_shared<DecoderLM>(s, &gs);
      mn = std::make_shared<DecoderLM>(n, &gn);
    }
    CHECK(parameter_names(*ms) == parameter_names(*mn));
    CHECK(ms->named_buffers().size() == mn->named_buffers().size());
    TensorList ps = ms->parameters(), pn = mn->parameters();
    for (size_t i = 0; i < ps.size(); ++i) CHECK(bitwise_equal(ps[i], pn[i]));
  }
}

// ---- errors ----

TEST_CASE("absolute position and explicit cross positions: errors name what is wrong") {
  // The names of model.absolute_position are its table's (layers/absolute_position.h): no other reaches a model.
  check_throws_with([&] { absolute_position_from_name("rotary", "DecoderLM"); },
                    "[DecoderLM] unknown absolute_position 'rotary' (expected none, sinusoidal or learned)");
  TransformerConfig c = small_config("learned");
  c.max_positions = 0;
  check_throws_with([&] { EncoderDecoder m(c); }, "absolute_position learned needs max_positions >= 1");
  c.max_positions = -2;
  check_throws_with([&] { DecoderLM m(c); }, "max_positions must be >= 0, got -2");
  c = small_config("none");
  c.cross_alignment = CrossAlignment::Explicit;
  check_throws_with([&] { DecoderLM m(c); }, "cross_alignment explicit is for an encoder-decoder model");

  // A sequence past the learned table: full pass and cached.
  c = small_config("learned");
  c.max_positions = 5;
  DecoderLM lm(c);
  check_throws_with([&] { lm(random_tokens(1, 6, c.vocab_size, 50)); },
                    "[DecoderLM] pos_embed (absolute_position learned): a sequence of length 6 is longer "
                    "than max_positions 5");
  std::vector<LayerCache> cache;
  lm.forward(random_tokens(1, 4, c.vocab_size, 51), Tensor(), &cache);
  check_throws_with([&] { lm.forward(random_tokens(1, 2, c.vocab_size, 52), Tensor(), &cache); },
                    "a sequence of length 6 (cached and new tokens) is longer than max_positions 5");
  EncoderDecoder long_src(c);
  check_throws_with([&] { long_src(random_tokens(1, 7, c.src_vocab_size, 53), random_tokens(1, 2, 11, 54)); },
                    "[EncoderDecoder] pos_embed (absolute_position learned): a sequence of length 7");

  // Explicit positions: missing, unwanted, wrong length or dtype, also with a cache.
  c = small_config("none");
  c.cross.scheme = "seed";
  Tensor src = random_tokens(1, 4, c.src_vocab_size, 55), tgt = random_tokens(1, 3, c.vocab_size, 56);
  EncoderDecoder aligned(c);
  check_throws_with([&] { aligned(src, tgt, Tensor(), Tensor(), positions({0, 1, 2})); },
                    "tgt_positions given but cross_alignment is not explicit");
  c.cross_alignment = CrossAlignment::Explicit;
  EncoderDecoder ed(c);
  check_throws_with([&] { ed(src, tgt); },
                    "cross_alignment is explicit, so the call needs tgt_positions int64 (3)");
  check_throws_with([&] { ed(src, tgt, Tensor(), Tensor(), positions({0, 1})); },
                    "tgt_positions must be int64 (3), one π(i) per target token, got int64 (2)");
  check_throws_with([&] { ed(src, tgt, Tensor(), Tensor(), positions({0, 1, 2}).to(kFloat32)); },
                    "tgt_positions must be int64 (3), one π(i) per target token, got float32 (3)");
  Tensor memory = ed.encode(src);
  std::vector<LayerCache> dcache;
  ed.decode(tgt, memory, Tensor(), Tensor(), &dcache, positions({0, 1, 2}));
  Tensor next = tgt.narrow(1, 0, 1);
  check_throws_with([&] { ed.decode(next, memory, Tensor(), Tensor(), &dcache, positions({3})); },
                    "tgt_positions must be int64 (4), one π(i) per target token, got int64 (1)");
  check_throws_with([&] { ed.decode(next, memory, Tensor(), Tensor(), &dcache); },
                    "cross_alignment is explicit, so the call needs tgt_positions int64 (4)");
  // DecoderBlock itself checks the positions it is handed.
  DecoderBlock block(8, 2, 16);
  Tensor x = zeros({1, 3, 8}), memory4 = zeros({1, 4, 8});
  check_throws_with([&] { block.forward(x, memory4, Tensor(), Tensor(), positions({0})); },
                    "[DecoderBlock] tgt_positions must be int64 (3)");
}
