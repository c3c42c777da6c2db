// The `relgrad` command's small stumbles, each checked where a user meets it (docs/cli.md): a shortened
// run and its warmup, exit codes that follow the table in docs/cli.md, model values refused at config
// validation under their keys, options that would otherwise be ignored without a word, a failed
// write to stdout, hints for mistyped overrides, and `relgrad --version`.
#include <cctype>
#include <filesystem>
#include <functional>
#include <iostream>
#include <sstream>
#include <streambuf>

#include "cli_testing.h"
#include "core/cpu/gemm_library.h"
#include "core/cpu/matmul.h"
#include "core/device.h"
#include "file_testing.h"
#include "layers/models.h"
#include "testing.h"
#include "train/config/config.h"
#include "train/trainer/distributed.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// relgrad <args> with stdout a stream whose every write fails, as a full disk or /dev/full.
struct FailingBuffer : std::streambuf {
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};
CliResult run_relgrad_stdout_failing(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"relgrad"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  FailingBuffer failing;
  std::ostream out(&failing);
  std::ostringstream err;
  const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, "", err.str()};
}

// A checkpoint of a tiny encoder-decoder on the reverse task (sources of 3 to 6 tokens), trained once.
const std::string& tiny_checkpoint() {
  static TempDir dir;
  static std::string path = [] {
    const std::string run = dir.file("run");
    CliResult r =
        run_relgrad({"train", "--train.out_dir=" + run, "--model.d_model=16", "--model.n_heads=2",
                     "--model.d_ff=32", "--model.n_encoder_layers=1", "--model.n_decoder_layers=1",
                     "--model.cross.max_length=8", "--data.num_symbols=6", "--data.min_len=3",
                     "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=1", "--train.steps=2",
                     "--train.eval_batches=1", "--train.samples=0", "--train.target_accuracy=0"});
    REQUIRE_MESSAGE(r.code == 0, r.err);
    return run + "/checkpoint.safetensors";
  }();
  return path;
}

}  // namespace

TEST_CASE("cli fixes: --train.steps below the inherited warmup shortens the warmup, with a warning") {
  SUBCASE("the default's 100 warmup steps under --train.steps=60") {
    CerrCapture warnings;
    CliResult r = run_relgrad({"train", "--train.steps=60", "--dry-run"});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "\nwarmup_steps = 60\n"));
    CHECK_MESSAGE(contains(warnings.text.str(),
                           "warning: [config] optim.warmup_steps = 100 is more than "
                           "train.steps = 60 (--train.steps=60): warming up over all 60"),
                  warnings.text.str());
  }
  SUBCASE("a config file's warmup") {
    TempDir dir;
    const std::string config = dir.file("run.toml");
    write_bytes(config, "[optim]\nwarmup_steps = 50\n");
    CerrCapture warnings;
    CliResult r = run_relgrad({"train", "--config", config, "--train.steps=20", "--dry-run"});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "\nwarmup_steps = 20\n"));
    CHECK(contains(warnings.text.str(), "optim.warmup_steps = 50 is more than train.steps = 20"));
  }
  SUBCASE("a warmup typed on the command line is the user's: refused, naming it") {
    CliResult r = run_relgrad({"train", "--train.steps=60", "--optim.warmup_steps=100", "--dry-run"});
    CHECK_CLI(r, 2);
    CHECK(contains(r.err, "optim.warmup_steps must be in [0, train.steps = 60], got 100"));
  }
  SUBCASE("a negative train.steps is that key's error, not the warmup's") {
    CliResult r = run_relgrad({"train", "--train.steps=-5", "--dry-run"});
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, "[config] train.steps must be >= 1, got -5"), r.err);
    CHECK_FALSE(contains(r.err, "warmup"));
  }
}

TEST_CASE("cli fixes: a config file that cannot be read is exit 1, one that says something wrong exit 2") {
  TempDir dir;
  const std::string missing = dir.file("nope.toml");
  CliResult r = run_relgrad({"train", "--config", missing, "--dry-run"});
  CHECK_CLI(r, 1);
  CHECK(contains(r.err, "relgrad train: error: [config] " + missing + ": cannot open"));
  const std::string bad = dir.file("bad.toml");
  write_bytes(bad, "[model]\nd_model = \"wide\"\n");
  r = run_relgrad({"train", "--config", bad, "--dry-run"});
  CHECK_CLI(r, 2);
  CHECK(contains(r.err, "model.d_model"));
}

