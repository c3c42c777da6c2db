// train/instruments/probe.h: positional responses against brute-force formulas (float64), attention mass by
// offset (sums, padding, forced offsets, cross-attention alignment), the table and the pictures.
// Tiny models (d_model 8, 2 heads of 4) whose tables and projections are set by hand.
#include <cmath>
#include <filesystem>

#include "file_testing.h"
#include "layers/relative_bias.h"
#include "layers/relative_learned.h"
#include "layers/rotary.h"
#include "layers/transformer_xl.h"
#include "testing.h"
#include "train/instruments/probe.h"
#include "train/trainer/run.h"

using namespace relgrad;
using relgrad::testing::TempDir;

namespace {

constexpr int64_t C = 8, H = 2, D = 4;

TransformerConfig tiny(const std::string& enc, const std::string& dec, const std::string& cross) {
  TransformerConfig c;
  c.vocab_size = 12;
  c.d_model = C;
  c.n_heads = H;
  c.d_ff = 16;
  c.n_encoder_layers = 1;
  c.n_decoder_layers = 1;
  c.dropout = 0.0;
  c.encoder_self.scheme = enc;
  c.decoder_self.scheme = dec;
  c.cross.scheme = cross;
  return c;
}

EncoderDecoderModel ed_model(const TransformerConfig& c) {
  Generator g(7);
  EncoderDecoderModel m(std::make_shared<EncoderDecoder>(c, &g));
  m.module->to(kFloat64);
  return m;
}

DecoderOnlyModel lm_model(const TransformerConfig& c) {
  Generator g(7);
  DecoderOnlyModel m(std::make_shared<DecoderLM>(c, &g));
  m.module->to(kFloat64);
  return m;
}

// (B, max len) tokens in [3, 12) with PAD on the right, and the bool padding mask.
std::pair<Tensor, Tensor> tokens(const std::vector<int64_t>& lengths, uint64_t seed) {
  int64_t T = *std::max_element(lengths.begin(), lengths.end()), B = static_cast<int64_t>(lengths.size());
  std::vector<int64_t> ids(static_cast<size_t>(B * T), kPad);
  std::vector<bool> pad(ids.size(), true);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t) {
      ids[b * T + t] = 3 + static_cast<int64_t>((seed * 7919 + b * 31 + t * 17 + t * t) % 9);
      pad[b * T + t] = false;
    }
  return {from_vector<int64_t>(ids, {B, T}), from_vector<bool>(pad, {B, T})};
}

Batch ed_batch(const std::vector<int64_t>& src_len, const std::vector<int64_t>& tgt_len) {
  Batch b;
  std::tie(b.src, b.src_padding_mask) = tokens(src_len, 1);
  std::tie(b.tgt_in, b.tgt_padding_mask) = tokens(tgt_len, 2);
  return b;
}

Batch lm_batch(const std::vector<int64_t>& len) {
  Batch b;
  std::tie(b.tokens, b.padding_mask) = tokens(len, 3);
  return b;
}

void set(Tensor t, const std::vector<double>& v) {
  NoGradGuard no_grad;
  t.copy_(from_vector<double>(v, t.shape()));
}
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// q_i = bias for every token: the projection's weight zero, its bias `b` (C values, head h = b[hD .. hD+D)).
void constant(Linear& proj, const std::vector<double>& b) {
  set(proj.weight, std::vector<double>(static_cast<size_t>(C * C), 0.0));
  set(proj.bias, b);
}

std::vector<ProbeCurve> select(const std::vector<ProbeCurve>& all, const std::string& layer, const std::string& kind) {
  std::vector<ProbeCurve> out;
  for (const auto& c : all)
    if (c.layer == layer && c.kind == kind) out.push_back(c);
  return out;
}

const std::vector<double> kQ = {0.7, -0.4, 1.1, 0.3, -0.9, 0.5, 0.2, 1.3};
const std::vector<double> kK = {0.2, 0.9, -0.6, 0.4, 1.0, -0.3, 0.8, 0.1};

}  // namespace

