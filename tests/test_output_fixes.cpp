// What relgrad prints and writes, checked where users stumbled: sampling from a checkpoint needs its
// vocabulary, not its corpus (extra.vocab, docs/checkpoint-format.md 1.3); resuming a finished
// checkpoint writes no duplicate record and is refused into another directory; sampled text is
// escaped for the terminal; probe tables print "." for every empty cell; a damaged .jsonl log is
// reported as JSON; language models report no sequence accuracy; PNGs are compressed.
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_testing.h"
#include "core/safetensors.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/run_options.h"
#include "train/data/token_file.h"
#include "train/instruments/probe.h"
#include "train/plot/plot.h"
#include "train/trainer/checkpoint.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// The current directory for a scope, then the one before.
struct InDirectory {
  explicit InDirectory(const fs::path& dir) : before(fs::current_path()) { fs::current_path(dir); }
  ~InDirectory() { fs::current_path(before); }
  fs::path before;
};

// A small decoder-only run (two steps) on the data `data_args` name, with paths relative to `dir`.
CliResult train_lm(const std::string& dir, const std::vector<std::string>& data_args,
                   const std::vector<std::string>& extra = {}) {
  InDirectory here(dir);
  std::vector<std::string> args = {"train",
                                   "--model.type=decoder-only",
                                   "--model.d_model=16",
                                   "--model.n_heads=2",
                                   "--model.d_ff=32",
                                   "--model.n_decoder_layers=1",
                                   "--model.decoder_self.scheme=rope",
                                   "--data.context=16",
                                   "--data.batch_size=4",
                                   "--optim.warmup_steps=1",
                                   "--train.steps=2",
                                   "--train.eval_batches=1",
                                   "--train.samples=0",
                                   "--train.out_dir=run"};
  args.insert(args.end(), data_args.begin(), data_args.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return run_relgrad(args);
}

std::string corpus_text() {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "In the beginning God created the heaven and the earth.\n";
  return text;
}

// The checkpoint at `from` written to `to` with its metadata edited, the header checksum recomputed
// (as a writer that knows the format would: only the meaning of the edit is left to refuse).
template <class Edit>
void rewrite_metadata(const std::string& from, const std::string& to, Edit edit) {
  SafetensorsFile f = load_safetensors(from);
  auto md = f.metadata;
  edit(md);
  md["header_checksum"] = checksum_hex(checkpoint_header_checksum(md, f.tensors));
  save_safetensors(to, f.tensors, md);
}

// A token model of 50 ids trained in `dir` on dir/ids.tok (a relative token_path); its checkpoint is
// dir/run/checkpoint.safetensors.
void train_token_lm(const TempDir& dir) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 400; ++i) ids.push_back((i * 7) % 50);
  write_token_file(dir.file("ids.tok"), ids, 50);
  CliResult t = train_lm(dir.path.string(), {"--data.source=tokens", "--data.token_path=ids.tok"});
  REQUIRE_MESSAGE(t.code == 0, t.err);
}

}  // namespace

// ---- the vocabulary in the checkpoint ------------------------------------------------------------

TEST_CASE("output: a text model samples from another directory than its relative corpus (extra.vocab)") {
  TempDir trained, elsewhere;
  write_bytes(trained.file("corpus.txt"), corpus_text());
  CliResult t = train_lm(trained.path.string(), {"--data.source=text", "--data.text_path=corpus.txt"});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  const std::string ck = trained.file("run/checkpoint.safetensors");
  CHECK(load_checkpoint(ck).meta.extra.at("vocab") == R"({"kind":"bytes","size":256})");

  InDirectory here(elsewhere.path);  // data.text_path = corpus.txt is not here
  CliResult s = run_relgrad({"sample", ck, "--prompt", "In the", "--max-new-tokens", "4"});
  CHECK_CLI(s, 0);
  CHECK(contains(s.out, "\n--- sample 0 (seed 0)\nIn the"));  // after the window line
  CliResult d = run_relgrad({"eval", ck, "--dump-logits", elsewhere.file("x.safetensors"), "--input", "In"});
  CHECK_CLI(d, 0);
  // What needs the data still needs it, and says where it looked.
  CliResult p = run_relgrad({"probe", ck, "--out", elsewhere.file("p")});
  CHECK_CLI(p, 1);
  CHECK(contains(p.err, "cannot open 'corpus.txt'"));
  CHECK(contains(p.err, "data.text_path = 'corpus.txt' is relative to the current directory, " +
                            fs::current_path().string()));
}

