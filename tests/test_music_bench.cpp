// `relgrad music-bench` (train/instruments/music_bench.h) in its CI form: decoder-only chorale models
// without a positional term and with Huang et al.'s relative attention, two seeds each, and two
// harmonisers (explicit cross alignment with the seed's scheme, and no cross positional term). What
// is asserted held with a wide margin on every seed measured: valid NLL none 2.06 vs huang 0.93 at the
// CI size (seeds 1–2; at d_model 32, seeds 1–4: none 2.29–2.35 vs huang 1.11–1.18); the harmonisers'
// same-step cross mass 0.29–0.87 (explicit) vs at most 0.006 (none), seeds 1–3. docs/music.md reports
// the CI form's figures. The checks themselves are tested on made-up results first.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "train/instruments/music_bench.h"
#include "train/music/chorales.h"

using namespace relgrad;
using relgrad::testing::read_bytes;
using relgrad::testing::TempDir;
using relgrad::testing::write_bytes;

namespace {

MusicBenchRun made_up_run(const std::string& treatment, uint64_t seed, double valid, double test) {
  MusicBenchRun r;
  r.treatment = treatment;
  r.seed = seed;
  r.valid_nll = valid;
  r.test_nll = test;
  return r;
}

MusicBenchResult made_up_result() {
  MusicBenchResult r;
  r.unigram_valid_nll = 3.4, r.unigram_test_nll = 3.41;
  r.runs = {made_up_run("none", 1, 2.1, 2.2), made_up_run("none", 2, 2.0, 2.1),
            made_up_run("huang", 1, 0.9, 1.0), made_up_run("huang", 2, 1.0, 1.1)};
  HarmonyRun e, n;
  e.label = "seed, explicit", e.same_step_mass = 0.7, e.valid_nll = 1.9, e.test_nll = 2.0;
  n.label = "none", n.same_step_mass = 0.01, n.valid_nll = 2.0, n.test_nll = 2.1;
  r.harmony = {e, n};
  return r;
}

// The rows of results.csv as field lists (header first).
std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream s(line);
    std::string f;
    while (std::getline(s, f, ',')) fields.push_back(f);
    if (!line.empty() && line.back() == ',') fields.push_back("");
    rows.push_back(fields);
  }
  return rows;
}

}  // namespace

TEST_CASE("music bench: the CI checks pass on good results and name each failure") {
  MusicBenchResult good = made_up_result();
  CHECK(music_bench_failures(good).empty());

  MusicBenchResult above_unigram = made_up_result();
  above_unigram.runs[1].test_nll = 3.5;
  std::vector<std::string> f = music_bench_failures(above_unigram);
  REQUIRE(f.size() == 1);
  CHECK(f[0].find("none seed 2: test NLL 3.5000 is not below the unigram's 3.4100") != std::string::npos);

  MusicBenchResult huang_worse = made_up_result();
  huang_worse.runs[2].valid_nll = 2.5, huang_worse.runs[3].valid_nll = 2.0;  // mean 2.25 > 2.05
  f = music_bench_failures(huang_worse);
  REQUIRE(f.size() == 1);
  CHECK(f[0].find("huang's mean valid NLL 2.2500 is not below none's 2.0500") != std::string::npos);

  MusicBenchResult unaligned = made_up_result();
  unaligned.harmony[0].same_step_mass = 0.005;
  f = music_bench_failures(unaligned);
  REQUIRE(f.size() == 1);
  CHECK(f[0].find("same-step cross mass 0.005") != std::string::npos);

  // The tables hold every treatment once, mean ± sd over its seeds, and the unigram floor.
  const std::string table = music_bench_table(good);
  CHECK(table.find("2.050 ± 0.071") != std::string::npos);  // none: valid 2.1, 2.0
  CHECK(table.find("0.950 ± 0.071") != std::string::npos);  // huang: valid 0.9, 1.0
  CHECK(table.find("unigram") != std::string::npos);
  const std::string csv = music_bench_csv(good);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 4 + 2 + 1);
}

TEST_CASE("music bench: the options are checked before anything trains") {
  TempDir dir;
  MusicBenchOptions o;
  o.out_dir = dir.file("bench");
  o.treatments = {"none", "absolute"};
  CHECK_THROWS_WITH_AS(music_bench_results(o, nullptr), doctest::Contains("unknown treatment 'absolute'"),
                       Error);
  o.treatments = {"none"};
  o.chorales_path = dir.file("missing.json");
  CHECK_THROWS_AS(music_bench_results(o, nullptr), Error);
  CHECK(music_bench_size(o).steps == 300);
  o.steps = 40;
  CHECK(music_bench_size(o).steps == 40);
  CHECK(music_bench_size(o).warmup == 4);
  o.full = true, o.steps = -1;
  CHECK(music_bench_size(o).steps == 1500);
  CHECK(music_bench_size(o).dropout == 0.0);
  CHECK_FALSE(music_bench_size(o).rms_norm);
  // The PoPE paper's JSB size is a third size, not a variant of the full form.
  o.chorales_path.clear();
  o.pope_size = true;
  CHECK_THROWS_WITH_AS(music_bench_results(o, nullptr), doctest::Contains("--full and --pope-size"), Error);
  o.full = false;
  const MusicBenchSize pope = music_bench_size(o);
  CHECK(pope.layers == 6);
  CHECK(pope.d_model == 256);
  CHECK(pope.n_heads == 8);
  CHECK(pope.context == 2048);
  CHECK(pope.batch_size == 4);
  CHECK(pope.steps == 3000);
  CHECK(pope.lr == doctest::Approx(6e-4));
  CHECK(pope.dropout == doctest::Approx(0.2));
  CHECK(pope.rms_norm);
  o.device = "gpu";
  CHECK_THROWS_WITH_AS(music_bench_results(o, nullptr), doctest::Contains("gpu"), Error);
}