TEST_CASE("probe: T5 response is the bucket's bias, once per shared stack, masked future in causal layers") {
  TransformerConfig c = tiny("t5", "t5", "none");
  c.n_encoder_layers = 2;
  EncoderDecoderModel m = ed_model(c);
  auto& enc = dynamic_cast<T5RelativeBias&>(*m.network->encoder->layers->items[0]->self_attn->positional);
  auto& dec = dynamic_cast<T5RelativeBias&>(*m.network->decoder->layers->items[0]->self_attn->positional);
  std::vector<double> te(2 * 32), td(2 * 32);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t b = 0; b < 32; ++b) te[h * 32 + b] = 0.1 * b - 0.03 * h * b, td[h * 32 + b] = std::sin(1.0 + b + 5 * h);
  te[0 * 32 + 3] = 5.0;   // head 0: δ = −3 (bidirectional: exact bucket 3)
  te[1 * 32 + 19] = 4.0;  // head 1: δ = +3 (upper half: 16 + 3)
  set(enc.table, te);
  set(dec.table, td);
  auto curves = positional_response(m, ed_batch({6, 4}, {5, 3}), 10);
  auto e0 = select(curves, "encoder.layers.0.self_attn", "response");
  REQUIRE(e0.size() == 2);
  CHECK(select(curves, "encoder.layers.1.self_attn", "response").empty());  // the shared table: once
  CHECK(e0[0].shared_by == std::vector<std::string>{"encoder.layers.0.self_attn", "encoder.layers.1.self_attn"});
  CHECK(e0[0].scheme == "t5");
  CHECK(e0[0].delta.front() == -10);
  CHECK(e0[0].delta.back() == 10);
  for (int h = 0; h < 2; ++h)
    for (int64_t d = -10; d <= 10; ++d) {
      CHECK(value_at(e0[h], d) == te[h * 32 + t5_relative_bucket(d, true, 32, 128)]);
      if (std::abs(d) < 8) CHECK(value_at(e0[h], d) == te[h * 32 + (d <= 0 ? -d : 16 + d)]);  // exact buckets
    }
  CHECK(peak_offset(e0[0]) == -3);
  CHECK(peak_offset(e0[1]) == 3);
  auto d0 = select(curves, "decoder.layers.0.self_attn", "response");
  REQUIRE(d0.size() == 2);
  for (int h = 0; h < 2; ++h)
    for (int64_t d = -10; d <= 10; ++d) {
      if (d > 0) CHECK(std::isnan(value_at(d0[h], d)));
      else CHECK(value_at(d0[h], d) == td[h * 32 - d]);  // causal: bucket = −δ for −δ < 16
    }
}

TEST_CASE("probe: learned tables (seed, huang, shaw) give (1/sqrt D) q.e_delta with their out-of-range policy") {
  TransformerConfig c = tiny("seed", "huang", "shaw");
  c.encoder_self.max_length = 4;  // rows δ ∈ [−3, 3], Zero beyond
  c.encoder_self.per_head = true;
  c.decoder_self.max_length = 3;  // rows δ ∈ [−2, 0]
  c.cross.clip = 2;               // rows δ ∈ [−2, 2], clipped
  EncoderDecoderModel m = ed_model(c);
  auto& eb = *m.network->encoder->layers->items[0];
  auto& db = *m.network->decoder->layers->items[0];
  for (Linear* p : {eb.self_attn->q_proj.get(), db.self_attn->q_proj.get(), db.cross_attn->q_proj.get()}) constant(*p, kQ);
  auto& seed = dynamic_cast<SeedRelativeEmbedding&>(*eb.self_attn->positional);
  auto& huang = dynamic_cast<HuangRelativeEmbedding&>(*db.self_attn->positional);
  auto& shaw = dynamic_cast<ShawRelativeEmbedding&>(*db.cross_attn->positional);
  std::vector<double> es = values(seed.table);  // (H, 7, D)
  for (int64_t d = 0; d < D; ++d) es[(0 * 7 + 1) * D + d] = 3.0 * kQ[d];  // head 0, δ = −2 (row 1): along q
  set(seed.table, es);
  auto curves = positional_response(m, ed_batch({6, 4}, {5, 3}), 6);
  const double s = 1.0 / std::sqrt(double(D));
  auto dot = [&](const std::vector<double>& e, int64_t h, int64_t row) {
    double x = 0;
    for (int64_t d = 0; d < D; ++d) x += kQ[h * D + d] * e[row * D + d];
    return x * s;
  };
  auto sc = select(curves, "encoder.layers.0.self_attn", "response");
  REQUIRE(sc.size() == 2);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t delta = -6; delta <= 6; ++delta) {
      std::vector<double> eh(es.begin() + h * 7 * D, es.begin() + (h + 1) * 7 * D);
      double want = std::abs(delta) <= 3 ? dot(eh, h, delta + 3) : 0.0;
      CHECK(std::fabs(value_at(sc[h], delta) - want) < 1e-12);
    }
  CHECK(peak_offset(sc[0]) == -2);
  std::vector<double> eh = values(huang.table);  // (3, D), shared
  auto hc = select(curves, "decoder.layers.0.self_attn", "response");
  REQUIRE(hc.size() == 2);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t delta = -6; delta <= 6; ++delta) {
      if (delta > 0) { CHECK(std::isnan(value_at(hc[h], delta))); continue; }
      double want = delta >= -2 ? dot(eh, h, delta + 2) : 0.0;
      CHECK(std::fabs(value_at(hc[h], delta) - want) < 1e-12);
    }
  std::vector<double> ek = values(shaw.key_table);  // (5, D), shared
  auto wc = select(curves, "decoder.layers.0.cross_attn", "response");
  REQUIRE(wc.size() == 2);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t delta = -6; delta <= 6; ++delta)
      CHECK(std::fabs(value_at(wc[h], delta) - dot(ek, h, std::clamp<int64_t>(delta, -2, 2) + 2)) < 1e-12);

  // The Error policy: beyond the table the model would refuse, so no value.
  c.encoder_self.out_of_range = OutOfRange::Error;
  c.encoder_self.max_length = 7;
  EncoderDecoderModel me = ed_model(c);
  auto ec = select(positional_response(me, ed_batch({6, 4}, {5, 3}), 8), "encoder.layers.0.self_attn", "response");
  CHECK(std::isfinite(value_at(ec[0], -6)));
  CHECK(std::isnan(value_at(ec[0], -7)));
  CHECK(std::isnan(value_at(ec[1], 8)));
}