TEST_CASE("output: a token model loads from its stored vocabulary size, an older checkpoint as before") {
  TempDir trained, elsewhere;
  train_token_lm(trained);
  const std::string ck = trained.file("run/checkpoint.safetensors");
  CHECK(load_checkpoint(ck).meta.extra.at("vocab") == R"({"kind":"ids","size":50})");
  // Without extra.vocab (a checkpoint written before it existed), sizes come from the token file.
  const std::string old = trained.file("old.safetensors");
  rewrite_metadata(ck, old, [](auto& md) { md.erase("extra.vocab"); });

  InDirectory here(elsewhere.path);  // ids.tok is not here
  LoadedRun run = load_run(ck);
  CHECK(run.vocab.size == 50);
  CHECK(run.config.model.vocab_size == 50);
  RunData data(run.config);
  CHECK(data.vocab().size == 50);  // no file opened
  CHECK(data.vocab().name(49) == "49");
  CHECK(static_cast<bool>(data.tokens()));
  CHECK(!data.text());
  CliResult d =
      run_relgrad({"eval", ck, "--dump-logits", elsewhere.file("x.safetensors"), "--input", "1 2 3"});
  CHECK_CLI(d, 0);
  check_throws_with([&] { data.batch(0, Split::HeldOut); }, "data.token_path = 'ids.tok' is relative");
  check_throws_with([&] { load_run(old); }, "ids.tok");
  {
    InDirectory back(trained.path);
    LoadedRun o = load_run(old);
    CHECK(o.vocab.size == 0);
    CHECK(o.config.model.vocab_size == 50);
  }
}

TEST_CASE(
    "output: extra.vocab that disagrees with the checkpoint or is malformed is refused, naming the file") {
  TempDir dir;
  write_bytes(dir.file("corpus.txt"), corpus_text());
  CliResult t = train_lm(dir.path.string(), {"--data.source=text", "--data.text_path=corpus.txt"});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  const std::string ck = dir.file("run/checkpoint.safetensors"), bad = dir.file("bad.safetensors");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"kind":"ids","size":256})", "is a vocabulary of ids, but data.source = \"text\" has bytes"},
      {R"({"kind":"bytes","size":255})", "of bytes must have size 256, got 255"},
      {R"({"kind":"bytes","size":256,"names":[]})", "has the unknown key 'names'"},
      {R"({"kind":"bytes","kind":"bytes","size":256})", "has the key 'kind' twice"},
      {R"({"kind":"bytes","size":0})", "size 0 is out of range"},
      {R"(["bytes"])", "must be a JSON object"},
      {R"({"kind":"bytes")", "is not JSON"},
  };
  for (const auto& entry : cases) {
    const auto& json = entry.first;
    const auto& message = entry.second;
    INFO(json);
    rewrite_metadata(ck, bad, [&](auto& md) { md["extra.vocab"] = json; });
    check_throws_with([&] { load_run(bad); }, "[checkpoint] " + bad + ": extra.vocab ");
    check_throws_with([&] { load_run(bad); }, message);
  }
  // A names vocabulary of another size than the embedding's (a synthetic task's checkpoint).
  CliResult syn =
      run_relgrad({"train", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                   "--model.n_encoder_layers=1", "--model.n_decoder_layers=1", "--model.cross.max_length=8",
                   "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=1", "--train.steps=1",
                   "--train.eval_batches=1", "--train.samples=0", "--train.out_dir=" + dir.file("syn")});
  REQUIRE_MESSAGE(syn.code == 0, syn.err);
  rewrite_metadata(dir.file("syn/checkpoint.safetensors"), bad, [&](auto& md) {
    md["extra.vocab"] = R"({"kind":"names","names":["<pad>","<bos>"],"pad":0,"size":2})";
  });
  check_throws_with([&] { load_run(bad); }, "[checkpoint] " + bad +
                                                ": extra.vocab holds 2 ids, but its config and "
                                                "embedding make a vocabulary of 13");
  // The round trip of each kind.
  Vocab names =
      vocab_from_json(vocab_to_json("synthetic", RunData(RunConfig::defaults()).vocab()), "synthetic");
  CHECK(names.names == RunData(RunConfig::defaults()).vocab().names);
  CHECK(names.pad == kPad);
  CHECK(vocab_from_json(vocab_to_json("text", TextDataset::vocab()), "text").names ==
        TextDataset::vocab().names);
  check_throws_with([] { vocab_from_json(R"({"kind":"names","size":2,"pad":0,"names":["a"]})", "music"); },
                    "needs \"names\" as an array of its 2 names");
  check_throws_with(
      [] { vocab_from_json(R"({"kind":"names","size":2,"pad":2,"names":["a","b"]})", "music"); },
      "pad 2 is not -1 or an id below the size");
}

