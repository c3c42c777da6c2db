// The `relgrad` command (train/command/cli.h), run in-process through run_cli: exit codes (0 ok, 1 runtime
// error, 2 usage error), messages on stderr that name the key / file / token, the files each
// subcommand writes, and the promise that a failing command overwrites nothing.
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "cli_testing.h"
#include "train/command/subcommand.h"
#include "file_testing.h"
#include "model_testing.h"
#include "testing.h"
#include "train/command/cli.h"
#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Overrides for a tiny encoder–decoder run on the reverse task.
std::vector<std::string> tiny(const std::string& out_dir) {
  return {"--train.out_dir=" + out_dir, "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
          "--model.n_encoder_layers=1", "--model.n_decoder_layers=1", "--model.cross.max_length=8",
          "--data.num_symbols=6", "--data.min_len=3", "--data.max_len=6", "--data.batch_size=4",
          "--optim.warmup_steps=2", "--train.steps=6", "--train.log_every=2", "--train.eval_every=3",
          "--train.eval_batches=2", "--train.save_every=0", "--train.samples=1", "--train.target_accuracy=0"};
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One trained run shared by the tests below (trained on first use): <dir>/run/{checkpoint.safetensors,
// log.jsonl, loss.svg}. Tests that damage files work on copies.
struct TrainedRun {
  TempDir dir;
  std::string run, checkpoint, log;
  CliResult result;
  TrainedRun() {
    run = dir.file("run");
    result = run_relgrad(concat({"train"}, tiny(run)));
    checkpoint = run + "/checkpoint.safetensors";
    log = run + "/log.jsonl";
  }
};
const TrainedRun& trained() {
  static TrainedRun r;
  REQUIRE_MESSAGE(r.result.code == 0, r.result.err);
  return r;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

}  // namespace

// ---- train: config handling ------------------------------------------------------------------------

TEST_CASE("cli: train --dry-run prints the effective config (file, then overrides) and writes nothing") {
  TempDir dir;
  const std::string out_dir = dir.file("never");
  const std::string config = dir.file("run.toml");
  write_bytes(config, "[model]\nd_model = 32\nn_heads = 8\n[optim]\nlr = 0.002\n");
  CliResult r = run_relgrad({"train", "--config", config, "--dry-run", "--model.d_model=24", "--train.steps=700",
                     "--train.out_dir=" + out_dir, "--model.cross_alignment=right"});
  CHECK_CLI(r, 0);
  CHECK(r.err.empty());
  const std::string header = "# effective config\n";
  REQUIRE(r.out.rfind(header, 0) == 0);
  // The printed TOML is loadable and is exactly the defaults + file + overrides.
  const std::string printed = dir.file("printed.toml");
  write_bytes(printed, r.out.substr(header.size()));
  RunConfig back;
  load_config_file(back, printed);
  RunConfig expected = RunConfig::defaults();
  load_config_file(expected, config);
  apply_overrides(expected, {"--model.d_model=24", "--train.steps=700", "--train.out_dir=" + out_dir,
                             "--model.cross_alignment=right"});
  CHECK(config_to_json(back) == config_to_json(expected));
  CHECK(back.model.d_model == 24);  // the override wins over the file
  CHECK(back.model.n_heads == 8);
  CHECK(back.optim.lr == 0.002);
  CHECK_FALSE(fs::exists(out_dir));

  // A JSON config too.
  const std::string json = dir.file("run.json");
  write_bytes(json, R"({"train": {"steps": 1100}})");
  CliResult j = run_relgrad({"train", "-c", json, "--dry-run"});
  CHECK_CLI(j, 0);
  CHECK(contains(j.out, "\n[train]\nsteps = 1100\n"));
}

TEST_CASE("cli: train --help-config lists every key") {
  CliResult r = run_relgrad({"train", "--help-config"});
  CHECK_CLI(r, 0);
  CHECK(r.out == config_help());
  for (const char* key : {"model.d_model (integer)", "model.cross.out_of_range", "optim.lr (number)", "train.plot_format"})
    CHECK_MESSAGE(contains(r.out, key), key);
  CliResult help = run_relgrad({"--help"});
  CHECK_CLI(help, 0);
  CHECK(contains(help.out, "train"));
}

// CLI11 hands a parent's footer down to its subcommands: each command's --help would end with the synopsis
// of all fifteen. It shows its own; `relgrad --help` keeps the list.
TEST_CASE("cli: a command's --help shows its own synopsis, relgrad --help every command's") {
  using namespace relgrad::cli_detail;
  CHECK(contains(run_relgrad({"--help"}).out, "Synopsis:\n" + synopsis_text()));
  const std::vector<SubcommandEntry> table = subcommands();
  for (const SubcommandEntry& c : table) {
    INFO(c.name);
    CliResult sub = run_relgrad({c.name, "--help"});
    CHECK_CLI(sub, 0);
    CHECK(contains(sub.out, "Synopsis:\n" + synopsis_text(c)));
    for (const SubcommandEntry& other : table)
      if (&other != &c) CHECK_FALSE(contains(sub.out, "  relgrad " + std::string(other.name) + " "));
    CHECK_FALSE(contains(sub.out, "relgrad --version"));
  }
}

TEST_CASE("cli: the subcommand table gives the parser, the synopsis and the unknown-command list") {
  using namespace relgrad::cli_detail;
  CliResult help = run_relgrad({"--help"});
  CHECK_CLI(help, 0);
  CHECK(contains(help.out, "Synopsis:\n" + synopsis_text()));
  for (const SubcommandEntry& c : subcommands()) {
    INFO(c.name);
    CHECK(contains(synopsis_text(), std::string("  relgrad ") + c.name + " "));  // every command's line
    CHECK(contains(help.out, c.summary));
    CliResult sub = run_relgrad({c.name, "--help"});  // each parses on its own
    CHECK_CLI(sub, 0);
    CHECK(contains(sub.out, c.summary));
  }
  CHECK(command_names_text() ==
        "train, sample, eval, inspect, render, probe, experiments, music-bench, length-bench, addition-bench, "
        "cope-bench, context-bench, bench, tokenize, plot");
  CliResult unknown = run_relgrad({"fly"});
  CHECK_CLI(unknown, 2);
  CHECK(unknown.err == "relgrad: error: unknown command 'fly' (commands: " + command_names_text() + ")\n");
}

TEST_CASE("cli: usage errors exit 2 and name what is wrong") {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::string bad_toml = dir.file("bad.toml");
  write_bytes(bad_toml, "[model]\nd_model = = 16\n");
  const std::string bad_key_toml = dir.file("typo.toml");
  write_bytes(bad_key_toml, "[optim]\nlearning_rate = 0.1\n");
  for (const Case& k : std::vector<Case>{
           {{"train", "--dry-run", "--model.dmodel=16"}, "unknown key 'model.dmodel' (did you mean 'model.d_model'?)"},
           {{"train", "--dry-run", "--model.d_model=abc"}, "model.d_model: expected an integer, got 'abc'"},
           {{"train", "--dry-run", "--model.pre_norm=maybe"}, "model.pre_norm"},
           {{"train", "--dry-run", "--optim.name=lion"}, "optim.name: expected one of sgd, adam, adamw"},
           {{"train", "--dry-run", "--model.d_model=30"}, "d_model 30 must be divisible by n_heads 4"},
           {{"train", "--dry-run", "--bogus"}, "'--bogus' is neither an option of relgrad train nor a --key=value override"},
           {{"train", "--dry-run", "model.d_model=16"}, "model.d_model=16"},
           {{"train", "--config", bad_toml}, bad_toml + ":2:"},
           {{"train", "--config", bad_key_toml}, bad_key_toml + ": unknown key 'optim.learning_rate'"},
           {{"eval", "x.safetensors", "--frobnicate"}, "frobnicate"},
           {{"eval", "x.safetensors", "--batches", "0"}, "--batches must be >= 1"},
           {{"eval", "x.safetensors", "--input", "1 2"}, "--input / --target only go with --dump-logits"},
           {{"sample"}, "checkpoint"},
           {{"sample", "x.safetensors", "--num", "0"}, "num"},
           // Each kind of check a subcommand declares (train/command/command_line.cpp): a range of
           // reals, of int64_t, a set of names, and an option that takes one value only.
           {{"sample", "x.safetensors", "--top-p", "2"}, "--top-p: 2 is not in (0, 1]"},
           {{"probe", "x.safetensors", "--reach", "-1"}, "--reach: -1 is not in [0, 1048576]"},
           {{"sample", "x.safetensors", "--format", "wav"}, "--format: wav not in {text,midi}"},
           {{"probe", "x.safetensors", "--delta", "1", "2"}, "'2' is neither an option of relgrad probe"},
           {{"fly"}, "unknown command 'fly'"},
           {{}, "subcommand"},
       }) {
    INFO("relgrad ", joined(k.args));
    CliResult r = run_relgrad(k.args);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, k.expected), r.err);
    CHECK(contains(r.err, "error"));
  }
  // A missing config file: an error (not success), naming the file.
  const std::string missing = dir.file("nope.toml");
  CliResult r = run_relgrad({"train", "--config", missing, "--dry-run"});
  CHECK(r.code != 0);
  CHECK_MESSAGE(contains(r.err, missing), r.err);
  CHECK(r.err.rfind("relgrad train: error: ", 0) == 0);
}