TEST_CASE(
    "cli fixes: model values the layers would refuse are config errors under their keys, before --dry-run") {
  struct Case {
    std::vector<std::string> overrides;
    std::string expected;
  };
  for (const Case& k : std::vector<Case>{
           {{"--model.norm_eps=0"}, "[config] model.norm_eps must be > 0 (LayerNorm's ε), got 0"},
           {{"--model.norm_eps=-1e-5"}, "model.norm_eps must be > 0"},
           {{"--model.cross.max_length=0"}, "[config] model.cross.max_length must be >= 1"},
           {{"--model.encoder_self.scheme=rope", "--model.d_model=60"},
            "model.encoder_self.scheme = rope needs an even head size, but model.d_model / model.n_heads = "
            "60 / 4 = 15"},
           {{"--model.decoder_self.scheme=rope", "--model.decoder_self.rope_base=1"},
            "model.decoder_self.rope_base must be > 1, got 1"},
           {{"--model.encoder_self.num_buckets=3"},
            "model.encoder_self.num_buckets must be at least 4 (t5, bidirectional), got 3"},
           {{"--model.decoder_self.num_buckets=1"},
            "model.decoder_self.num_buckets must be at least 2 (t5, causal), got 1"},
           {{"--model.encoder_self.max_distance=8"},
            "model.encoder_self.max_distance must be more than the 8 exact buckets"},
           {{"--model.cross.scheme=shaw", "--model.cross.clip=-1"}, "model.cross.clip must be >= 0, got -1"},
           {{"--model.encoder_self.scheme=transformer_xl", "--model.d_model=9", "--model.n_heads=3"},
            "model.encoder_self.scheme = transformer_xl needs an even model.d_model"},
       }) {
    std::vector<std::string> args{"train", "--dry-run"};
    args.insert(args.end(), k.overrides.begin(), k.overrides.end());
    INFO(k.overrides[0]);
    CliResult r = run_relgrad(args);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, k.expected), r.err);
  }
}

// The config's checks restate the layers' (layers/relative_bias.cpp, ...): over a sweep of values for
// every scheme and place, the config accepts exactly what builds, and names the key when it refuses.
TEST_CASE(
    "cli fixes: RunConfig::validate accepts exactly the scheme parameters and norms the model builds with") {
  struct Variant {
    std::string scheme;
    std::function<void(PositionalConfig&, RunConfig&, int)> set;
    int count;
  };
  const std::vector<int64_t> small = {-1, 0, 1, 2, 3, 4, 5, 6, 8};
  const std::vector<Variant> variants = {
      {"seed", [&](PositionalConfig& p, RunConfig&, int i) { p.max_length = small[i]; }, 9},
      {"huang", [&](PositionalConfig& p, RunConfig&, int i) { p.max_length = small[i]; }, 9},
      {"shaw", [&](PositionalConfig& p, RunConfig&, int i) { p.clip = small[i]; }, 9},
      {"t5",
       [&](PositionalConfig& p, RunConfig&, int i) {
         p.num_buckets = small[i % 9], p.max_distance = small[i / 9];
       },
       81},
      {"rope",
       [&](PositionalConfig& p, RunConfig& c, int i) {
         const int64_t dims[][2] = {{8, 2}, {12, 4}, {6, 2}, {6, 6}};
         c.model.d_model = dims[i % 4][0], c.model.n_heads = dims[i % 4][1];
         p.rope_base = i / 4 == 0 ? 0.5 : i / 4 == 1 ? 1.0 : 10000.0;
       },
       12},
      {"transformer_xl",
       [&](PositionalConfig&, RunConfig& c, int i) {
         const int64_t dims[][2] = {{8, 2}, {9, 3}, {6, 3}};
         c.model.d_model = dims[i][0], c.model.n_heads = dims[i][1];
       },
       3},
      {"alibi",
       [&](PositionalConfig&, RunConfig& c, int i) {
         c.model.norm_eps = i == 0 ? 0.0 : i == 1 ? -1.0 : 1e-6;
       },
       3},
  };
  int accepted = 0, refused = 0;
  for (const std::string place : {"encoder_self", "decoder_self", "cross"})
    for (const std::string norm : {"layer_norm", "rms_norm"})
      for (const Variant& v : variants)
        for (int i = 0; i < v.count; ++i) {
          RunConfig c = RunConfig::defaults();
          c.model.d_model = 8, c.model.n_heads = 2, c.model.d_ff = 8;
          c.model.n_encoder_layers = 1, c.model.n_decoder_layers = 1;
          c.model.norm = norm_from_name(norm, "test");
          PositionalConfig& p = place == "encoder_self"   ? c.model.encoder_self
                                : place == "decoder_self" ? c.model.decoder_self
                                                          : c.model.cross;
          p.scheme = v.scheme;
          v.set(p, c, i);
          std::string config_error;
          try {
            c.validate();
          } catch (const Error& e) {
            config_error = e.what();
          }
          bool builds = true;
          try {
            TransformerConfig m = c.model;
            m.vocab_size = 10;
            EncoderDecoder model(m);
          } catch (const Error&) {
            builds = false;
          }
          INFO(place, " ", norm, " ", v.scheme, " variant ", i, ": ", config_error);
          CHECK(config_error.empty() == builds);
          if (!config_error.empty()) {
            ++refused;
            // A refusal names a config key (model.<place>.<key>, model.d_model, model.norm_eps, ...).
            CHECK(contains(config_error, "[config] "));
            CHECK(contains(config_error, "model."));
          } else {
            ++accepted;
          }
        }
  CHECK(accepted > 50);
  CHECK(refused > 50);
}

