// The verification experiments (train/instruments/experiments.h) in their CI form: each trains small models for a
// few hundred steps and asserts what the learned relative positions must show (docs/experiments.md
// states each expectation). Fixed seeds, no dropout: the runs are deterministic (seed 1 here). The thresholds were
// checked on seeds 1–5 (D1, D6), 1–4 (D3) and 1–8 (D2); the ranges are in the comments.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "train/instruments/experiments.h"

using namespace relgrad;
using relgrad::testing::TempDir;

namespace {

const ProbedRun& run_named(const std::vector<ProbedRun>& runs, const std::string& label) {
  auto it = std::find_if(runs.begin(), runs.end(), [&](const ProbedRun& r) { return r.label == label; });
  REQUIRE_MESSAGE(it != runs.end(), "no run labelled '" << label << "'");
  return *it;
}

const ExtrapolationRow& row_named(const ExtrapolationResult& r, const std::string& scheme) {
  auto it = std::find_if(r.rows.begin(), r.rows.end(), [&](const ExtrapolationRow& x) { return x.scheme == scheme; });
  REQUIRE_MESSAGE(it != r.rows.end(), "no row for '" << scheme << "'");
  return *it;
}

// A run finds its offset: one head with ≥ 0.9 of its attention on the needed key, and that head's
// positional response peaks at δ* alone (not on a plateau of clipped offsets).
void check_finds(const ProbedRun& r) {
  INFO(r.label << ": mass " << r.mass_expected << " at " << r.expected << ", response peak " << r.response_peak
                << " (plateau " << r.response_plateau << "), mass peak " << r.mass_peak << ", accuracy " << r.accuracy);
  CHECK(r.mass_expected >= 0.9);
  CHECK(r.mass_peak == r.expected);
  CHECK(r.response_peak == r.expected);
  CHECK(r.response_plateau == 1);
}

}  // namespace

// Seeds 1–5: t5 mass 0.948 0.955 0.963 0.958 0.923; seed ≥ 0.954; shaw clip 4 ≥ 0.997 and copy
// accuracy 1. Shaw clip 3 (= k): mass 0.48–0.61, response flat over −5 … −3, copy accuracy 0.75–0.84;
// clip 2: mass ≤ 0.32, response flat over −5 … −2, copy accuracy 0.19–0.44.
TEST_CASE("experiment D1 shift-copy: T5, seed and Shaw clip > k find δ = −k in cross-attention — Shaw clip ≤ k cannot") {
  ShiftResult r = experiment_shift(ExperimentScale{});
  REQUIRE(r.lag == 3);
  REQUIRE(r.runs.size() == 5);
  for (const char* label : {"t5", "seed", "shaw clip 4 (k + 1)"}) {
    const ProbedRun& run = run_named(r.runs, label);
    CHECK(run.place == "cross");
    check_finds(run);
    CHECK(run.subset_accuracy >= 0.95);  // the copied symbols
  }
  // Clip ≤ k: every δ ≤ −clip reads the edge row, so no head can single out δ = −k. (With clip = k the
  // heads together, with content, can still copy: 75–84 % here, 100 % in the full form with 4 heads;
  // with clip = k − 1 the copy fails.)
  const ProbedRun& clip_k1 = run_named(r.runs, "shaw clip 4 (k + 1)");
  for (const char* label : {"shaw clip 3 (k)", "shaw clip 2 (k − 1)"}) {
    const ProbedRun& run = run_named(r.runs, label);
    INFO(run.label << ": mass " << run.mass_expected << ", response peak " << run.response_peak << " (plateau "
                   << run.response_plateau << "), copy accuracy " << run.subset_accuracy);
    CHECK(run.mass_expected < 0.75);
    CHECK_FALSE((run.response_peak == -3 && run.response_plateau == 1));  // δ = −3 shares its row with −4, −5
  }
  const ProbedRun& below = run_named(r.runs, "shaw clip 2 (k − 1)");
  CHECK(below.subset_accuracy < 0.6);
  CHECK(below.subset_accuracy < clip_k1.subset_accuracy - 0.3);
}