TEST_CASE("probe: the mean query excludes padding (response of a padded batch = query-weighted row responses)") {
  EncoderDecoderModel m = ed_model(tiny("seed", "none", "none"));
  Batch b = ed_batch({6, 4}, {2, 2});
  auto row = [&](int64_t r, int64_t n) {  // row r alone, unpadded: the same tokens
    Batch one;
    one.src = b.src.narrow(0, r, 1).narrow(1, 0, n).contiguous();
    one.tgt_in = b.tgt_in.narrow(0, r, 1).contiguous();
    return select(positional_response(m, one, 5), "encoder.layers.0.self_attn", "response");
  };
  auto both = select(positional_response(m, b, 5), "encoder.layers.0.self_attn", "response");
  auto r0 = row(0, 6), r1 = row(1, 4);
  REQUIRE(both.size() == 2);
  for (int h = 0; h < 2; ++h)
    for (int64_t d = -5; d <= 5; ++d)
      CHECK(std::fabs(value_at(both[h], d) - (6 * value_at(r0[h], d) + 4 * value_at(r1[h], d)) / 10) < 1e-12);
}

TEST_CASE("probe: Transformer-XL response is (q + v).(W_r R_{p = -delta}) / sqrt D, future masked") {
  TransformerConfig c = tiny("none", "transformer_xl", "none");
  DecoderOnlyModel m = lm_model(c);
  auto& attn = *m.network->layers->items[0]->self_attn;
  constant(*attn.q_proj, kQ);
  auto& txl = dynamic_cast<TransformerXL&>(*attn.positional);
  std::vector<double> W = values(txl.r_proj->weight), v = values(txl.v);  // (C, C), (H, D)
  auto curves = positional_response(m, lm_batch({5, 3}), 6);
  REQUIRE(curves.size() == 2);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t delta = -6; delta <= 6; ++delta) {
      if (delta > 0) { CHECK(std::isnan(value_at(curves[h], delta))); continue; }
      std::vector<double> R(C);
      const double p = static_cast<double>(-delta);
      for (int64_t k = 0; k < C / 2; ++k) {
        const double w = std::pow(10000.0, -2.0 * k / C);
        R[k] = std::sin(p * w), R[C / 2 + k] = std::cos(p * w);
      }
      double want = 0;
      for (int64_t d = 0; d < D; ++d) {
        double r = 0;
        for (int64_t x = 0; x < C; ++x) r += W[(h * D + d) * C + x] * R[x];
        want += (kQ[h * D + d] + v[h * D + d]) * r;
      }
      CHECK(std::fabs(value_at(curves[h], delta) - want / std::sqrt(double(D))) < 1e-12);
    }
}