TEST_CASE("cli fixes: sample and eval refuse options they would otherwise ignore") {
  const std::string& checkpoint = tiny_checkpoint();
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  TempDir dir;
  const std::string midi = dir.file("x.mid"), dump = dir.file("dump.safetensors");
  for (const Case& k : std::vector<Case>{
           {{"sample", checkpoint, "-o", midi}, "only goes with --format midi"},
           {{"sample", checkpoint, "--input", ""}, "[sample] --input is empty"},
           {{"sample", checkpoint, "--input", "  "}, "[sample] --input is empty"},
           {{"sample", checkpoint, "--prompt", ""}, "[sample] --prompt is empty"},
           {{"eval", checkpoint, "--dump-logits", dump, "--target", "1 2"},
            "[eval] --target goes with --input"},
           {{"eval", checkpoint, "--dump-logits", dump, "--input", ""}, "[eval] --input is empty"},
       }) {
    std::string shown;
    for (const std::string& a : k.args) shown += " '" + a + "'";
    INFO("relgrad", shown);
    CliResult r = run_relgrad(k.args);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, k.expected), r.err);
  }
  CHECK_FALSE(fs::exists(midi));
  CHECK_FALSE(fs::exists(dump));
}

TEST_CASE("cli fixes: an input longer than the model was trained on runs, with a warning") {
  const std::string& checkpoint = tiny_checkpoint();  // data.max_len = 6
  {
    CerrCapture warnings;
    CliResult r = run_relgrad({"sample", checkpoint, "--input", "1 2 3 4 5 1 2"});
    CHECK_CLI(r, 0);
    CHECK_MESSAGE(contains(warnings.text.str(),
                           "relgrad sample: warning: [sample] the input has 7 tokens, more "
                           "than the 6 the model was trained on (data.max_len = 6)"),
                  warnings.text.str());
  }
  {
    TempDir dir;
    CerrCapture warnings;
    CliResult r = run_relgrad(
        {"eval", checkpoint, "--dump-logits", dir.file("d.safetensors"), "--input", "1 2 3 4 5 1 2 3"});
    CHECK_CLI(r, 0);
    CHECK(contains(warnings.text.str(), "relgrad eval: warning: [eval] the input has 8 tokens"));
  }
  {
    CerrCapture warnings;  // as long as trained: no warning
    CliResult r = run_relgrad({"sample", checkpoint, "--input", "1 2 3 4 5 1"});
    CHECK_CLI(r, 0);
    CHECK_FALSE(contains(warnings.text.str(), "warning"));
  }
}