// Seeds 1–8: the response and mass peaks of T5 and seed at −4 every time; seed's mass 0.897–0.997,
// T5's 0.72–0.98 (the rest sits on the further repeats, δ = −9, −14, which hold the same symbol).
TEST_CASE("experiment D2 periodic repetition: the decoder's response peaks at the period (δ = 1 − P from the query)") {
  PeriodicResult r = experiment_periodic(ExperimentScale{});
  REQUIRE(r.period == 5);
  REQUIRE(r.runs.size() == 2);
  for (const ProbedRun& run : r.runs) {
    INFO(run.label << ": accuracy " << run.accuracy << ", mass " << run.mass_expected << ", response peak "
                   << run.response_peak << ", mass peak " << run.mass_peak);
    CHECK(run.place == "decoder_self");
    CHECK(run.expected == -4);
    CHECK(run.accuracy >= 0.95);
    CHECK(run.response_peak == -4);
    CHECK(run.response_plateau == 1);
    CHECK(run.mass_peak == -4);
  }
  CHECK(run_named(r.runs, "seed").mass_expected >= 0.85);
}

// Seeds 1–4, accuracy at 16 / 64: seed, huang, shaw, transformer_xl 1 / 1; t5 1 / 0.90–0.998;
// rope 1 / 0.56–0.66; none and alibi 0.36–0.42 at every length (the bag of symbols, chance 0.1).
TEST_CASE("experiment D3 length extrapolation: every scheme trains — RoPE degrades at 4× the training length, the tables do not") {
  ExtrapolationResult r = experiment_extrapolation(ExperimentScale{});
  REQUIRE(r.train_length == 16);
  REQUIRE(r.eval_lengths == std::vector<int64_t>{16, 32, 64});
  REQUIRE(r.rows.size() == 8);
  for (const ExtrapolationRow& row : r.rows) {
    INFO(row.scheme << ": accuracy " << row.accuracy[0] << " " << row.accuracy[1] << " " << row.accuracy[2]);
    REQUIRE(row.accuracy.size() == 3);
    CHECK(row.accuracy[0] > 2 * r.chance);
    for (double l : row.loss) CHECK(std::isfinite(l));
  }
  for (const char* scheme : {"seed", "huang", "shaw", "t5", "rope", "transformer_xl"}) {
    INFO(scheme);
    CHECK(row_named(r, scheme).accuracy[0] >= 0.99);
  }
  for (const char* scheme : {"seed", "huang", "shaw", "transformer_xl"}) {
    INFO(scheme);
    CHECK(row_named(r, scheme).accuracy[2] >= 0.95);
  }
  const ExtrapolationRow& rope = row_named(r, "rope");
  CHECK(rope.accuracy[2] < 0.8);
  CHECK(rope.accuracy[2] < rope.accuracy[1]);
  // Position is the only cue: without a learnable offset (none) or with a fixed recency bias (alibi)
  // the model cannot single out the period.
  CHECK(row_named(r, "none").accuracy[0] < 0.6);
  CHECK(row_named(r, "alibi").accuracy[0] < 0.6);
}