// ---- a full run and the commands on its checkpoint ---------------------------------------------------

TEST_CASE("cli: a tiny train writes checkpoint, log and plot — inspect, eval and sample read them") {
  const TrainedRun& t = trained();
  CHECK(contains(t.result.out, "# effective config"));
  CHECK(contains(t.result.out, "encoder-decoder model, "));
  CHECK(contains(t.result.out, "greedy samples on held-out sequences:"));
  CHECK(contains(t.result.out, "/1 exact"));
  CHECK(contains(t.result.out, "done: 6 steps"));
  CHECK(fs::is_regular_file(t.checkpoint));
  CHECK(fs::is_regular_file(t.log));
  CHECK(contains(read_bytes(t.run + "/loss.svg"), "<svg"));
  CHECK(load_checkpoint(t.checkpoint).meta.step == 6);

  SUBCASE("png plot") {
    TempDir dir;
    CliResult r = run_relgrad(concat({"train"}, concat(tiny(dir.file("png")), {"--train.plot_format=png", "--train.steps=2",
                                                                          "--train.samples=0"})));
    CHECK_CLI(r, 0);
    CHECK(read_bytes(dir.file("png/loss.png")).rfind("\x89PNG\r\n\x1a\n", 0) == 0);
    CHECK_FALSE(fs::exists(dir.file("png/loss.svg")));
  }
  SUBCASE("inspect") {
    CliResult r = run_relgrad({"inspect", t.checkpoint});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "step            6\n"));
    CHECK(contains(r.out, "optimizer       AdamW\n"));
    CHECK(contains(r.out, "\ntensors\n"));
    CHECK(contains(r.out, "  model.decoder.embed.weight"));
    CHECK(contains(r.out, "float32"));
    CHECK(contains(r.out, "(ok: matches the data section)"));
    CHECK(contains(r.out, "\nconfig\n[model]\n"));
    // One table line per tensor of the file.
    LoadedRun run = load_run(t.checkpoint);
    for (const auto& entry : run.checkpoint.model) {
      const std::string& name = entry.first;
      CHECK_MESSAGE(contains(r.out, "  model." + name + " "), name);
    }
  }
  SUBCASE("eval") {
    CliResult r = run_relgrad({"eval", t.checkpoint, "--batches", "3"});
    CHECK_CLI(r, 0);
    LoadedRun run = load_run(t.checkpoint);
    RunData data(run.config);
    EvalResult e = evaluate(*run.model, data.dataset(), 3);
    std::string expected = "step 6: held-out loss " + fixed(e.loss, 4) + ", token accuracy " + fixed(100 * e.accuracy, 2) +
                           "% (" + std::to_string(e.tokens) + " tokens), sequence accuracy " +
                           fixed(100 * e.sequence_accuracy, 2) + "% (" + std::to_string(e.sequences) + " sequences)\n";
    CHECK(r.out == expected);
    CHECK(e.sequences == 12);
  }
  SUBCASE("eval --dump-logits: held-out batch 0") {
    TempDir dir;
    const std::string dump = dir.file("logits.safetensors");
    CliResult r = run_relgrad({"eval", t.checkpoint, "--dump-logits", dump});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, dump));
    SafetensorsFile f = load_safetensors(dump);
    for (const char* k : {"logits", "src", "tgt_in", "tgt_out", "src_padding_mask", "tgt_padding_mask"})
      REQUIRE_MESSAGE(f.tensors.count(k) == 1, k);
    LoadedRun run = load_run(t.checkpoint);
    RunData data(run.config);
    Batch b = data.batch(0, Split::HeldOut);
    CHECK(bitwise_equal(f.tensors["src"], b.src));
    CHECK(bitwise_equal(f.tensors["tgt_out"], b.tgt_out));
    NoGradGuard no_grad;
    run.model->module->eval();
    Tensor logits = encoder_decoder_of(*run.model).forward(f.tensors["src"], f.tensors["tgt_in"], f.tensors["src_padding_mask"],
                                                       f.tensors["tgt_padding_mask"]);
    CHECK(bitwise_equal(f.tensors["logits"], logits));
    CHECK(f.metadata["step"] == "6");
  }
  SUBCASE("eval --dump-logits with --input and --target") {
    TempDir dir;
    const std::string dump = dir.file("logits.safetensors");
    CliResult r = run_relgrad({"eval", t.checkpoint, "--dump-logits", dump, "--input", "3 1 4 1", "--target", "1 4"});
    CHECK_CLI(r, 0);
    SafetensorsFile f = load_safetensors(dump);
    CHECK(f.tensors["src"].to_vector<int64_t>() == std::vector<int64_t>{6, 4, 7, 4});
    CHECK(f.tensors["tgt_in"].to_vector<int64_t>() == std::vector<int64_t>{kBos, 4, 7});
    LoadedRun run = load_run(t.checkpoint);
    NoGradGuard no_grad;
    run.model->module->eval();
    Tensor logits = encoder_decoder_of(*run.model).forward(f.tensors["src"], f.tensors["tgt_in"]);
    CHECK(f.tensors["logits"].shape() == Shape{1, 3, run.config.model.vocab_size});
    CHECK(bitwise_equal(f.tensors["logits"], logits));
    // Only --input: the decoder sees <bos> alone.
    CHECK_CLI(run_relgrad({"eval", t.checkpoint, "--dump-logits", dump, "--input", "5"}), 0);
    CHECK(load_safetensors(dump).tensors["logits"].shape() == Shape{1, 1, run.config.model.vocab_size});
  }
  SUBCASE("sample") {
    CliResult held = run_relgrad({"sample", t.checkpoint, "--num", "2"});
    CHECK_CLI(held, 0);
    size_t inputs = 0;
    for (size_t at = held.out.find("input  "); at != std::string::npos; at = held.out.find("input  ", at + 1)) ++inputs;
    CHECK(inputs == 2);
    CHECK(contains(held.out, "target "));
    CHECK(contains(held.out, "model  "));
    CliResult given = run_relgrad({"sample", t.checkpoint, "--input", "1 2 3", "--temperature", "0"});
    CHECK_CLI(given, 0);
    CHECK(given.out.rfind("input  1 2 3\nmodel  ", 0) == 0);
    CHECK_FALSE(contains(given.out, "target"));
    CliResult again = run_relgrad({"sample", t.checkpoint, "--input", "1 2 3", "--temperature", "0"});
    CHECK(again.out == given.out);  // greedy is deterministic
  }
  SUBCASE("a bad token is a usage error naming it") {
    CliResult r = run_relgrad({"sample", t.checkpoint, "--input", "1 x 3"});
    CHECK_CLI(r, 2);
    CHECK(contains(r.err, "'x' is not a token of this model's vocabulary"));
    TempDir dir;
    CliResult e = run_relgrad({"eval", t.checkpoint, "--dump-logits", dir.file("d.safetensors"), "--input", "1 2", "--target", "7x"});
    CHECK_CLI(e, 2);
    CHECK(contains(e.err, "'7x'"));
    CHECK_FALSE(fs::exists(dir.file("d.safetensors")));
    CliResult p = run_relgrad({"sample", t.checkpoint, "--prompt", "abc"});
    CHECK_CLI(p, 2);
  }
  SUBCASE("train --resume continues the run") {
    TempDir dir;
    const std::string copy = dir.file("copy.safetensors");
    write_bytes(copy, read_bytes(t.checkpoint));
    CliResult r = run_relgrad({"train", "--resume", copy, "--train.steps=8", "--train.out_dir=" + dir.file("more"), "--train.samples=0"});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "resumed from " + copy + " at step 6"));
    CHECK(load_checkpoint(dir.file("more/checkpoint.safetensors")).meta.step == 8);
  }
  SUBCASE("plot") {
    TempDir dir;
    const std::string png = dir.file("curves.png");
    CliResult r = run_relgrad({"plot", t.log, "-o", png});
    CHECK_CLI(r, 0);
    CHECK(read_bytes(png).rfind("\x89PNG", 0) == 0);
  }
}

