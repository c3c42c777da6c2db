// What the `relgrad` command says when a user gives it something unexpected, each case fed as a user
// would and checked for its exit code and its message (docs/reliability.md, "Round 3: messages"): a
// logits file under inspect, numbers that are no numbers, a file that is no SoundFont, a MIDI file
// named .wav, a vocabulary too large for memory, benches run at another size, a text model evaluated
// on another text, and the smaller ones (a mistyped command, a quoted TOML number, a long vocabulary,
// picture titles, singulars, offsets that cannot occur).
#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>
#include <variant>

#include "cli_testing.h"
#include "file_testing.h"
#include "testing.h"
#include "train/instruments/probe.h"
#include "train/music/midi.h"
#include "train/music/music.h"
#include "train/plot/plot.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// A tiny encoder-decoder on the reverse task, trained for 2 steps; `extra` adds overrides.
std::string train_tiny(const std::string& run, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{"train", "--train.out_dir=" + run, "--model.d_model=16", "--model.n_heads=2",
                                "--model.d_ff=32", "--model.n_encoder_layers=1", "--model.n_decoder_layers=1",
                                "--model.cross.max_length=8", "--data.num_symbols=6", "--data.min_len=3",
                                "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=1",
                                "--train.steps=2", "--train.eval_batches=1", "--train.samples=0",
                                "--train.target_accuracy=0"};
  for (const std::string& e : extra) args.push_back(e);
  CliResult r = run_relgrad(args);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return run + "/checkpoint.safetensors";
}

const std::string& tiny_checkpoint() {
  static TempDir dir;
  static const std::string path = train_tiny(dir.file("run"));
  return path;
}

size_t longest_line(const std::string& text) {
  size_t longest = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) longest = std::max(longest, line.size());
  return longest;
}

}  // namespace

TEST_CASE("cli messages: inspect says what a --dump-logits file is, not that its checksum is wrong") {
  TempDir dir;
  const std::string logits = dir.file("logits.safetensors");
  CliResult dump = run_relgrad({"eval", tiny_checkpoint(), "--dump-logits", logits});
  REQUIRE_MESSAGE(dump.code == 0, dump.err);
  CliResult r = run_relgrad({"inspect", logits});
  CHECK_CLI(r, 0);
  CHECK_MESSAGE(contains(r.out, "logits written by relgrad eval --dump-logits from " + tiny_checkpoint() +
                                    " at step 2 (no checksum: such files carry none)"),
                r.out);
  CHECK(contains(r.out, "logits "));
  CHECK_FALSE(contains(r.out + r.err, "MISMATCH"));
  CHECK_FALSE(contains(r.out + r.err, "corrupt"));
  // A checkpoint whose data section was changed is still a mismatch, exit 1.
  const std::string damaged = dir.file("damaged.safetensors");
  std::string bytes = read_bytes(tiny_checkpoint());
  bytes[bytes.size() - 3] ^= 0x40;
  write_bytes(damaged, bytes);
  CliResult bad = run_relgrad({"inspect", damaged});
  CHECK_CLI(bad, 1);
  CHECK(contains(bad.out, "checksum        MISMATCH"));
}

TEST_CASE("cli messages: inspect wraps a long vocabulary instead of printing it on one line") {
  TempDir dir;
  const std::string checkpoint = train_tiny(dir.file("run"), {"--data.num_symbols=300"});
  CliResult r = run_relgrad({"inspect", checkpoint});
  CHECK_CLI(r, 0);
  const size_t at = r.out.find("extra.vocab");
  REQUIRE(at != std::string::npos);
  CHECK_MESSAGE(longest_line(r.out.substr(at, r.out.find("\ntensors") - at)) <= 116, r.out.substr(at, 400));
  // Every name is still there, in order: the lines joined back are the stored JSON.
  std::string joined;
  std::istringstream in(r.out.substr(at + 16, r.out.find("\n\ntensors") - at - 16));
  for (std::string line; std::getline(in, line);) joined += line.substr(line.find_first_not_of(' '));
  CHECK(joined.rfind("{\"kind\":\"names\",\"names\":[\"<pad>\"", 0) == 0);
  CHECK(contains(joined, "\"s299\"") + contains(joined, "\"299\"") == 1);
}

