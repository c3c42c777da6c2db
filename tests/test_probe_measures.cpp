// train/instruments/probe.h's aimed measures: mass at a chosen δ (or range) over a query filter against
// a brute-force sum of the recorded weights, the task's query mask, the curves as CSV / JSON, two
// checkpoints compared, option errors, and run_probe end to end on two tiny trained checkpoints.
#include <cmath>
#include <filesystem>
#include <sstream>

#include "file_testing.h"
#include "layers/relative_bias.h"
#include "testing.h"
#include "train/instruments/probe.h"
#include "train/trainer/run.h"
#include "trainer_testing.h"

using namespace relgrad;
using relgrad::testing::TempDir;

namespace {

constexpr int64_t C = 8, H = 2;

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

EncoderDecoderModel ed_model(const TransformerConfig& c, uint64_t seed = 7) {
  Generator g(seed);
  EncoderDecoderModel m(std::make_shared<EncoderDecoder>(c, &g));
  m.module->to(kFloat64);
  return m;
}

// (B, max len) tokens in [3, 12), PAD on the right, and the padding mask.
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

// The definition, summed straight from the record: per head, the weight on keys π(i) + δ (δ in the
// range) of the counted queries that have at least one such visible key, over their number.
std::vector<double> brute_mass(const AttentionRecord& rec, DeltaRange d, int64_t lo, int64_t hi,
                               const std::vector<bool>& mask) {
  const int64_t B = rec.weights.size(0), Hh = rec.weights.size(1), t2 = rec.weights.size(2),
                t1 = rec.weights.size(3);
  std::vector<double> sum(static_cast<size_t>(Hh), 0.0);
  double n = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = lo; i < hi; ++i) {
      if (!rec.query_valid[b * t2 + i] || (!mask.empty() && !mask[b * t2 + i])) continue;
      bool any = false;
      std::vector<double> row(static_cast<size_t>(Hh), 0.0);
      for (int64_t j = 0; j < t1; ++j) {
        const int64_t delta = j - rec.positions[i];
        if (delta < d.from || delta > d.to || !rec.key_valid[b * t1 + j] ||
            (rec.causal && j > rec.positions[i]))
          continue;
        any = true;
        for (int64_t h = 0; h < Hh; ++h)
          row[h] += rec.weights.select(0, b).select(0, h).select(0, i).select(0, j).item();
      }
      if (!any) continue;
      n += 1;
      for (int64_t h = 0; h < Hh; ++h) sum[h] += row[h];
    }
  for (double& s : sum) s = n > 0 ? s / n : NAN;
  return sum;
}

}  // namespace