// ---- failures overwrite nothing ----------------------------------------------------------------------

TEST_CASE("cli: a corrupt or missing checkpoint is exit 1 naming the file, and nothing is overwritten") {
  const TrainedRun& t = trained();
  TempDir dir;
  const std::string good = read_bytes(t.checkpoint);
  std::string flipped_bytes = good;
  flipped_bytes[safetensors_data_start(good) + 100] ^= 0x01;
  const std::string flipped = dir.file("flipped.safetensors"), cut = dir.file("cut.safetensors");
  write_bytes(flipped, flipped_bytes);
  write_bytes(cut, good.substr(0, good.size() - 64));
  const std::string existing = dir.file("existing.safetensors");
  write_bytes(existing, "keep me");

  for (const std::string& bad : {flipped, cut}) {
    CAPTURE(bad);
    const bool is_flip = bad == flipped;
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"sample", bad}, {"eval", bad}, {"inspect", bad}, {"eval", bad, "--dump-logits", existing},
             {"train", "--resume", bad, "--train.out_dir=" + dir.file("resumed")}}) {
      INFO("relgrad ", joined(args));
      CliResult r = run_relgrad(args);
      CHECK_CLI(r, 1);
      CHECK_MESSAGE(contains(r.err, bad), r.err);
      if (is_flip) CHECK_MESSAGE(contains(r.err, "checksum"), r.err);
    }
    CHECK(read_bytes(existing) == "keep me");
    CHECK_FALSE(fs::exists(dir.file("resumed/checkpoint.safetensors")));
  }
  // With --config as well, the checkpoint is read by the trainer's resume: still exit 1.
  {
    const std::string config = dir.file("tiny.toml");
    write_bytes(config, "[train]\nsteps = 8\n");
    CliResult r = run_relgrad(concat({"train", "--resume", flipped, "--config", config}, tiny(dir.file("resumed2"))));
    CHECK_CLI(r, 1);
    CHECK(contains(r.err, "checksum"));
  }
  // inspect still shows what it can of a flipped file.
  CliResult shown = run_relgrad({"inspect", flipped});
  CHECK(contains(shown.out, "MISMATCH"));
  CHECK(contains(shown.out, "model.decoder.embed.weight"));

  const std::string missing = dir.file("missing.safetensors");
  for (const char* command : {"sample", "eval", "inspect"}) {
    CliResult r = run_relgrad({command, missing});
    CHECK_CLI(r, 1);
    CHECK(contains(r.err, missing));
    CHECK(contains(r.err, std::string("relgrad ") + command + ": error: "));
  }
  CliResult r = run_relgrad({"train", "--resume", missing});
  CHECK_CLI(r, 1);
  CHECK(contains(r.err, missing));
}