TEST_CASE("cli fixes: output that cannot be written to stdout is an error, exit 1") {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                               {"--version"},
                                               {"train", "--dry-run"},
                                               {"sample", tiny_checkpoint()}}) {
    INFO(args[0]);
    CliResult r = run_relgrad_stdout_failing(args);
    CHECK_CLI(r, 1);
    CHECK_MESSAGE(contains(r.err, ": error: [output] could not write to standard output"), r.err);
  }
  // A command that failed already keeps its own exit code.
  CliResult r = run_relgrad_stdout_failing({"train", "--dry-run", "--model.norm_eps=0"});
  CHECK_CLI(r, 2);
}

TEST_CASE("cli fixes: mistyped overrides say what was meant") {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  TempDir dir;
  const std::string table_as_value = dir.file("model5.toml");
  write_bytes(table_as_value, "model = 5\n");
  const std::string json_table_as_value = dir.file("model5.json");
  write_bytes(json_table_as_value, "{\"optim\": 1}\n");
  for (const Case& k : std::vector<Case>{
           {{"train", "--train.steps", "5"},
            "'--train.steps' is neither an option of relgrad train nor a --key=value "
            "override: write --train.steps=5 (a config override takes '=', not a blank)"},
           {{"train", "--dry-run", "--optim.lr"}, "write --optim.lr=VALUE"},
           {{"train", "--steps=5"}, "unknown key 'steps' (did you mean 'train.steps'?)"},
           {{"train", "--seed=5"},
            "unknown key 'seed' (did you mean 'data.seed', 'train.seed' or 'sample.seed'?)"},
           {{"train", "--cross.max_length=5"}, "(did you mean 'model.cross.max_length'?)"},
           {{"train", "--config", table_as_value, "--dry-run"},
            table_as_value +
                ": unknown key 'model': 'model' is a table, not a key; expected a table ([model] in TOML"},
           {{"train", "--config", json_table_as_value, "--dry-run"}, "'optim' is a table, not a key"},
           {{"train", "--model.cross=5"}, "'model.cross' is a table, not a key"},
       }) {
    INFO(k.args[1]);
    CliResult r = run_relgrad(k.args);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, k.expected), r.err);
  }
}

TEST_CASE("cli fixes: relgrad --version names the version, the build type and what is built in") {
  CliResult r = run_relgrad({"--version"});
  CHECK_CLI(r, 0);
  CHECK(r.out.rfind("relgrad ", 0) == 0);
  CHECK(std::isdigit(static_cast<unsigned char>(r.out[8])));
  CHECK_FALSE(contains(r.out, "unknown"));
  CHECK(contains(r.out, "\nbuild type: "));
  CHECK(contains(r.out, std::string("\nCUDA: ") + (cuda_built() ? "yes" : "no") + "\n"));
  CHECK(contains(r.out, std::string("\nMPI: ") + (mpi_built() ? "yes" : "no") + "\n"));
  CHECK(contains(r.out, std::string("\nNCCL: ") + (nccl_built() ? "yes" : "no") + "\n"));
  // The processor and the GEMM's kernels (bench/run_train.sh records them beside PyTorch's).
  CHECK(contains(r.out, "\nCPU: " + cpu::cpu_model_name() + "\n"));
  // The library in use (core/cpu/gemm_library.h), its kernels and how it was chosen.
  const cpu::GemmLibrary library = cpu::gemm_library();
  CHECK(contains(r.out, "\nGEMM: " + cpu::gemm_library_kernel(library) + " ("));
  CHECK(contains(r.out, library == cpu::gemm_choice().library ? cpu::gemm_choice().how : "set by cpu::set_gemm_library"));
  // The malloc, as found at run time; which one CMake linked is ctest's `relgrad command: its malloc`.
  CHECK_MESSAGE((contains(r.out, "\nmalloc: tcmalloc (gperftools ") || contains(r.out, "\nmalloc: jemalloc") ||
                 contains(r.out, "\nmalloc: the C library's")),
                r.out);
}
