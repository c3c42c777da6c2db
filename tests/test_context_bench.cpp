// `relgrad context-bench` (train/instruments/context_bench.h) in its CI form: byte-level LMs on the KJV
// text (data/kjv.txt, written by tools/setup.sh) trained at context 16 with sinusoidal positions, T5's
// bias, ALiBi and RoPE, two seeds each, evaluated at contexts 16 … 128. What is asserted held with a
// margin on every seed measured (docs/extrapolation.md has the figures): every model below the unigram
// NLL at 1×; ALiBi and T5 at 4× within 3 % of their 1× NLL; sinusoidal and rotary positions at 4× at
// least 10 % worse than at 1× and worse than ALiBi there. Then one model's number against what `relgrad eval
// --data.context=N` prints for its checkpoint. The checks themselves are tested on made-up results first.
#include <filesystem>
#include <sstream>

#include "bench_fixtures.h"
#include "cli_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "layers/schemes.h"
#include "train/instruments/context_bench.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::contains;
using relgrad::testing::lines_of;
using relgrad::testing::read_bytes;
using relgrad::testing::run_relgrad;
using relgrad::testing::TempDir;

namespace {

std::string kjv_path() {
  return (std::filesystem::path(RELGRAD_GOLDEN_DIR).parent_path().parent_path() / "data" / "kjv.txt").string();
}

ContextBenchRun made_up_run(const std::string& treatment, uint64_t seed, std::vector<double> nll) {
  ContextBenchRun r;
  r.treatment = treatment;
  r.seed = seed;
  r.nll = nll;
  r.tokens = std::vector<int64_t>(nll.size(), 4096);
  return r;
}

ContextBenchResult made_up_result() {
  ContextBenchResult r;
  r.size.context = 16;
  r.size.multiples = {1, 2, 4, 8};
  r.treatments = {"sinusoidal", "alibi"};
  r.seeds = {1, 2};
  r.unigram_nll = 3.0;
  r.runs = {made_up_run("sinusoidal", 1, {2.2, 2.5, 2.7, 2.9}), made_up_run("sinusoidal", 2, {2.2, 2.4, 2.6, 2.8}),
            made_up_run("alibi", 1, {2.3, 2.3, 2.31, 2.4}), made_up_run("alibi", 2, {2.4, 2.4, 2.4, 2.4})};
  return r;
}

// The fields of one CSV line.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream in(line);
  for (std::string x; std::getline(in, x, ',');) f.push_back(x);
  return f;
}

}  // namespace

TEST_CASE("context bench: the CI checks on made-up results") {
  ContextBenchResult r = made_up_result();
  CHECK(context_bench_failures(r).empty());
  // A model at or above the unigram NLL.
  r.runs[3].nll[0] = 3.0;
  std::vector<std::string> f = context_bench_failures(r);
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], "alibi seed 2: NLL at 1x 3.000 is not below the unigram NLL 3.000"));
  // ALiBi degrading past the margin: 2.37 > 2.3 · 1.03.
  r = made_up_result();
  r.runs[2].nll[2] = 2.37;
  f = context_bench_failures(r);
  REQUIRE(f.size() == 1);
  CHECK(contains(f[0], "alibi seed 1: NLL at 4x 2.370 is more than 3 % above its 1x 2.300"));
  // Sinusoidal holding: 2.35 < 2.2 · 1.10, and below ALiBi's 2.4 at 4×.
  r = made_up_result();
  r.runs[1].nll[2] = 2.35;
  f = context_bench_failures(r);
  REQUIRE(f.size() == 2);
  CHECK(contains(f[0], "sinusoidal seed 2: NLL at 4x 2.350 is less than 1.10 x its 1x 2.200"));
  CHECK(contains(f[1], "sinusoidal seed 2: NLL at 4x 2.350 is not above alibi's 2.400"));
  // RoPE is held to the same: 2.3 at 4× is less than 2.1 · 1.10.
  r = made_up_result();
  r.treatments.push_back("rope");
  r.runs.push_back(made_up_run("rope", 1, {2.1, 2.2, 2.5, 2.8}));
  r.runs.push_back(made_up_run("rope", 2, {2.1, 2.2, 2.3, 2.8}));
  f = context_bench_failures(r);
  REQUIRE(f.size() == 2);
  CHECK(contains(f[0], "rope seed 2: NLL at 4x 2.300 is less than 1.10 x its 1x 2.100"));
  CHECK(contains(f[1], "rope seed 2: NLL at 4x 2.300 is not above alibi's 2.400"));
  // Without the other treatments only the unigram floor is checked.
  r = made_up_result();
  r.treatments = {"sinusoidal"};
  r.runs.resize(2);
  CHECK(context_bench_failures(r).empty());
  // The tables: mean ± sd and the ratio to 1× (seed 1: 2.9 / 2.2, seed 2: 2.8 / 2.2; mean 1.295).
  r = made_up_result();
  const std::string table = context_bench_table(r);
  CHECK(contains(table, "8x (128)"));
  CHECK(contains(table, "2.850 +- 0.071"));
  CHECK(contains(table, "1.30 +- 0.03"));
  CHECK(contains(context_bench_csv(r), "sinusoidal,1,8,128,2.90000,4.18382,1.3182,4096,"));
}