// ---- resuming a finished checkpoint ----------------------------------------------------------------

TEST_CASE(
    "output: resuming a finished checkpoint adds no record in place and is refused into another directory") {
  TempDir dir;
  write_bytes(dir.file("corpus.txt"), corpus_text());
  CliResult t = train_lm(dir.path.string(), {"--data.source=text", "--data.text_path=corpus.txt"});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  InDirectory here(dir.path);
  const std::string log_before = read_bytes("run/log.jsonl");
  const std::string ck_before = read_bytes("run/checkpoint.safetensors");
  CliResult again = run_relgrad({"train", "--resume", "run/checkpoint.safetensors"});
  CHECK_CLI(again, 0);
  CHECK(contains(again.out, "eval  step 2 | held-out loss "));
  CHECK(read_bytes("run/log.jsonl") == log_before);  // no second eval record at step 2
  CHECK(read_bytes("run/checkpoint.safetensors") == ck_before);

  CliResult moved = run_relgrad({"train", "--resume", "run/checkpoint.safetensors", "--train.out_dir=other"});
  CHECK_CLI(moved, 1);
  CHECK(contains(moved.err,
                 "cannot resume from run/checkpoint.safetensors into train.out_dir other: it is at "
                 "step 2 and train.steps = 2, so there is nothing to train; give --train.steps=N "
                 "with N > 2"));
  CHECK(!fs::exists("other/checkpoint.safetensors"));
  CHECK(!fs::exists("other/log.jsonl"));
  // Training on from there is what a new directory is for.
  CliResult longer = run_relgrad(
      {"train", "--resume", "run/checkpoint.safetensors", "--train.out_dir=other", "--train.steps=3"});
  CHECK_CLI(longer, 0);
  CHECK(fs::exists("other/loss.svg"));
}

// ---- language models: no sequence accuracy ----------------------------------------------------------

TEST_CASE("output: a language model's evaluation reports no sequence accuracy, a synthetic task's does") {
  TempDir dir;
  write_bytes(dir.file("corpus.txt"), corpus_text());
  CliResult t = train_lm(dir.path.string(), {"--data.source=text", "--data.text_path=corpus.txt"});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  CHECK(contains(t.out, "eval  step 2 | held-out loss "));
  for (size_t at = t.out.find("eval  step"); at != std::string::npos; at = t.out.find("eval  step", at + 1))
    CHECK(t.out.substr(at, t.out.find('\n', at) - at).find("sequence") == std::string::npos);
  for (const LogRecord& r : read_training_log(dir.file("run/log.jsonl")))
    CHECK(r.values.count("sequence_accuracy") == 0);

  CliResult s =
      run_relgrad({"train", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                   "--model.n_encoder_layers=1", "--model.n_decoder_layers=1", "--model.cross.max_length=8",
                   "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=1", "--train.steps=1",
                   "--train.eval_batches=1", "--train.samples=0", "--train.out_dir=" + dir.file("syn")});
  REQUIRE_MESSAGE(s.code == 0, s.err);
  CHECK(contains(s.out, "| sequence accuracy "));
  for (const LogRecord& r : read_training_log(dir.file("syn/log.jsonl")))
    if (r.event == "eval") CHECK(r.values.count("sequence_accuracy") == 1);
}

// ---- printable sampled text --------------------------------------------------------------------------

