// The music side of the `relgrad` command: training on synthetic pieces, `sample --format midi`
// (files that read back as the notes the model generated), `render` (FluidSynth is optional: without
// it, a clear error with the install command), and `probe` (table and pictures).
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "cli_testing.h"
#include "file_testing.h"
#include "model_testing.h"
#include "testing.h"
#include "train/command/cli.h"
#include "train/music/midi.h"
#include "train/music/music.h"
#include "train/trainer/sampler.h"
#include "train/config/run_options.h"
#include "train/trainer/trainer.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// A tiny music model (Huang's relative attention), trained for a few steps once for all tests here.
struct MusicRun {
  TempDir dir;
  std::string out_dir, checkpoint;
  CliResult result;
  MusicRun() {
    out_dir = dir.file("music");
    result = run_relgrad({"train", "--model.type=decoder-only", "--data.source=music", "--data.context=32",
                  "--data.batch_size=4", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                  "--model.n_decoder_layers=1", "--model.decoder_self.scheme=huang",
                  "--model.decoder_self.max_length=32", "--optim.warmup_steps=1", "--train.steps=3",
                  "--train.eval_every=0", "--train.eval_batches=1", "--train.samples=1",
                  "--train.target_accuracy=0", "--sample.max_new_tokens=40", "--train.out_dir=" + out_dir});
    checkpoint = out_dir + "/checkpoint.safetensors";
  }
};
const MusicRun& music_run() {
  static MusicRun r;
  REQUIRE_MESSAGE(r.result.code == 0, r.result.err);
  return r;
}
}  // namespace

TEST_CASE("cli music: train on synthetic pieces writes a checkpoint and a sample.mid that reads back") {
  const MusicRun& r = music_run();
  CHECK(fs::exists(r.checkpoint));
  CHECK(contains(r.result.out, "sample.mid"));
  MidiFile sample = read_midi(r.out_dir + "/sample.mid");
  CHECK(sample.format == 0);
  LoadedRun loaded = load_run(r.checkpoint);
  CHECK(loaded.config.data.source == "music");
  CHECK(decoder_lm_of(*loaded.model).config.vocab_size == kMusicVocabSize);
}

TEST_CASE("cli music: sample --format midi writes the generated events as MIDI") {
  const MusicRun& r = music_run();
  TempDir dir;
  const std::string path = dir.file("out.mid");
  CliResult res = run_relgrad({"sample", r.checkpoint, "--format", "midi", "-o", path, "--max-new-tokens", "48", "--seed", "3",
                    "--input", "VEL_16 NOTE_ON_60 TIME_SHIFT_500ms NOTE_OFF_60"});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  CHECK(contains(res.out, "wrote " + path));
  // The file holds what the model generated: regenerate the same sequence through the library.
  LoadedRun loaded = load_run(r.checkpoint);
  Vocab v = music_vocab();
  std::vector<int64_t> prompt{kBos};
  for (const char* name : {"VEL_16", "NOTE_ON_60", "TIME_SHIFT_500ms", "NOTE_OFF_60"})
    for (int64_t id = 0; id < v.size; ++id)
      if (v.names[id] == name) prompt.push_back(id);
  REQUIRE(prompt.size() == 5);
  SamplingOptions o = sampling_options(loaded.config.sample);
  o.max_new_tokens = 48;
  o.seed = 3;
  o.window = loaded.config.data.context;  // relgrad sample's default for huang (train/config/run_options.h)
  std::vector<int64_t> seq =
      generate(decoder_lm_of(*loaded.model), from_vector<int64_t>(prompt, {1, 5}), o).to_vector<int64_t>();
  std::vector<Note> expected = decode_notes(seq);
  std::vector<Note> got = notes_of(read_midi(path));
  REQUIRE(got.size() == expected.size());
  REQUIRE(!got.empty());  // the prompt's note is there at least
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].pitch == expected[i].pitch);
    CHECK(got[i].start == doctest::Approx(expected[i].start).epsilon(1e-9));
    CHECK(got[i].end == doctest::Approx(expected[i].end).epsilon(1e-9));
  }
  CHECK(got[0].pitch == 60);
  CHECK(got[0].start == 0.0);
  CHECK(got[0].end == doctest::Approx(0.5));

  // -n 2 numbers the files; --prompt-midi continues a file.
  CliResult two = run_relgrad({"sample", r.checkpoint, "--format", "midi", "-o", dir.file("s.mid"), "-n", "2",
                    "--max-new-tokens", "16", "--prompt-midi", path});
  REQUIRE_MESSAGE(two.code == 0, two.err);
  CHECK(fs::exists(dir.file("s_0.mid")));
  CHECK(fs::exists(dir.file("s_1.mid")));
  CHECK(notes_of(read_midi(dir.file("s_0.mid"))).size() >= got.size() - 1);
}