TEST_CASE("probe measures: mass at a delta (or range) over a query filter matches the brute-force sum") {
  EncoderDecoderModel m = ed_model(tiny("seed", "t5", "shaw"));
  Batch batch = ed_batch({6, 4}, {5, 3});
  std::vector<AttentionRecord> records = record_attention(m, batch);
  REQUIRE(records.size() == 3);
  std::vector<bool> mask(2 * 5, true);  // decoder queries (B 2, t2 5): drop (0, 1) and (1, 0)
  mask[1] = false;
  mask[5] = false;
  for (DeltaRange d : {DeltaRange{-2, -2}, DeltaRange{-3, -1}, DeltaRange{1, 2}, DeltaRange{0, 0}}) {
    for (const std::string range : {"", "1:", ":-2", "2:4"}) {
      std::vector<HeadMass> got = mass_at_delta(records, d, QueryFilter{range, {}});
      REQUIRE(got.size() == 3 * H);
      for (size_t r = 0; r < records.size(); ++r) {
        const int64_t t2 = records[r].weights.size(2);
        int64_t lo = 0, hi = t2;
        if (range == "1:") lo = 1;
        if (range == ":-2") hi = t2 - 2;
        if (range == "2:4") lo = 2, hi = std::min<int64_t>(4, t2);
        std::vector<double> want = brute_mass(records[r], d, lo, hi, {});
        for (int64_t h = 0; h < H; ++h) {
          const HeadMass& g = got[r * H + h];
          INFO(records[r].layer << " head " << h << " delta " << d.from << ":" << d.to << " range '" << range
                                << "'");
          CHECK(g.layer == records[r].layer);
          CHECK(g.head == h);
          if (std::isnan(want[h]))
            CHECK(std::isnan(g.mass));
          else
            CHECK(std::fabs(g.mass - want[h]) < 1e-12);
        }
      }
    }
    // A mask: only the decoder attentions (t2 = 5) take it; the encoder's (t2 = 6) are skipped.
    std::vector<HeadMass> masked = mass_at_delta(records, d, QueryFilter{"", mask});
    REQUIRE(masked.size() == 2 * H);
    for (size_t r = 1; r < 3; ++r) {
      std::vector<double> want = brute_mass(records[r], d, 0, 5, mask);
      for (int64_t h = 0; h < H; ++h) {
        if (std::isnan(want[h]))
          CHECK(std::isnan(masked[(r - 1) * H + h].mass));
        else
          CHECK(std::fabs(masked[(r - 1) * H + h].mass - want[h]) < 1e-12);
      }
    }
  }
  // One δ: the probe's attention-mass curve counts every query, mass_at_delta only those with the key,
  // so mass_at_delta · N_with_key = curve · N_all.
  std::vector<ProbeCurve> curves = attention_mass_by_offset(records, 0);
  std::vector<HeadMass> at = mass_at_delta(records, DeltaRange{-1, -1});
  const double n_all_encoder = 6 + 4, n_with_key = 5 + 3;  // encoder self: queries i ≥ 1 of each row
  CHECK(at[0].queries == 8);
  CHECK(std::fabs(at[0].mass * n_with_key - mass_at(curves[0], -1) * n_all_encoder) < 1e-12);
  CHECK_THROWS_AS(mass_at_delta(records, DeltaRange{0, 0}, QueryFilter{"", std::vector<bool>(7, true)}),
                  ShapeError);
  CHECK(mass_table(at).find("encoder.layers.0.self_attn") != std::string::npos);
}

TEST_CASE(
    "probe measures: a T5 bias forced to one offset has all the mass of the queries that can look there") {
  EncoderDecoderModel m = ed_model(tiny("t5", "none", "none"));
  auto& attn = *m.network->encoder->layers->items[0]->self_attn;
  NoGradGuard no_grad;
  for (Linear* p : {attn.q_proj.get(), attn.k_proj.get()}) p->weight.copy_(zeros_like(p->weight));
  std::vector<double> t(2 * 32, 0.0);
  t[0 * 32 + 2] = 60.0;  // head 0: δ = −2
  dynamic_cast<T5RelativeBias&>(*attn.positional).table.copy_(from_vector<double>(t, {2, 32}));
  std::vector<AttentionRecord> records = record_attention(m, ed_batch({7, 5}, {2, 2}));
  std::vector<HeadMass> at = mass_at_delta(records, DeltaRange{-2, -2});
  CHECK(at[0].mass > 0.999);  // the probe's curve says 8/12 here: it also counts queries 0 and 1
  CHECK(at[0].queries == 8);
  CHECK(at[1].mass < 0.5);
  CHECK(mass_at_delta(records, DeltaRange{-2, -2}, QueryFilter{"0:2", {}})[0].queries == 0);
  CHECK(std::isnan(mass_at_delta(records, DeltaRange{-2, -2}, QueryFilter{"0:2", {}})[0].mass));
}

TEST_CASE("probe measures: the task's query mask, parsing of --delta and --queries") {
  Batch b;
  b.tgt_out = from_vector<int64_t>({5, 13, kIgnoreIndex, kEos, 3, 12}, {2, 3});
  CHECK(needed_query_mask(b, 13) == std::vector<bool>{true, false, false, false, true, true});
  CHECK(needed_query_mask(b) == std::vector<bool>{true, true, false, true, true, true});
  CHECK(parse_delta_range("-5").from == -5);
  CHECK(parse_delta_range("-5").to == -5);
  CHECK(parse_delta_range("-7:-5").from == -7);
  CHECK(parse_delta_range("+2").to == 2);
  for (const char* bad : {"", "x", "-3:-5", "1:", "1:2:3", "--1", "5.0"})
    CHECK_THROWS_AS(parse_delta_range(bad), InstrumentOptionError);
  for (const char* ok : {"", "5:", ":10", "3:8", "-3:", ":"}) CHECK_NOTHROW(check_query_range(ok));
  for (const char* bad : {"5", "a:b", "1:2:3", "1.5:"})
    CHECK_THROWS_AS(check_query_range(bad), InstrumentOptionError);
}