TEST_CASE("context bench: every built-in scheme of the registry is a treatment") {
  const std::vector<std::string> t = context_bench_treatments();
  for (const SchemeEntry& e : positional_schemes()) {
    INFO(e.name);
    CHECK(std::find(t.begin(), t.end(), e.name) != t.end());
  }
  CHECK(std::find(t.begin(), t.end(), "sinusoidal") != t.end());
  CHECK(std::find(t.begin(), t.end(), "learned") != t.end());
}

// The CI form end to end, as `relgrad context-bench` runs it (about 30 s on one busy core), then the
// bench's number for one model against `relgrad eval` on its checkpoint.
TEST_CASE("context bench: CI form, ALiBi and T5 hold past the training context, sinusoidal does not") {
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(kjv_path()),
                  kjv_path() << " is missing: tools/setup.sh writes it (Debian's bible-kjv)");
  TempDir dir;
  ContextBenchOptions o;
  o.out_dir = dir.file("bench");
  o.text_path = kjv_path();
  std::ostringstream out;
  const int status = run_context_bench(o, out);
  INFO(out.str());
  CHECK(status == 0);
  CHECK(contains(out.str(), "CI checks hold"));
  const std::vector<std::string> rows = lines_of(dir.file("bench/results.csv"));
  REQUIRE(rows.size() == 1 + 4 * 2 * 4);  // header; treatments × seeds × contexts
  CHECK(rows[0] == "treatment,seed,multiple,context,nll,bits_per_byte,ratio_to_1x,tokens,params,train_loss,seconds");
  const std::string md = read_bytes(dir.file("bench/results.md"));
  CHECK(contains(md, "| alibi |"));
  CHECK(contains(md, "--data.context=N --data.seed=1000"));
  CHECK(contains(md, "| unigram (scored bytes) | 3.0"));  // the scored text's own difficulty, about 3.06
  CHECK(std::filesystem::file_size(dir.file("bench/context.svg")) > 1000);

  // alibi seed 1 at 2× (context 32): the CSV's NLL is context_bench_eval's, and `relgrad eval` prints it.
  const ContextBenchSize size = context_bench_size(o);
  const int64_t context = 2 * size.context, batches = context_bench_eval_batches(size, context);
  std::vector<std::string> row;
  for (const std::string& line : rows)
    if (line.rfind("alibi,1,2,", 0) == 0) row = fields(line);
  REQUIRE(row.size() == 11);
  const std::string checkpoint = dir.file("bench/runs/alibi-s1/checkpoint.safetensors");
  const EvalResult e = context_bench_eval(checkpoint, context, batches);
  char nll5[32], nll4[32];
  std::snprintf(nll5, sizeof nll5, "%.5f", e.loss);
  std::snprintf(nll4, sizeof nll4, "%.4f", e.loss);
  CHECK(row[4] == nll5);
  CHECK(row[7] == std::to_string(e.tokens));
  const testing::CliResult eval =
      run_relgrad({"eval", checkpoint, "--data.context=" + std::to_string(context), "--data.seed=1000",
                   "--batches=" + std::to_string(batches)});
  CHECK_CLI(eval, 0);
  CHECK_MESSAGE(contains(eval.out, std::string("held-out loss ") + nll4 + ", "), eval.out);
  CHECK_MESSAGE(contains(eval.out, "(" + std::to_string(e.tokens) + " tokens)"), eval.out);
}