// Seeds 1–5: lag mass ≥ 0.993 at +2; stretch under Scaled: even-position accuracy 1, mass at the
// needed key seed ≥ 0.984, t5 0.88–0.93; under Left: even positions seed 0.70–0.78, t5 0.65–0.69,
// mass ≤ 0.43. (Left is not hopeless: a causal decoder can estimate its index without positions, and
// the full form's larger model reaches 0.94 (seed) and 0.83 (t5) on even positions, still with no head
// on the needed key. So the assertions are: Scaled exact, Left below it with no such head.)
TEST_CASE("experiment D6 synchronous cross-attention: the lag peaks at +c (Left) — the time stretch needs Scaled alignment") {
  SyncResult r = experiment_synchronous(ExperimentScale{});
  REQUIRE(r.lag == 2);
  REQUIRE(r.lag_runs.size() == 1);
  check_finds(r.lag_runs[0]);
  CHECK(r.lag_runs[0].accuracy >= 0.95);
  REQUIRE(r.stretch_runs.size() == 4);
  for (const char* scheme : {"seed", "t5"}) {
    const ProbedRun& scaled = run_named(r.stretch_runs, std::string(scheme) + " (scaled)");
    const ProbedRun& left = run_named(r.stretch_runs, std::string(scheme) + " (left)");
    INFO(scheme << ": scaled accuracy " << scaled.accuracy << " (even " << scaled.subset_accuracy << ", mass "
                << scaled.mass_expected << "), left " << left.accuracy << " (even " << left.subset_accuracy << ", mass "
                << left.mass_expected << ")");
    CHECK(scaled.accuracy >= 0.98);
    CHECK(scaled.subset_accuracy >= 0.98);
    CHECK(scaled.mass_expected >= 0.85);
    CHECK(scaled.response_peak == 0);
    CHECK(left.subset_accuracy < scaled.subset_accuracy - 0.05);
    CHECK(left.mass_expected < 0.5);
  }
}

// The report on hand-made results (no training): sections, tables, links and the pictures on disk.
TEST_CASE("experiments markdown: sections, tables, picture links and files") {
  auto curve = [](const std::string& kind, int head, int64_t peak) {
    ProbeCurve c;
    c.layer = "decoder.layers.0.cross_attn";
    c.place = "cross";
    c.scheme = "seed";
    c.kind = kind;
    c.head = head;
    c.shared_by = {c.layer};
    for (int64_t d = -4; d <= 4; ++d) {
      c.delta.push_back(d);
      c.value.push_back(d == peak ? 0.91 : 0.01);
    }
    return c;
  };
  ProbedRun run;
  run.label = "seed";
  run.scheme = "seed";
  run.place = "cross";
  run.expected = -3;
  run.accuracy = 0.97;
  run.loss = 0.1;
  run.layer = "decoder.layers.0.cross_attn";
  run.head = 1;
  run.mass_expected = 0.91;
  run.mass_peak = -3;
  run.response_peak = -3;
  run.response_plateau = 1;
  for (int h = 0; h < 2; ++h) run.curves.push_back(curve("response", h, -3)), run.curves.push_back(curve("attention_mass", h, -3));
  ProbedRun clipped = run;
  clipped.label = "shaw clip 2 (k − 1)";
  clipped.mass_expected = 0.3;
  clipped.response_peak = -4;
  clipped.response_plateau = 3;

  ExperimentResults results;
  results.d1.lag = 3;
  results.d1.min_len = 6;
  results.d1.chance = 0.1;
  results.d1.setup = "setup text";
  results.d1.runs = {run, clipped};
  results.d3.train_length = 16;
  results.d3.eval_lengths = {16, 32, 64};
  results.d3.chance = 0.1;
  results.d3.rows = {{"t5", {1.0, 0.99, 0.9}, {0.1, 0.2, 0.3}, 1.0}, {"rope", {1.0, 0.8, 0.5}, {0.1, 0.5, 1.5}, 1.0}};
  results.seconds = 3.0;

  TempDir dir;
  ExperimentOptions o;
  o.out_dir = dir.file("experiments");
  std::string md = experiments_markdown(results, o);
  CHECK(md.find("# Verification experiments") == 0);
  CHECK(md.find("`relgrad experiments`") != std::string::npos);
  CHECK(md.find("## D1") != std::string::npos);
  CHECK(md.find("## D3") != std::string::npos);
  CHECK(md.find("## D2") == std::string::npos);  // no runs: no section
  CHECK(md.find("| seed | 97.0 %") != std::string::npos);
  CHECK(md.find("−4 … −2 (shared)") != std::string::npos);
  CHECK(md.find("One head with ≥ 0.9 of its attention at δ = −3 and its response peaking there alone: **seed** (97.0 %). "
                "Both peaks (attention mass and response) at δ = −3 with less mass in one head: none. Neither: "
                "**shaw clip 2 (k − 1)** (97.0 %).") != std::string::npos);
  CHECK(md.find("| rope | 100.0 % | 80.0 % | 50.0 %") != std::string::npos);
  for (const char* file : {"d1_shift.svg", "d3_extrapolation.svg"}) {
    CHECK(md.find(std::string("(experiments/") + file + ")") != std::string::npos);
    CHECK(std::filesystem::exists(dir.file(std::string("experiments/") + file)));
  }
  CHECK(std::filesystem::exists(dir.file("experiments/d1_seed/decoder.layers.0.cross_attn.response.heatmap.png")));
}