TEST_CASE("output: sampled bytes are escaped for the terminal, valid UTF-8 text kept") {
  CHECK(printable_text("In the beginning\n\tGod") == "In the beginning\n\tGod");
  CHECK(printable_text("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(printable_text(std::string("a\x1b[2Jb\rc\x7f\0d", 11)) == "a\\x1b[2Jb\\x0dc\\x7f\\x00d");
  CHECK(printable_text("\xff\xfe") == "\\xff\\xfe");           // never UTF-8
  CHECK(printable_text("x\xc3") == "x\\xc3");                  // cut off at the end
  CHECK(printable_text("\xc3(") == "\\xc3(");                  // a lead byte without its continuation
  CHECK(printable_text("\xc0\xaf") == "\\xc0\\xaf");           // overlong '/'
  CHECK(printable_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(printable_text("\xc2\x9b"
                       "1m") == "\\xc2\\x9b1m");  // C1 CSI
  CHECK(printable_text("a\\x41") == "a\\\\x41");  // a backslash cannot pose as an escape
}

// ---- probe tables ----------------------------------------------------------------------------------

TEST_CASE("output: a probe table prints '.' for every empty cell, never nan") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ProbeCurve causal{"layers.0.self_attn",
                    "decoder_self",
                    "t5",
                    "response",
                    0,
                    {-2, -1, 0, 1, 2},
                    {0.5, 2.0, 1.0, nan, nan},
                    0.0,
                    {"layers.0.self_attn"}};
  ProbeCurve none = causal;
  none.head = 1;
  none.value = std::vector<double>(5, nan);
  std::string table = probe_table({causal, none});
  CHECK(table.find("nan") == std::string::npos);
  CHECK(contains(table, "  . . 0.5 2 1 . .\n"));  // peak −1: δ = −4 … 2, beyond the curve and undefined alike
  CHECK(contains(table, ".: no value"));
}

// ---- training logs ---------------------------------------------------------------------------------

TEST_CASE("output: a damaged .jsonl log is reported as JSON, not as a CSV header") {
  TempDir dir;
  write_bytes(dir.file("log.jsonl"), "garbage, not a log\n{\"event\":\"train\",\"step\":1,\"loss\":1}\n");
  check_throws_with([&] { read_training_log(dir.file("log.jsonl")); },
                    dir.file("log.jsonl") + ":1: invalid JSON");
  write_bytes(dir.file("log.csv"), "event,step,loss\ntrain,1,2\n");
  CHECK(read_training_log(dir.file("log.csv")).size() == 1);
  write_bytes(dir.file("log.txt"),
              "{\"event\":\"train\",\"step\":1,\"loss\":1}\n");  // other names: by content
  CHECK(read_training_log(dir.file("log.txt")).size() == 1);
}

// ---- PNG -------------------------------------------------------------------------------------------

TEST_CASE("output: PNGs are compressed and hold exactly the pixels given") {
  // Noise in one corner (incompressible), flat colour elsewhere, as a plot is.
  const int w = 300, h = 200;
  std::vector<uint8_t> rgb(size_t(w) * h * 3, 255);
  uint32_t x = 12345;
  for (int y = 0; y < 40; ++y)
    for (int c = 0; c < 40 * 3; ++c)
      x = x * 1103515245u + 12345u, rgb[size_t(y) * w * 3 + c] = uint8_t(x >> 24);
  std::string png = plot_detail::encode_png(w, h, rgb);
  REQUIRE(png.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  std::string idat;
  for (size_t pos = 8; pos + 12 <= png.size();) {
    uint32_t len = 0;
    for (int k = 0; k < 4; ++k) len = len << 8 | static_cast<unsigned char>(png[pos + k]);
    if (png.compare(pos + 4, 4, "IDAT") == 0) idat += png.substr(pos + 8, len);
    pos += 12 + len;
  }
  std::string raw(size_t(h) * (1 + size_t(w) * 3), '\0');
  uLongf size = raw.size();
  REQUIRE(uncompress(reinterpret_cast<Bytef*>(raw.data()), &size, reinterpret_cast<const Bytef*>(idat.data()),
                     idat.size()) == Z_OK);
  REQUIRE(size == raw.size());
  std::vector<uint8_t> back;
  for (int y = 0; y < h; ++y) {
    CHECK(raw[size_t(y) * (1 + w * 3)] == 0);  // filter none
    back.insert(back.end(), raw.begin() + long(y * (1 + w * 3) + 1),
                raw.begin() + long((y + 1) * (1 + w * 3)));
  }
  CHECK(back == rgb);
  CHECK(png.size() < raw.size() / 10);  // stored blocks were raw.size() and more

  TempDir dir;
  PlotPanel p{"loss", "step", "loss", false, {{"train", {1, 2, 3}, {3, 2, 1}}}};
  write_plot(dir.file("loss.png"), {p});
  CHECK(fs::file_size(dir.file("loss.png")) < 100000);  // 900 x 360 pixels: 972 kB stored
}

// ---- the commands (train/command/subcommands/): sample, eval, inspect ---------------------------------

TEST_CASE("output cli: sampled text escapes control bytes and invalid UTF-8") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 60; ++i) text += "In the beginning God created the heaven and the earth.\n";
  write_bytes(dir.file("corpus.txt"), text);
  CliResult t = train_lm(dir.path.string(), {"--data.source=text", "--data.text_path=corpus.txt"});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  CHECK(!contains(t.out, "sequence accuracy"));  // a language model: neither per evaluation nor at the end
  // The prompt is printed with the sample: an escape sequence and a byte that is never UTF-8.
  CliResult s = run_relgrad({"sample", dir.file("run/checkpoint.safetensors"), "--prompt",
                             "a\x1b[2Jb\xff\xc3\xa9", "--max-new-tokens", "3"});
  CHECK_CLI(s, 0);
  CHECK(contains(s.out, "\n--- sample 0 (seed 0)\na\\x1b[2Jb\\xff\xc3\xa9"));  // after the window line
  CHECK(s.out.find('\x1b') == std::string::npos);
  InDirectory here(dir.path);  // eval reads the held-out text: data.text_path = corpus.txt
  CliResult e = run_relgrad({"eval", "run/checkpoint.safetensors", "--batches", "1"});
  CHECK_CLI(e, 0);
  CHECK(contains(e.out, "token accuracy"));
  CHECK(!contains(e.out, "sequence accuracy"));
}

TEST_CASE("output cli: a token model samples with --input where its token file is not") {
  TempDir trained, elsewhere;
  train_token_lm(trained);
  InDirectory here(elsewhere.path);
  const std::string ck = trained.file("run/checkpoint.safetensors");
  CliResult s = run_relgrad({"sample", ck, "--input", "1 2 3", "--max-new-tokens", "2"});
  CHECK_CLI(s, 0);
  CHECK(contains(s.out, "\n--- sample 0 (seed 0)\n1 2 3 "));  // after the window line
  CliResult d = run_relgrad({"sample", ck, "--max-new-tokens", "2"});  // the default prompt is in the file
  CHECK_CLI(d, 1);
  CHECK(contains(d.err, "data.token_path = 'ids.tok' is relative to the current directory"));
}

TEST_CASE("output cli: inspect leaves two spaces after the longest key and tensor name") {
  TempDir dir;
  CliResult t = run_relgrad(
      {"train", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32", "--model.n_encoder_layers=1",
       "--model.n_decoder_layers=1", "--model.encoder_self.scheme=shaw", "--model.cross.max_length=8",
       "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=1", "--train.steps=1",
       "--train.eval_batches=1", "--train.samples=0", "--train.out_dir=" + dir.file("run")});
  REQUIRE_MESSAGE(t.code == 0, t.err);
  CliResult r = run_relgrad({"inspect", dir.file("run/checkpoint.safetensors")});
  CHECK_CLI(r, 0);
  std::istringstream lines(r.out);
  std::string line;
  int extras = 0, tensors = 0, long_names = 0;
  const std::regex extra_line(R"(^extra\.\S+  +\S.*)"),
      tensor_line(R"(^  (\S+)  +(float32|float64|int64|bool) +\(.*)");
  std::smatch m;
  while (std::getline(lines, line)) {
    if (line.rfind("extra.", 0) == 0) {
      CHECK_MESSAGE(std::regex_match(line, extra_line), line);
      ++extras;
    }
    if (line.rfind("  model.", 0) == 0 || line.rfind("  optim.", 0) == 0) {
      CHECK_MESSAGE(std::regex_match(line, m, tensor_line), line);
      ++tensors;
      long_names += m.size() > 1 && m[1].length() > 52;
    }
  }
  CHECK(extras >= 2);  // extra.tokens_seen (17 characters) and extra.vocab
  CHECK(tensors > 10);
  CHECK(long_names > 0);  // model.encoder.layers.0.self_attn.positional.value_table (55 characters)
}