TEST_CASE("cli messages: sample's real options refuse NaN and words, naming the option") {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  for (const Case& k : std::vector<Case>{
           {{"--temperature", "nan"}, "--temperature: nan is not a number (FLOAT in [0, 1000000])"},
           {{"--top-p", "nan"}, "--top-p: nan is not a number (FLOAT in (0, 1])"},
           {{"--temperature", "abc"}, "--temperature: 'abc' is not a number (FLOAT in [0, 1000000])"},
           {{"--top-p", "0"}, "--top-p: 0 is not in (0, 1]"},
           {{"--top-p", "1.5"}, "--top-p: 1.5 is not in (0, 1]"},
           {{"-n", "0"}, "-n: 0 is not in [1, 1000]"},
           {{"-n0"}, "-n: 0 is not in [1, 1000]"},
           {{"--num=0"}, "--num: 0 is not in [1, 1000]"},
           {{"-n", "many"}, "-n: 'many' is not an integer (INT in [1, 1000])"},
       }) {
    std::vector<std::string> args{"sample", tiny_checkpoint()};
    args.insert(args.end(), k.args.begin(), k.args.end());
    INFO(k.expected);
    CliResult r = run_relgrad(args);
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, "relgrad sample: error: " + k.expected), r.err);
  }
  // What --help says --top-p takes is what it takes: 1 runs, as does a value just above 0.
  CHECK(contains(run_relgrad({"sample", "--help"}).out, "FLOAT in (0, 1]"));
  CHECK_CLI(run_relgrad({"sample", tiny_checkpoint(), "-n", "1", "--top-p", "1"}), 0);
  CHECK_CLI(run_relgrad({"sample", tiny_checkpoint(), "-n", "1", "--top-p", "0.001", "--temperature", "1"}), 0);
}

TEST_CASE("cli messages: render refuses a --soundfont that is no SoundFont before FluidSynth runs") {
  TempDir dir;
  write_midi(dir.file("a.mid"), midi_of({{60, 80, 0.0, 0.5, 0}}));
  write_bytes(dir.file("notes.txt"), "these are notes, not instruments\n");
  for (const std::string& font : {dir.file("notes.txt"), dir.file("a.mid")}) {
    CliResult r = run_relgrad({"render", dir.file("a.mid"), "--soundfont", font, "-o", dir.file("a.wav")});
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, "[render] --soundfont " + font + " is not a SoundFont"), r.err);
    CHECK_FALSE(fs::exists(dir.file("a.wav")));
  }
  // A RIFF file of form "sfbk" passes the check (then FluidSynth, when installed, reads the rest).
  write_bytes(dir.file("font.sf2"), std::string("RIFF\4\0\0\0sfbk", 12));
  CliResult r = run_relgrad({"render", dir.file("a.mid"), "--soundfont", dir.file("font.sf2"), "-o", dir.file("a.wav")});
  CHECK_FALSE(contains(r.err, "is not a SoundFont"));
}

TEST_CASE("cli messages: sample --format midi refuses an -o that is not named .mid or .midi") {
  TempDir dir;
  for (const std::string name : {"x.wav", "x.mid.txt", "x"}) {
    CliResult r = run_relgrad({"sample", tiny_checkpoint(), "--format", "midi", "-o", dir.file(name)});
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, "[sample] -o " + dir.file(name) +
                                      ": --format midi writes a MIDI file; name it .mid or .midi"),
                  r.err);
    CHECK_FALSE(fs::exists(dir.file(name)));
  }
  // A .mid or .MIDI name passes that check (this synthetic model then cannot write MIDI, and says so).
  for (const std::string name : {"x.mid", "x.MIDI"}) {
    CliResult r = run_relgrad({"sample", tiny_checkpoint(), "--format", "midi", "-o", dir.file(name)});
    CHECK_CLI(r, 2);
    CHECK_MESSAGE(contains(r.err, "--format midi needs a music model or a chorale model"), r.err);
  }
}