TEST_CASE("probe measures: the curves as CSV and JSON hold every value, NaN empty or null") {
  ProbeCurve r{"decoder.layers.0.self_attn",
               "decoder_self",
               "t5",
               "response",
               1,
               {-1, 0, 1},
               {0.25, -1.5, NAN},
               0.0,
               {"decoder.layers.0.self_attn", "decoder.layers.1.self_attn"}};
  ProbeCurve m{"decoder.layers.0.cross_attn",
               "cross",
               "none",
               "attention_mass",
               0,
               {-1, 0, 1},
               {0.5, 0.25, 0.125},
               0.125,
               {"decoder.layers.0.cross_attn"}};
  const std::string csv = probe_csv({r, m});
  std::istringstream in(csv);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  REQUIRE(lines.size() == 1 + 3 + 4);
  CHECK(lines[0] == "layer,place,scheme,kind,head,delta,value");
  CHECK(lines[1] == "decoder.layers.0.self_attn,decoder_self,t5,response,1,-1,0.25");
  CHECK(lines[2] == "decoder.layers.0.self_attn,decoder_self,t5,response,1,0,-1.5");
  CHECK(lines[3] == "decoder.layers.0.self_attn,decoder_self,t5,response,1,1,");
  CHECK(lines[7] == "decoder.layers.0.cross_attn,cross,none,attention_mass,0,outside,0.125");
  const std::string json = probe_json({r, m});
  CHECK(json.find("\"value\": [0.25, -1.5, null]") != std::string::npos);
  CHECK(json.find("\"shared_by\": [\"decoder.layers.0.self_attn\", \"decoder.layers.1.self_attn\"]") !=
        std::string::npos);
  CHECK(json.find("\"outside\": 0.125") != std::string::npos);
  CHECK(json.rfind("{\"curves\": [", 0) == 0);
  TempDir dir;
  write_probe_csv({r}, dir.file("c.csv"));
  write_probe_json({r}, dir.file("c.json"));
  CHECK(relgrad::testing::read_bytes(dir.file("c.csv")) == probe_csv({r}));
  CHECK(relgrad::testing::read_bytes(dir.file("c.json")) == probe_json({r}));
}

TEST_CASE("probe measures: two models compared — zero against itself, the table change where it was made") {
  EncoderDecoderModel a = ed_model(tiny("t5", "none", "seed")), b = ed_model(tiny("t5", "none", "seed"));
  auto& table =
      dynamic_cast<T5RelativeBias&>(*b.network->encoder->layers->items[0]->self_attn->positional)
          .table;
  {
    NoGradGuard no_grad;
    std::vector<double> t = table.contiguous().to_vector<double>();
    t[1 * 32 + 3] += 0.75;  // head 1, bucket 3 = δ = −3 (bidirectional: the past half, exact)
    table.copy_(from_vector<double>(t, table.shape()));
  }
  Batch batch = ed_batch({6, 4}, {5, 3});
  std::vector<AttentionRecord> ra = record_attention(a, batch), rb = record_attention(b, batch);
  const std::vector<DeltaRange> deltas = {{-1, -1}, {-3, -2}};
  std::vector<HeadComparison> same = compare_probes(ra, record_attention(a, batch), deltas);
  REQUIRE(same.size() == 3 * H);
  for (const HeadComparison& c : same) {
    if (c.has_response) CHECK(c.max_abs_diff == 0.0);
    REQUIRE(c.mass_a.size() == 2);
    CHECK(c.mass_a == c.mass_b);
  }
  std::vector<HeadComparison> rows = compare_probes(ra, rb, deltas);
  const HeadComparison& h1 = rows[1];  // encoder head 1
  REQUIRE(h1.layer == "encoder.layers.0.self_attn");
  REQUIRE(h1.has_response);
  CHECK(std::fabs(h1.max_abs_diff - 0.75) < 1e-12);
  CHECK(h1.max_abs_diff_at == -3);
  for (size_t k = 0; k < h1.delta.size(); ++k)
    if (h1.delta[k] != -3) CHECK(h1.response_diff[k] == 0.0);
  CHECK(rows[0].max_abs_diff == 0.0);  // head 0 untouched
  std::vector<HeadMass> mb = mass_at_delta(rb, deltas[1]);
  CHECK(h1.mass_b[1] == mb[1].mass);
  CHECK(h1.mass_b[1] > h1.mass_a[1]);  // a larger bias at δ = −3 draws attention there
  CHECK(rows[2].scheme == "none");
  CHECK_FALSE(rows[2].has_response);
  CHECK(comparison_table(rows).find("0.75") != std::string::npos);
  const std::string csv = comparison_csv(rows);
  CHECK(csv.find("encoder.layers.0.self_attn,encoder_self,t5,1,-3,0.75") != std::string::npos);
  CHECK(csv.find("layer,place,scheme,head,mass_from,mass_to,mass_a,mass_b") != std::string::npos);
  EncoderDecoderModel other = ed_model(tiny("t5", "none", "shaw"));
  CHECK_THROWS_AS(compare_probes(ra, record_attention(other, batch), deltas), Error);
}