TEST_CASE("experiments: an unknown experiment name is an error that lists the valid ones") {
  ExperimentOptions o;
  o.only = "D9";
  CHECK_THROWS_WITH_AS(run_experiment_results(o), doctest::Contains("D1, D2, D3 or D6"), Error);
}

// ---- per-run overrides (ExperimentOptions: the flags of `relgrad experiments`) -----------------------

TEST_CASE("experiments overrides: lists parse, out-of-range values are option errors naming the flag") {
  CHECK(parse_seed_list("1,2,3") == std::vector<uint64_t>{1, 2, 3});
  CHECK(parse_int_list("64,128,-1", "--eval-lengths") == std::vector<int64_t>{64, 128, -1});
  CHECK(parse_name_list("T5,seed") == std::vector<std::string>{"t5", "seed"});
  for (const char* bad : {"", "1,,2", "1,", "x", "1.5", "-1"})
    CHECK_THROWS_WITH_AS(parse_seed_list(bad), doctest::Contains("--seeds"), InstrumentOptionError);
  CHECK_THROWS_AS(parse_int_list("8,a", "--eval-lengths"), InstrumentOptionError);
  CHECK_NOTHROW(check_experiment_options(ExperimentOptions{}));
  auto refused = [](auto change, const char* flag) {
    ExperimentOptions o;
    change(o);
    CHECK_THROWS_WITH_AS(check_experiment_options(o), doctest::Contains(flag), InstrumentOptionError);
  };
  refused([](ExperimentOptions& o) { o.lag = 0; }, "--lag 0");
  refused([](ExperimentOptions& o) { o.period = 1; }, "--period 1");
  refused([](ExperimentOptions& o) { o.offset = -1; }, "--offset -1");
  refused([](ExperimentOptions& o) { o.train_length = 1; }, "--train-length 1");
  refused([](ExperimentOptions& o) { o.eval_lengths = {8, 0}; }, "--eval-lengths");
  refused([](ExperimentOptions& o) { o.schemes = {"t6"}; }, "--scheme t6");
  refused([](ExperimentOptions& o) { o.buckets = 7; }, "--buckets 7");
  refused([](ExperimentOptions& o) { o.table = 1; }, "--table 1");
  refused([](ExperimentOptions& o) { o.only = "D4"; }, "--only D4");
}