TEST_CASE("cli messages: a vocabulary too large for memory names data.num_symbols, and warnings follow validation") {
  TempDir dir;
  CerrCapture warnings;
  CliResult r = run_relgrad({"train", "--train.out_dir=" + dir.file("run"), "--data.num_symbols=1000000000"});
  CHECK_CLI(r, 4);
  CHECK_MESSAGE(contains(r.err, "data.num_symbols = 1000000000"), r.err);
  CHECK_MESSAGE(contains(r.err, "1000000003 ids"), r.err);
  CHECK_FALSE(contains(r.err, "tensors held at most 0 bytes"));
  CHECK_FALSE(fs::exists(dir.file("run/checkpoint.safetensors")));
  // A config refused for another key gets no warning about shortening the warmup.
  CerrCapture refused;
  CliResult bad = run_relgrad({"train", "--train.steps=60", "--model.d_model=30", "--dry-run"});
  CHECK_CLI(bad, 2);
  CHECK(contains(bad.err, "d_model 30 must be divisible by n_heads 4"));
  CHECK_MESSAGE(!contains(refused.text.str(), "warmup"), refused.text.str());
}

TEST_CASE("cli messages: length-bench --tasks foo is a usage error, exit 2, as the other benches") {
  TempDir dir;
  CliResult r = run_relgrad({"length-bench", "--tasks", "foo", "--out", dir.file("out")});
  CHECK_CLI(r, 2);
  CHECK(contains(r.err, "unknown task 'foo'"));
  CliResult t = run_relgrad({"length-bench", "--treatments", "bar", "--out", dir.file("out")});
  CHECK_CLI(t, 2);
  CHECK(contains(t.err, "unknown treatment 'bar'"));
  CHECK_FALSE(fs::exists(dir.file("out")));
}

TEST_CASE("cli messages: a text model is evaluated and probed on another text with --data.text_path") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "In the beginning was the word, and the word was good. ";
  write_bytes(dir.file("a.txt"), text);
  write_bytes(dir.file("b.txt"), text.substr(7) + "And it was so.\n");
  const std::string checkpoint =
      train_tiny(dir.file("run"), {"--model.type=decoder-only", "--data.source=text", "--data.text_path=" + dir.file("a.txt"),
                                   "--data.context=16"});
  fs::remove(dir.file("a.txt"));  // where it was trained is gone: only the other text is here
  CliResult e = run_relgrad({"eval", checkpoint, "--batches", "1", "--data.text_path=" + dir.file("b.txt")});
  CHECK_CLI(e, 0);
  CHECK(contains(e.out, "eval data: data.text_path=" + dir.file("b.txt")));
  CHECK(contains(e.out, "held-out loss"));
  CliResult p = run_relgrad({"probe", checkpoint, "--out", dir.file("probe"), "--data.text_path=" + dir.file("b.txt")});
  CHECK_CLI(p, 0);
  CHECK(contains(p.out, "probe data: data.text_path=" + dir.file("b.txt")));
  // Without it, the message says which option to give.
  CliResult missing = run_relgrad({"eval", checkpoint, "--batches", "1"});
  CHECK_CLI(missing, 1);
  CHECK_MESSAGE(contains(missing.err, "--data.text_path=FILE, which relgrad eval and probe take"), missing.err);
  // probe refuses what is not a data override, and the data keys it cannot change.
  CliResult other = run_relgrad({"probe", checkpoint, "--data.source=tokens"});
  CHECK_CLI(other, 2);
  CHECK(contains(other.err, "[probe] --data.source=tokens: data.source cannot change"));
  CliResult word = run_relgrad({"probe", checkpoint, "--bogus"});
  CHECK_CLI(word, 2);
  CHECK(contains(word.err, "'--bogus' is neither an option of relgrad probe nor a --data.KEY=VALUE override"));
}

TEST_CASE("cli messages: a mistyped command gets a did-you-mean") {
  CliResult r = run_relgrad({"trian"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "unknown command 'trian' (did you mean 'train'?)"), r.err);
  CHECK(contains(run_relgrad({"evl"}).err, "(did you mean 'eval'?)"));
  CHECK_FALSE(contains(run_relgrad({"fly"}).err, "did you mean"));
}