TEST_CASE("cli: train with a bad config or a refused resume leaves an existing run's files as they were") {
  const TrainedRun& t = trained();
  TempDir dir;
  const std::string run = dir.file("run");
  fs::create_directories(run);
  for (const char* name : {"checkpoint.safetensors", "log.jsonl", "loss.svg"})
    write_bytes(run + "/" + name, read_bytes(t.run + "/" + name));
  auto unchanged = [&] {
    for (const char* name : {"checkpoint.safetensors", "log.jsonl", "loss.svg"})
      CHECK_MESSAGE(read_bytes(run + "/" + name) == read_bytes(t.run + "/" + name), name);
    CHECK_FALSE(fs::exists(run + "/checkpoint.prev.safetensors"));
    CHECK_FALSE(fs::exists(run + "/log.prev.jsonl"));
  };
  const std::string bad_toml = dir.file("bad.toml");
  write_bytes(bad_toml, "[model\n");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string expected;
  };
  for (const Case& k : std::vector<Case>{
           {concat({"train"}, concat(tiny(run), {"--model.d_model=15"})), 2, "divisible"},
           {concat({"train"}, concat(tiny(run), {"--model.dmodel=16"})), 2, "model.dmodel"},
           {concat({"train", "--config", bad_toml}, tiny(run)), 2, bad_toml},
           {concat({"train"}, concat(tiny(run), {"--model.type=decoder-only", "--data.source=text",
                                                 "--data.text_path=" + dir.file("no_corpus.txt")})),
            1, dir.file("no_corpus.txt")},
           {concat({"train", "--resume", run + "/checkpoint.safetensors"}, {"--model.d_model=32", "--train.out_dir=" + run}),
            1, "model.d_model"},
       }) {
    INFO("relgrad ", joined(k.args));
    CliResult r = run_relgrad(k.args);
    CHECK_CLI(r, k.code);
    CHECK_MESSAGE(contains(r.err, k.expected), r.err);
    unchanged();
  }
}