// The CI form end to end, as `relgrad music-bench` runs it (Release: 5 min 10 s alone, one core busy,
// on the AVX2 EPYC of docs/benchmarks.md).
TEST_CASE(
    "music bench: CI form, relative attention beats no positional term and explicit cross heads align") {
  TempDir dir;
  MusicBenchOptions o;
  o.out_dir = dir.file("bench");
  std::ostringstream out;
  const int status = run_music_bench(o, out);
  INFO(out.str());
  CHECK(status == 0);

  const auto rows = read_csv(dir.file("bench/results.csv"));
  REQUIRE(rows.size() == 1 + 4 + 2 + 1);  // header, none ×2, huang ×2, two harmonisers, unigram
  CHECK(rows[0][0] == "kind");
  std::map<std::string, std::vector<double>> valid;
  double unigram = 0;
  for (size_t n = 1; n < rows.size(); ++n) {
    REQUIRE(rows[n].size() == 9);
    if (rows[n][0] == "continue") valid[rows[n][1]].push_back(std::stod(rows[n][4]));
    if (rows[n][0] == "unigram") unigram = std::stod(rows[n][4]);
  }
  REQUIRE(valid["none"].size() == 2);
  REQUIRE(valid["huang"].size() == 2);
  CHECK(unigram > 3.0);  // the shipped set: 3.396 nats per token
  // Per seed, not only on the mean: every huang model beats every model without a positional term.
  CHECK(*std::max_element(valid["huang"].begin(), valid["huang"].end()) <
        *std::min_element(valid["none"].begin(), valid["none"].end()));
  for (double v : valid["none"]) CHECK(v < unigram);

  const std::string md = read_bytes(dir.file("bench/results.md"));
  CHECK(md.find("| huang |") != std::string::npos);
  CHECK(md.find("Cross-attention heads") != std::string::npos);
  // The probe pictures: huang's decoder heads and the explicit harmoniser's cross heads.
  CHECK(std::filesystem::exists(dir.file("bench/probe-huang/layers.0.self_attn.attention_mass.heatmap.png")));
  CHECK(std::filesystem::exists(
      dir.file("bench/probe-harmony-seed-explicit/decoder.layers.0.cross_attn.attention_mass.heatmap.png")));
}

// The study spine (train/instruments/study.h): a rerun into the same out dir trains nothing and keeps
// every model's numbers and probe, so results.csv is the same to the byte and results.md's tables (the
// heads' too, and the list of pictures) are the same; the pictures its first run drew are not redrawn.
TEST_CASE("music bench: a rerun into the same out dir keeps every model, its probe and the same tables") {
  TempDir dir;
  ChoraleSet few = read_chorales(default_chorales_path());  // a few chorales: the test takes seconds
  few.train.resize(16), few.valid.resize(4), few.test.resize(4);
  write_bytes(dir.file("few.json"), chorales_to_json(few));
  MusicBenchOptions o;
  o.out_dir = dir.file("bench");
  o.chorales_path = dir.file("few.json");
  o.treatments = {"huang"};
  o.seeds = {1};
  o.steps = 3;
  const auto kept = [](const std::string& out) { return testing::occurrences(out, "(kept from an earlier run)"); };
  // results.md after its "Total time" (the one figure of this run rather than of its models).
  const auto tables = [&] {
    const std::string md = read_bytes(dir.file("bench/results.md"));
    return md.substr(md.find("## Note-wise NLL"));
  };
  std::ostringstream first;
  REQUIRE(run_music_bench(o, first) == 0);
  INFO(first.str());
  CHECK(kept(first.str()) == 0);
  CHECK(first.str().find("[3/3] harmony none: valid NLL") != std::string::npos);
  const std::string csv = read_bytes(dir.file("bench/results.csv"));
  const std::string md = tables();
  CHECK(md.find("| huang (seed 1) | layers.1.self_attn |") != std::string::npos);
  CHECK(md.find("| harmony seed, explicit (seed 1) | decoder.layers.0.cross_attn |") != std::string::npos);
  const std::string picture = dir.file("bench/probe-huang/layers.0.self_attn.attention_mass.heatmap.png");
  REQUIRE(std::filesystem::exists(picture));
  CHECK(md.find("`probe-huang/layers.0.self_attn.attention_mass.heatmap.png`") != std::string::npos);
  const auto drawn = std::filesystem::last_write_time(picture);

  std::ostringstream again;
  REQUIRE(run_music_bench(o, again) == 0);
  INFO(again.str());
  CHECK(kept(again.str()) == 3);
  CHECK(read_bytes(dir.file("bench/results.csv")) == csv);
  CHECK(tables() == md);
  CHECK(std::filesystem::last_write_time(picture) == drawn);
}