TEST_CASE("cli messages: a TOML string where a number belongs is quoted once and said to be a string") {
  TempDir dir;
  write_bytes(dir.file("run.toml"), "[optim]\nlr = \"1e-3\"\n");
  CliResult r = run_relgrad({"train", "--config", dir.file("run.toml"), "--dry-run"});
  CHECK_CLI(r, 2);
  CHECK_MESSAGE(contains(r.err, "optim.lr: expected a number, got the string \"1e-3\" (write it without quotes)"),
                r.err);
  CHECK_FALSE(contains(r.err, "''"));
  write_bytes(dir.file("steps.toml"), "[train]\nsteps = '5'\n");
  CliResult s = run_relgrad({"train", "--config", dir.file("steps.toml"), "--dry-run"});
  CHECK_CLI(s, 2);
  CHECK_MESSAGE(contains(s.err, "train.steps: expected an integer, got the string \"5\""), s.err);
}

TEST_CASE("cli messages: attention-mass pictures draw offsets that no pair occupies as n/a") {
  // One query at place 40 over keys 0 and 1 (an explicit alignment), one at place 0: offsets −40, −39,
  // 0 and 1 occur; the rest of ±45 cannot.
  AttentionRecord rec;
  rec.layer = "decoder.layers.0.cross_attn", rec.place = "cross", rec.scheme = "t5";
  rec.weights = from_vector<double>({0.25, 0.75, 0.5, 0.5}, {1, 1, 2, 2});
  rec.positions = {40, 0};
  rec.query_valid = {true, true};
  rec.key_valid = {true, true};
  std::vector<ProbeCurve> curves = attention_mass_by_offset({rec}, 45);
  REQUIRE(curves.size() == 1);
  const ProbeCurve& c = curves[0];
  const std::vector<double> drawn = drawn_values(c);
  for (size_t n = 0; n < c.delta.size(); ++n) {
    const int64_t d = c.delta[n];
    const bool occurs = d == -40 || d == -39 || d == 0 || d == 1;
    INFO("delta ", d);
    CHECK(c.occurs.at(n) == occurs);
    CHECK(std::isnan(drawn[n]) == !occurs);
    if (!occurs) CHECK(c.value[n] == 0.0);  // the curve's data keeps its zero mass
  }
  CHECK(std::fabs(drawn[-40 + 45] - 0.125) < 1e-12);
  CHECK(std::fabs(drawn[0 + 45] - 0.25) < 1e-12);
}

TEST_CASE("cli messages: the legend of a short run's accuracy panel covers no curve") {
  using namespace plot_detail;
  // Three evaluations of a short run: neither accuracy moved, so the curves run flat near the top and
  // near the bottom of the panel, through all four corners.
  for (const std::pair<double, double>& values : std::vector<std::pair<double, double>>{{0.0215, 0.002}, {0.43, 0.04}, {0.0244, 0.0}}) {
    const double accuracy = values.first, sequences = values.second;  // named, not bound: INFO captures them
    PlotPanel panel{"held-out accuracy", "step", "accuracy", false, {}};
    panel.series.push_back(PlotSeries{"accuracy", {10, 20, 30}, {accuracy, accuracy, accuracy}});
    panel.series.push_back(PlotSeries{"sequence accuracy", {10, 20, 30}, {sequences, sequences, sequences}});
    const Scene scene = build_scene({panel}, 900, 360);
    const RectItem* legend = nullptr;
    for (const Item& item : scene.items)
      if (const auto* r = std::get_if<RectItem>(&item); r && r->stroke_width > 0 && r->stroke == Color{204, 204, 204})
        legend = r;
    REQUIRE(legend != nullptr);
    INFO("accuracy ", accuracy, ", sequence accuracy ", sequences, ", legend at (", legend->x, ", ", legend->y, ") ", legend->w, " x ", legend->h);
    size_t covered = 0;
    for (const Item& item : scene.items) {
      const auto* line = std::get_if<LineItem>(&item);
      if (!line || !line->svg_class || std::string(line->svg_class) != "data") continue;
      for (size_t k = 0; k + 1 < line->points.size(); ++k)
        for (int t = 0; t <= 100; ++t) {  // points along each segment
          const auto [x0, y0] = line->points[k];
          const auto [x1, y1] = line->points[k + 1];
          const double x = x0 + (x1 - x0) * t / 100, y = y0 + (y1 - y0) * t / 100;
          covered += x >= legend->x && x <= legend->x + legend->w && y >= legend->y - 1 && y <= legend->y + legend->h + 1;
        }
    }
    CHECK(covered == 0);
  }
}