TEST_CASE("probe: ALiBi response is -slope |delta| (bidirectional) or slope delta (causal)") {
  EncoderDecoderModel m = ed_model(tiny("alibi", "alibi", "none"));
  auto curves = positional_response(m, ed_batch({4}, {3}), 5);
  auto e = select(curves, "encoder.layers.0.self_attn", "response");
  auto d = select(curves, "decoder.layers.0.self_attn", "response");
  REQUIRE((e.size() == 2 && d.size() == 2));
  const double slopes[2] = {std::exp2(-4.0), std::exp2(-8.0)};
  for (int h = 0; h < 2; ++h) {
    for (int64_t x = -5; x <= 5; ++x) {
      CHECK(value_at(e[h], x) == -slopes[h] * std::abs(x));
      if (x > 0) CHECK(std::isnan(value_at(d[h], x)));
      else CHECK(value_at(d[h], x) == slopes[h] * x);
    }
    CHECK(peak_offset(e[h]) == 0);
  }
}

TEST_CASE("probe: RoPE response is the measured mean logit by offset, NaN where the batch has no pair") {
  EncoderDecoderModel m = ed_model(tiny("rope", "none", "none"));
  auto& attn = *m.network->encoder->layers->items[0]->self_attn;
  constant(*attn.q_proj, kQ);
  constant(*attn.k_proj, kK);
  auto curves = select(positional_response(m, ed_batch({6, 4}, {2, 2}), 7), "encoder.layers.0.self_attn", "response");
  REQUIRE(curves.size() == 2);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t delta = -7; delta <= 7; ++delta) {
      if (std::abs(delta) > 5) { CHECK(std::isnan(value_at(curves[h], delta))); continue; }
      // q at i and k at j rotated: b·R(j − i)c per interleaved pair (2k, 2k+1), θ_k = 10000^(−2k/D).
      double want = 0;
      for (int64_t k = 0; k < D / 2; ++k) {
        const double a = delta * std::pow(10000.0, -2.0 * k / D);
        const double b0 = kQ[h * D + 2 * k], b1 = kQ[h * D + 2 * k + 1], c0 = kK[h * D + 2 * k], c1 = kK[h * D + 2 * k + 1];
        want += (b0 * c0 + b1 * c1) * std::cos(a) + (b1 * c0 - b0 * c1) * std::sin(a);
      }
      CHECK(std::fabs(value_at(curves[h], delta) - want / std::sqrt(double(D))) < 1e-12);
    }
  // Content-dependent q and k: the padded pair's mean is the pair-count-weighted mean of each row
  // alone (a row of n tokens has n − |δ| pairs at δ), so padded queries and keys are left out.
  EncoderDecoderModel r = ed_model(tiny("rope", "none", "none"));
  Batch b = ed_batch({6, 4}, {2, 2});
  auto row = [&](int64_t k, int64_t n) {
    Batch one;
    one.src = b.src.narrow(0, k, 1).narrow(1, 0, n).contiguous();
    one.tgt_in = b.tgt_in.narrow(0, k, 1).contiguous();
    return select(positional_response(r, one, 5), "encoder.layers.0.self_attn", "response");
  };
  auto both = select(positional_response(r, b, 5), "encoder.layers.0.self_attn", "response");
  auto r0 = row(0, 6), r1 = row(1, 4);
  for (int h = 0; h < 2; ++h)
    for (int64_t d = -5; d <= 5; ++d) {
      const double n0 = 6 - std::abs(d), n1 = std::max<double>(0, 4 - std::abs(d));
      const double want = (n0 * value_at(r0[h], d) + (n1 > 0 ? n1 * value_at(r1[h], d) : 0.0)) / (n0 + n1);
      CHECK(std::fabs(value_at(both[h], d) - want) < 1e-12);
    }
}