// Few steps: these check what runs and what the report says, not what is learned.
TEST_CASE(
    "experiments overrides: D1 with --lag --scheme --buckets --steps --seeds runs that variant per seed") {
  ExperimentOptions o;
  TempDir dir;
  o.out_dir = dir.file("experiments");
  o.only = "d1";
  o.lag = 8;
  o.schemes = {"t5"};
  o.buckets = 16;
  o.steps = 20;
  o.seeds = {1, 2};
  ExperimentResults r = run_experiment_results(o);
  REQUIRE(r.d1.runs.size() == 1);
  CHECK(r.d2.runs.empty());
  CHECK(r.d1.lag == 8);
  CHECK(r.d1.min_len == 11);  // the shortest source grows to k + 3
  const ProbedRun& run = r.d1.runs[0];
  CHECK(run.label == "t5 (16 buckets)");
  CHECK(run.expected == -8);
  CHECK(run.positional.num_buckets == 16);
  CHECK(run.seeds == std::vector<uint64_t>{1, 2});
  REQUIRE(run.per_seed.size() == 2);
  const double mass_1 = run.per_seed[0].mass_expected, mass_2 = run.per_seed[1].mass_expected;
  CHECK(mass_1 != mass_2);
  CHECK(std::fabs(run.mass_expected - (mass_1 + mass_2) / 2) < 1e-12);
  const std::string md = experiments_markdown(r, o);
  CHECK(md.find("`relgrad experiments --only d1 --lag 8 --scheme t5 --buckets 16 --steps 20 --seeds 1,2`") !=
        std::string::npos);
  CHECK(md.find("Seeds 1, 2: every run repeated per seed") != std::string::npos);
  CHECK(md.find("20 steps of 32 sequences") != std::string::npos);
  const auto [lo, hi] = std::minmax(mass_1, mass_2);
  std::ostringstream cell;
  cell.setf(std::ios::fixed);
  cell.precision(3);
  cell << run.mass_expected << " (" << lo << " … " << hi << ")";
  CHECK(md.find(cell.str()) != std::string::npos);
  // 16 bidirectional buckets: exact to |δ| ≤ 3, δ = −8 sits in bucket 4 with −9 … −4 (T5's own
  // prediction, SchemeEntry::predict, worded by the scheme).
  CHECK(md.find("holds −9 … −4 (exact only up to |δ| ≤ 3), so its term cannot single out δ = −8") !=
        std::string::npos);
  CHECK(md.find("Seeds on which one head has ≥ 0.9") != std::string::npos);
}

TEST_CASE("experiments overrides: D2 --period --table, D1 --clip, D3 lengths, D6 --offset, --heads --width") {
  ExperimentOptions o;
  o.steps = 10;
  o.period = 3;
  o.schemes = {"seed"};
  o.table = 3;
  ExperimentScale scale;
  scale.overrides = &o;
  PeriodicResult d2 = experiment_periodic(scale);
  REQUIRE(d2.runs.size() == 1);
  CHECK(d2.period == 3);
  CHECK(d2.runs[0].expected == -2);
  CHECK(d2.runs[0].label == "seed (t3 3)");
  CHECK(d2.runs[0].positional.max_length == 3);

  ExperimentOptions s;
  s.steps = 10;
  s.schemes = {"shaw"};
  s.clip = 5;
  s.heads = 4;
  s.width = 16;
  scale.overrides = &s;
  ShiftResult d1 = experiment_shift(scale);
  REQUIRE(d1.runs.size() == 1);
  CHECK(d1.runs[0].label == "shaw clip 5");
  CHECK(d1.runs[0].positional.clip == 5);
  CHECK(d1.setup.find("d_model 16, 4 heads, d_ff 32") != std::string::npos);

  ExperimentOptions l;
  l.steps = 10;
  l.schemes = {"none", "alibi"};
  l.train_length = 8;
  l.eval_lengths = {8, 12, 20};
  scale.overrides = &l;
  ExtrapolationResult d3 = experiment_extrapolation(scale);
  CHECK(d3.train_length == 8);
  CHECK(d3.eval_lengths == std::vector<int64_t>{8, 12, 20});
  REQUIRE(d3.rows.size() == 2);
  CHECK(d3.rows[0].accuracy.size() == 3);
  CHECK(d3.setup.find("evaluated (teacher-forced, held-out) at 8, 12 and 20") != std::string::npos);

  ExperimentOptions c;
  c.steps = 10;
  c.offset = 5;
  c.schemes = {"t5"};
  scale.overrides = &c;
  SyncResult d6 = experiment_synchronous(scale);
  CHECK(d6.lag == 5);
  REQUIRE(d6.lag_runs.size() == 1);  // the CI form has seed only; --scheme t5 adds t5
  CHECK(d6.lag_runs[0].label == "t5");
  CHECK(d6.lag_runs[0].expected == 5);
  CHECK(d6.stretch_runs.size() == 2);  // t5 scaled and left
}