TEST_CASE("cli: plot of a missing or malformed log is exit 1 and leaves the output image alone") {
  TempDir dir;
  const std::string image = dir.file("loss.svg");
  write_bytes(image, "previous image");
  const std::string malformed = dir.file("log.jsonl");
  write_bytes(malformed, "{\"event\":\"train\",\"step\":1,\"loss\":2.0}\nnot json at all\n{\"event\":\"train\",\"step\":2,\"loss\":1.0}\n");
  const std::string empty = dir.file("empty.jsonl");
  write_bytes(empty, "");
  for (const std::string& log : {dir.file("missing.jsonl"), malformed, empty}) {
    CAPTURE(log);
    CliResult r = run_relgrad({"plot", log, "-o", image});
    CHECK_CLI(r, 1);
    CHECK_MESSAGE(contains(r.err, log), r.err);
    CHECK(read_bytes(image) == "previous image");
  }
  // Without -o the default output is loss.svg next to the log: also untouched.
  CliResult r = run_relgrad({"plot", malformed});
  CHECK_CLI(r, 1);
  CHECK(read_bytes(image) == "previous image");
}

TEST_CASE("cli: a byte-level text model: train, sample --prompt, eval --dump-logits --input") {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 30; ++k) text += "In the beginning was the word, line " + std::to_string(k) + ".\n";
  const std::string corpus = dir.file("corpus.txt");
  write_bytes(corpus, text);
  const std::string run = dir.file("lm");
  CliResult r = run_relgrad({"train", "--model.type=decoder-only", "--data.source=text", "--data.text_path=" + corpus,
                     "--data.context=16", "--data.batch_size=4", "--data.val_fraction=0.2", "--model.d_model=16",
                     "--model.n_heads=2", "--model.d_ff=32", "--model.n_decoder_layers=1", "--model.decoder_self.scheme=rope",
                     "--optim.warmup_steps=1", "--train.steps=2", "--train.eval_batches=1", "--train.samples=1",
                     "--sample.max_new_tokens=8", "--train.target_accuracy=0", "--train.out_dir=" + run});
  CHECK_CLI(r, 0);
  CHECK(contains(r.out, "decoder-only model, "));
  CHECK(contains(r.out, "sample (prompt: the first 32 bytes of the validation text):"));
  const std::string ck = run + "/checkpoint.safetensors";

  CliResult s = run_relgrad({"sample", ck, "--prompt", "In the", "--max-new-tokens", "5", "--num", "2", "--seed", "7"});
  CHECK_CLI(s, 0);
  CHECK(s.out.rfind("window 16 tokens (data.context = 16; rope is not known to extrapolate)", 0) == 0);
  CHECK(contains(s.out, "\n--- sample 0 (seed 7)\nIn the"));  // after the window line
  CHECK(contains(s.out, "--- sample 1 (seed 8)\nIn the"));
  CHECK_CLI(run_relgrad({"sample", ck, "--input", "1 2"}), 2);

  const std::string dump = dir.file("lm_logits.safetensors");
  CHECK_CLI(run_relgrad({"eval", ck, "--dump-logits", dump, "--input", "abc"}), 0);
  SafetensorsFile f = load_safetensors(dump);
  CHECK(f.tensors["tokens"].to_vector<int64_t>() == std::vector<int64_t>{97, 98, 99});
  LoadedRun loaded = load_run(ck);
  NoGradGuard no_grad;
  loaded.model->module->eval();
  CHECK(bitwise_equal(f.tensors["logits"], decoder_lm_of(*loaded.model).forward(f.tensors["tokens"])));
  CHECK(f.tensors["logits"].shape() == Shape{1, 3, 256});
  CHECK_CLI(run_relgrad({"eval", ck, "--dump-logits", dump, "--input", "abc", "--target", "d"}), 2);
}