TEST_CASE("probe: attention mass sums to 1 per head and excludes padded queries and keys") {
  TransformerConfig c = tiny("seed", "t5", "shaw");
  EncoderDecoderModel m = ed_model(c);
  Batch both = ed_batch({6, 4}, {5, 3});
  for (int64_t R : {2, 0}) {  // 2: some mass beyond the range; 0: every offset of the batch
    auto curves = attention_mass_by_offset(m, both, R);
    REQUIRE(curves.size() == 3 * 2);
    for (const auto& cv : curves) {
      double sum = cv.outside;
      for (double v : cv.value) sum += v;
      CHECK(std::fabs(sum - 1.0) < 1e-12);
      if (R == 2 && cv.place != "cross") CHECK(cv.outside > 0);
      if (cv.place == "decoder_self")
        for (size_t n = 0; n < cv.delta.size(); ++n)
          if (cv.delta[n] > 0) CHECK(cv.value[n] == 0.0);
    }
  }
  // The padded pair against each row alone (same tokens, no padding), weighted by their queries.
  auto row = [&](int64_t b, int64_t n1, int64_t n2) {
    Batch one;
    one.src = both.src.narrow(0, b, 1).narrow(1, 0, n1).contiguous();
    one.tgt_in = both.tgt_in.narrow(0, b, 1).narrow(1, 0, n2).contiguous();
    return attention_mass_by_offset(m, one, 6);
  };
  auto p = attention_mass_by_offset(m, both, 6), r0 = row(0, 6, 5), r1 = row(1, 4, 3);
  for (size_t n = 0; n < p.size(); ++n) {
    const double w0 = p[n].place == "encoder_self" ? 6 : 5, w1 = p[n].place == "encoder_self" ? 4 : 3;
    for (int64_t d = -6; d <= 6; ++d)
      CHECK(std::fabs(mass_at(p[n], d) - (w0 * mass_at(r0[n], d) + w1 * mass_at(r1[n], d)) / (w0 + w1)) < 1e-12);
  }
  // DecoderLM, padded.
  DecoderOnlyModel lm = lm_model(tiny("none", "alibi", "none"));
  for (const auto& cv : attention_mass_by_offset(lm, lm_batch({5, 2}), 0)) {
    double sum = 0;
    for (double v : cv.value) sum += v;
    CHECK(std::fabs(sum - 1.0) < 1e-12);
    for (int64_t d = 1; d <= 4; ++d) CHECK(mass_at(cv, d) == 0.0);
  }
}

TEST_CASE("probe: a T5 bias forced to one offset puts the mass there (reachable queries only)") {
  EncoderDecoderModel m = ed_model(tiny("t5", "none", "none"));
  auto& attn = *m.network->encoder->layers->items[0]->self_attn;
  constant(*attn.q_proj, std::vector<double>(C, 0.0));
  constant(*attn.k_proj, std::vector<double>(C, 0.0));
  std::vector<double> t(2 * 32, 0.0);
  t[0 * 32 + 2] = 60.0;  // head 0: δ = −2
  t[1 * 32 + 0] = 60.0;  // head 1: δ = 0
  set(dynamic_cast<T5RelativeBias&>(*attn.positional).table, t);
  auto curves = probe(m, ed_batch({7, 5}, {2, 2}), 0);
  auto mass = select(curves, "encoder.layers.0.self_attn", "attention_mass");
  REQUIRE(mass.size() == 2);
  // δ = −2 exists for queries i ≥ 2: 5 of 7 in row 0, 3 of 5 in row 1 (its padded keys do not count).
  CHECK(std::fabs(mass_at(mass[0], -2) - 8.0 / 12.0) < 1e-12);
  CHECK(peak_offset(mass[0]) == -2);
  CHECK(mass_at(mass[1], 0) >= 0.99);
  CHECK(peak_offset(mass[1]) == 0);
  auto resp = select(curves, "encoder.layers.0.self_attn", "response");
  CHECK(peak_offset(resp[0]) == -2);
  std::string table = probe_table(curves);
  CHECK(table.find("encoder.layers.0.self_attn") != std::string::npos);
  CHECK(table.find("attention_mass") != std::string::npos);
}