TEST_CASE("cli messages: a bench run at other steps is reported as what ran, without the CI checks") {
  TempDir dir;
  SUBCASE("cope-bench") {
    CliResult r = run_relgrad({"cope-bench", "--treatments", "cope", "--seeds", "1", "--steps", "2", "--out", dir.file("cope")});
    CHECK_CLI(r, 0);
    CHECK_MESSAGE(contains(r.out, "cope-bench (CI form's models at 2 steps): 1 task x 1 treatment x 1 seed, 2 steps each"),
                  r.out);
    CHECK(contains(r.out, "no CI checks: --steps changed the CI form's steps"));
    CHECK_FALSE(contains(r.out, "CI check failed"));
    CHECK(read_bytes(dir.file("cope/results.md")).rfind("# relgrad cope-bench (CI form's models at 2 steps)\n", 0) == 0);
  }
  SUBCASE("context-bench: the picture is titled by the treatments drawn") {
    std::string text;
    for (int i = 0; i < 60; ++i) text += "In the beginning God created the heaven and the earth. And the earth was void. ";
    write_bytes(dir.file("small.txt"), text);
    CliResult r = run_relgrad({"context-bench", "--treatments", "t5", "--seeds", "1", "--steps", "2", "--text",
                               dir.file("small.txt"), "--out", dir.file("context")});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "context-bench (CI form's models at 2 steps): 1 treatment x 1 seed, 2 steps each"));
    CHECK(contains(r.out, "no CI checks"));
    CHECK_FALSE(contains(r.out, "CI check failed"));
    CHECK(read_bytes(dir.file("context/results.md")).rfind("# relgrad context-bench (CI form's models at 2 steps)\n", 0) == 0);
    const std::string svg = read_bytes(dir.file("context/context.svg"));
    CHECK(contains(svg, "Press et al.&apos;s Figure 1: t5<"));
    CHECK_FALSE(contains(svg, "sinusoidal"));
  }
  SUBCASE("addition-bench: its summary is headed by what it measures") {
    CliResult r = run_relgrad({"addition-bench", "--treatments", "rope", "--no-plain", "--seeds", "1", "--steps", "2",
                               "--out", dir.file("addition")});
    CHECK_CLI(r, 0);
    CHECK_MESSAGE(contains(r.out, "\ndecimal addition (CI form's models at 2 steps, 1 seed, 2 steps;"), r.out);
    CHECK_FALSE(contains(r.out, "length generalisation"));
    CHECK(contains(r.out, "1 treatment with index hints, 0 without, x 1 seed"));
    CHECK(read_bytes(dir.file("addition/results.md")).rfind("# relgrad addition-bench (CI form's models at 2 steps)\n", 0) == 0);
  }
  SUBCASE("music-bench: its checks become notes") {
    CliResult r = run_relgrad({"music-bench", "--treatments", "none", "--seeds", "1", "--steps", "2", "--no-harmony",
                               "--out", dir.file("music")});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "music-bench (CI form's models at 2 steps): 1 treatment x 1 seed, 2 steps each"));
    CHECK_FALSE(contains(r.out, "FAILED"));
    CHECK(read_bytes(dir.file("music/results.md")).rfind("# relgrad music-bench (CI form's models at 2 steps)\n", 0) == 0);
  }
  SUBCASE("length-bench") {
    CliResult r = run_relgrad({"length-bench", "--tasks", "copy", "--treatments", "none", "--seeds", "1", "--steps", "2",
                               "--out", dir.file("length")});
    CHECK_CLI(r, 0);
    CHECK(contains(r.out, "length-bench (CI form's models at 2 steps): 1 task x 1 treatment x 1 seed"));
    CHECK(contains(r.out, "\nlength generalisation (CI form's models at 2 steps, 1 seed,"));
    CHECK(read_bytes(dir.file("length/results.md")).rfind("# relgrad length-bench (CI form's models at 2 steps)\n", 0) == 0);
  }
}