TEST_CASE("context bench: bad options are errors naming the option and value") {
  TempDir dir;
  ContextBenchOptions o;
  o.out_dir = dir.file("bench");
  o.text_path = kjv_path();
  o.treatments = {"fourier"};
  std::ostringstream out;
  check_throws_with([&] { run_context_bench(o, out); },
                    "[context-bench] --treatments: unknown treatment 'fourier' (none, sinusoidal, learned, seed");
  o.treatments = {"alibi"};
  o.text_path = dir.file("nothing.txt");
  check_throws_with([&] { run_context_bench(o, out); }, "--text '" + dir.file("nothing.txt") + "' is not a readable file");
  o.text_path = kjv_path();
  o.out_dir = "";
  check_throws_with([&] { run_context_bench(o, out); }, "--out is empty");
  // From the command line: exit 2 before anything runs.
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--treatments", "alibi,fourier"}, "unknown treatment 'fourier'"},
           {{"--seeds", "1,,2"}, "an empty item"},
           {{"--text", dir.file("nothing.txt")}, "is not a readable file"},
           {{"--steps", "0"}, "--steps"},
       }) {
    std::vector<std::string> argv = {"context-bench", "--out", dir.file("cli")};
    argv.insert(argv.end(), args.begin(), args.end());
    const testing::CliResult r = run_relgrad(argv);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, says), r.err);
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("cli")));
}

// The study spine (train/instruments/study.h): a rerun into the same --out trains nothing, keeps every
// model's record as it was and writes the same results.csv to the byte (the seconds are the records'
// too); another budget is another model, trained again.
TEST_CASE("context bench: a rerun into the same out dir keeps every model and writes the same results.csv") {
  REQUIRE_MESSAGE(std::filesystem::is_regular_file(kjv_path()),
                  kjv_path() << " is missing: tools/setup.sh writes it (Debian's bible-kjv)");
  TempDir dir;
  std::vector<std::string> args = {"context-bench", "--treatments", "alibi,rope", "--seeds", "1", "--steps", "4",
                                   "--text", kjv_path(), "--out", dir.file("bench")};
  const auto kept = [](const std::string& out) { return testing::occurrences(out, "(kept from an earlier run)"); };
  const testing::CliResult first = run_relgrad(args);
  CHECK_CLI(first, 0);
  CHECK_MESSAGE(contains(first.out, "[2/2] rope seed 1: NLL 1x "), first.out);
  CHECK(kept(first.out) == 0);
  const std::string csv = read_bytes(dir.file("bench/results.csv"));
  const std::string record = read_bytes(dir.file("bench/runs/alibi-s1/study-record.txt"));
  REQUIRE(lines_of(dir.file("bench/results.csv")).size() == 1 + 2 * 4);

  const testing::CliResult again = run_relgrad(args);
  CHECK_CLI(again, 0);
  CHECK_MESSAGE(kept(again.out) == 2, again.out);
  CHECK_MESSAGE(contains(again.out, "[1/2] alibi seed 1: NLL 1x "), again.out);
  CHECK(read_bytes(dir.file("bench/results.csv")) == csv);
  CHECK(read_bytes(dir.file("bench/runs/alibi-s1/study-record.txt")) == record);

  args[6] = "5";  // --steps 5: both models train again
  const testing::CliResult longer = run_relgrad(args);
  CHECK_CLI(longer, 0);
  CHECK_MESSAGE(kept(longer.out) == 0, longer.out);
  CHECK(read_bytes(dir.file("bench/results.csv")) != csv);
}