TEST_CASE("cli music: usage errors name what is wrong") {
  const MusicRun& r = music_run();
  CliResult bad_token = run_relgrad({"sample", r.checkpoint, "--input", "NOTE_ON_999"});
  CHECK(bad_token.code == 2);
  CHECK(contains(bad_token.err, "'NOTE_ON_999' is not a token"));
  CliResult prompt = run_relgrad({"sample", r.checkpoint, "--prompt", "hello"});
  CHECK(prompt.code == 2);
  CHECK(contains(prompt.err, "music model"));
  CliResult style = run_relgrad({"train", "--model.type=decoder-only", "--data.source=music", "--data.music_styles=jazz", "--dry-run"});
  CHECK(style.code == 2);
  CHECK(contains(style.err, "data.music_styles"));
  CHECK(contains(style.err, "jazz"));
  CliResult encdec = run_relgrad({"train", "--data.source=music", "--dry-run"});
  CHECK(encdec.code == 2);
  CHECK(contains(encdec.err, "decoder-only"));
  TempDir dir;
  CliResult missing_prompt = run_relgrad({"sample", r.checkpoint, "--prompt-midi", dir.file("nope.mid")});
  CHECK(missing_prompt.code == 1);
  CHECK(contains(missing_prompt.err, "nope.mid"));
}

TEST_CASE("cli music: --format midi on a text or synthetic-task model is a usage error") {
  TempDir dir;
  CliResult trained = run_relgrad({"train", "--train.out_dir=" + dir.file("r"), "--model.d_model=16", "--model.n_heads=2",
                        "--model.d_ff=32", "--model.n_encoder_layers=1", "--model.n_decoder_layers=1",
                        "--model.cross.max_length=8", "--data.max_len=6", "--data.batch_size=4",
                        "--optim.warmup_steps=1", "--train.steps=1", "--train.eval_batches=1", "--train.samples=0"});
  REQUIRE_MESSAGE(trained.code == 0, trained.err);
  CliResult res = run_relgrad({"sample", dir.file("r") + "/checkpoint.safetensors", "--format", "midi"});
  CHECK(res.code == 2);
  CHECK(contains(res.err, "--format midi needs a music model"));
}

TEST_CASE("cli music: render explains how to install FluidSynth, and refuses bad input first") {
  TempDir dir;
  // A valid MIDI file to render.
  std::vector<Note> notes{{60, 80, 0.0, 0.5, 0}};
  write_midi(dir.file("a.mid"), midi_of(notes));
  // Without fluidsynth on PATH: a clear error with the install command, exit 1, no .wav.
  const char* old_path = std::getenv("PATH");
  std::string saved = old_path ? old_path : "";
  setenv("PATH", dir.path.c_str(), 1);
  CliResult res = run_relgrad({"render", dir.file("a.mid")});
  setenv("PATH", saved.c_str(), 1);
  CHECK(res.code == 1);
  CHECK(contains(res.err, "fluidsynth is not installed"));
  CHECK(contains(res.err, "apt-get install -y fluidsynth fluid-soundfont-gm"));
  CHECK_FALSE(fs::exists(dir.file("a.wav")));
  // A missing soundfont (when fluidsynth exists) or a bad MIDI file (always checked first).
  write_bytes(dir.file("bad.mid"), std::string("MThd\0\0\0\6", 8));
  CliResult bad = run_relgrad({"render", dir.file("bad.mid")});
  CHECK(bad.code == 1);
  CHECK(contains(bad.err, "bad.mid"));
  CliResult missing = run_relgrad({"render", dir.file("none.mid")});
  CHECK(missing.code == 1);
  CHECK(contains(missing.err, "none.mid"));
}

TEST_CASE("cli music: probe prints a table per layer and head and writes the pictures") {
  const MusicRun& r = music_run();
  TempDir dir;
  CliResult res = run_relgrad({"probe", r.checkpoint, "--reach", "8", "--out", dir.file("p")});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  CHECK(contains(res.out, "layers.0.self_attn"));
  CHECK(contains(res.out, "huang"));
  CHECK(contains(res.out, "pictures to " + dir.file("p")));
  size_t pngs = 0;
  for (const auto& e : fs::directory_iterator(dir.file("p"))) pngs += e.path().extension() == ".png";
  CHECK(pngs >= 2);  // response and attention-mass heatmaps of the one layer
  CliResult missing = run_relgrad({"probe", dir.file("none.safetensors")});
  CHECK(missing.code == 1);
  CHECK(contains(missing.err, "none.safetensors"));
}

TEST_CASE("cli music: render writes a WAV file when FluidSynth and FluidR3 are installed") {
  const bool have_fluidsynth = std::system("command -v fluidsynth >/dev/null 2>&1") == 0 &&
                               fs::exists("/usr/share/sounds/sf2/FluidR3_GM.sf2");
  if (!have_fluidsynth) {
    MESSAGE("skipped: fluidsynth or the FluidR3 soundfont is not installed (optional)");
    return;
  }
  TempDir dir;
  std::vector<Note> notes{{60, 80, 0.0, 0.5, 0}, {64, 80, 0.5, 1.0, 0}};
  write_midi(dir.file("a.mid"), midi_of(notes));
  CliResult res = run_relgrad({"render", dir.file("a.mid"), "-o", dir.file("out.wav")});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  std::string wav = read_bytes(dir.file("out.wav"));
  REQUIRE(wav.size() > 44);
  CHECK(wav.compare(0, 4, "RIFF") == 0);
  CHECK(wav.compare(8, 4, "WAVE") == 0);
  // No temporary file is left next to it.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 2);
}