TEST_CASE("cli: refusals added with the trainer name what is wrong and write nothing") {
  TempDir dir;
  // CUDA asked for where there is none: refused up front with the reason, as a config error
  // (tests/test_cuda_train.cpp has the details).
  if (!cuda_available()) {
    CliResult cuda = run_relgrad(concat({"train"}, concat(tiny(dir.file("cuda")), {"--train.device=cuda"})));
    CHECK_CLI(cuda, 2);
    CHECK(contains(cuda.err, "train.device = cuda, but "));
    CHECK_FALSE(fs::exists(dir.file("cuda")));
  }
  // An out_dir that is a file.
  write_bytes(dir.file("a_file"), "x");
  CliResult file_dir = run_relgrad(concat({"train"}, tiny(dir.file("a_file"))));
  CHECK_CLI(file_dir, 1);
  CHECK(contains(file_dir.err, "is not a directory"));
  CHECK(read_bytes(dir.file("a_file")) == "x");
  // A config file too large to be a config (read_file's limit, 1 MiB).
  write_bytes(dir.file("huge.toml"), std::string((1u << 20) + 1, '#'));
  CliResult huge = run_relgrad({"train", "--config", dir.file("huge.toml"), "--dry-run"});
  CHECK(huge.code != 0);
  CHECK(contains(huge.err, "more than the limit"));
  // experiments: an unknown experiment name.
  CliResult only = run_relgrad({"experiments", "--only", "D9", "--out", dir.file("exp.md")});
  CHECK_CLI(only, 2);
  CHECK(contains(only.err, "--only D9: expected D1, D2, D3 or D6"));
  CHECK_FALSE(fs::exists(dir.file("exp.md")));
}