TEST_CASE(
    "probe measures: run_probe prints the probe table, then masses and a comparison, and writes the data") {
  TempDir dir;
  std::string ck[2];
  for (int n = 0; n < 2; ++n) {
    RunConfig c = relgrad::testing::tiny_ed(dir.file("run" + std::to_string(n)));
    c.train.steps = 3;
    c.train.seed = 1 + n;
    std::ostringstream quiet;
    Trainer trainer(trainer_options(c), &quiet);
    trainer.train();
    ck[n] = dir.file("run" + std::to_string(n) + "/checkpoint.safetensors");
    REQUIRE(std::filesystem::exists(ck[n]));
  }
  ProbeOptions o;
  o.checkpoint = ck[0];
  o.out_dir = dir.file("p");
  o.deltas = {"-1", "-2:-1"};
  o.queries = "needed";
  o.compare_checkpoint = ck[1];
  std::ostringstream out;
  REQUIRE(run_probe(o, out) == 0);
  const std::string text = out.str();
  INFO(text);
  CHECK(text.rfind("probe of " + ck[0] + " (step 3) on held-out batch 0\n", 0) == 0);
  CHECK(text.find("pictures to " + dir.file("p")) != std::string::npos);
  CHECK(text.find("attention mass at delta -1 over the queries that need a source token") !=
        std::string::npos);
  CHECK(text.find("attention mass at delta -2:-1") != std::string::npos);
  CHECK(text.find("comparison: A = " + ck[0] + ", B = " + ck[1]) != std::string::npos);
  for (const char* f : {"p/curves.csv", "p/curves.json", "p/compare.csv"})
    CHECK(std::filesystem::exists(dir.file(f)));
  CHECK(relgrad::testing::read_bytes(dir.file("p/curves.csv"))
            .rfind("layer,place,scheme,kind,head,delta,value\n", 0) == 0);
  // Errors: the reach beyond the model, a bad --delta (before loading), a --delta beyond the reach.
  ProbeOptions far = o;
  far.reach = 100000;
  CHECK_THROWS_WITH_AS(run_probe(far, out), doctest::Contains("[probe] --reach 100000 is beyond any offset"),
                       InstrumentOptionError);
  ProbeOptions bad = o;
  bad.deltas = {"x"};
  bad.checkpoint = dir.file("missing.safetensors");
  CHECK_THROWS_AS(run_probe(bad, out), InstrumentOptionError);
  ProbeOptions beyond = o;
  beyond.reach = 2;
  beyond.deltas = {"-5"};
  CHECK_THROWS_WITH_AS(run_probe(beyond, out), doctest::Contains("beyond the probe's reach 2"),
                       InstrumentOptionError);
}