TEST_CASE("probe: cross-attention offsets are measured from pi(i) of the block's alignment") {
  for (Alignment a : {Alignment::Left, Alignment::Scaled, Alignment::Right}) {
    TransformerConfig c = tiny("none", "none", "t5");
    c.cross_alignment = aligned_by(a);
    EncoderDecoderModel m = ed_model(c);
    auto& cross = *m.network->decoder->layers->items[0]->cross_attn;
    constant(*cross.q_proj, std::vector<double>(C, 0.0));
    constant(*cross.k_proj, std::vector<double>(C, 0.0));
    std::vector<double> t(2 * 32, 0.0);
    t[0 * 32 + 0] = 60.0;  // head 0: the key at π(i)
    t[1 * 32 + 1] = 60.0;  // head 1: the key before π(i)
    set(dynamic_cast<T5RelativeBias&>(*cross.positional).table, t);
    Batch b = ed_batch({8}, {4});  // t1 = 8 keys, t2 = 4 queries
    auto records = record_attention(m, b);
    REQUIRE(records.size() == 3);
    const auto& rec = records[2];
    CHECK(rec.layer == "decoder.layers.0.cross_attn");
    std::vector<int64_t> want = a == Alignment::Left ? std::vector<int64_t>{0, 1, 2, 3}
                                : a == Alignment::Scaled ? std::vector<int64_t>{0, 2, 4, 6}
                                                         : std::vector<int64_t>{4, 5, 6, 7};
    CHECK(rec.positions == want);
    auto mass = select(attention_mass_by_offset(records, 0), "decoder.layers.0.cross_attn", "attention_mass");
    REQUIRE(mass.size() == 2);
    CHECK(mass_at(mass[0], 0) >= 0.99);
    // δ = −1 needs π(i) ≥ 1: all but query 0 under Left and Scaled, all four under Right.
    CHECK(std::fabs(mass_at(mass[1], -1) - (a == Alignment::Right ? 1.0 : 0.75)) < 1e-9);
  }
}

TEST_CASE("probe: record_attention restores the model — helpers check their arguments") {
  EncoderDecoderModel m = ed_model(tiny("seed", "t5", "shaw"));
  m.module->train();
  auto* attn = m.network->encoder->layers->items[0]->self_attn.get();
  const PositionalScheme* before = attn->positional.get();
  int calls = 0;  // the caller's own hook: set aside while the probe's runs, then given back
  attn->forward_hook = [&calls](const AttentionCall&) { ++calls; };
  auto records = record_attention(m, ed_batch({3}, {2}));
  CHECK(m.module->is_training());
  CHECK(attn->positional.get() == before);
  REQUIRE(attn->forward_hook);
  CHECK(calls == 0);
  attn->forward_hook = nullptr;
  CHECK_FALSE(m.network->decoder->layers->items[0]->cross_attn->forward_hook);  // none left behind
  CHECK(records[0].positional == before);
  CHECK(records[0].q.shape() == Shape{1, H, 3, D});
  CHECK(records[0].weights.shape() == Shape{1, H, 3, 3});
  ProbeCurve empty{"x", "encoder_self", "none", "attention_mass", 0, {-1, 0, 1}, {NAN, NAN, NAN}, 0.0, {"x"}};
  relgrad::testing::check_throws_with([&] { peak_offset(empty); }, "no finite value");
  relgrad::testing::check_throws_with([&] { value_at(empty, 2); }, "has no");
  relgrad::testing::check_throws_with([&] { record_attention(m, lm_batch({3})); }, "encoder-decoder batch");
}

TEST_CASE("probe: pictures are written, one heatmap PNG and one curve SVG per layer and kind") {
  TempDir dir;
  EncoderDecoderModel m = ed_model(tiny("t5", "seed", "none"));
  auto curves = probe(m, ed_batch({5, 3}, {4, 2}), 6);
  auto paths = write_probe_pictures(curves, dir.file("pictures"));
  // responses: encoder (t5), decoder self (seed); masses: three attentions.
  REQUIRE(paths.size() == 2 * 5);
  CHECK(paths[0] == dir.file("pictures/encoder.layers.0.self_attn.response.heatmap.png"));
  for (const auto& p : paths) {
    std::string bytes = relgrad::testing::read_bytes(p);
    if (p.size() > 4 && p.substr(p.size() - 4) == ".png") {
      REQUIRE(bytes.size() > 33);
      CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
      CHECK(bytes.substr(12, 4) == "IHDR");
      auto u32 = [&](size_t o) {
        return (uint32_t(uint8_t(bytes[o])) << 24) | (uint32_t(uint8_t(bytes[o + 1])) << 16) |
               (uint32_t(uint8_t(bytes[o + 2])) << 8) | uint32_t(uint8_t(bytes[o + 3]));
      };
      const uint32_t w = u32(16), h = u32(20);
      CHECK((w >= 300 && w <= 2000 && h >= 150 && h <= 1000));
      // Compressed (libpng): a heatmap of flat cells is far smaller than its raw pixels.
      CHECK(bytes.size() < size_t(w) * h * 3 / 10);
    } else {
      CHECK(bytes.find("<svg") != std::string::npos);
      CHECK(bytes.find("head 1") != std::string::npos);
    }
  }
}
