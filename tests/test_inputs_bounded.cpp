// Inputs that are valid in form but unbounded or ambiguous in what they ask for: deeply nested and
// duplicate-keyed configs, data paths that are FIFOs, devices, directories or too large, checkpoints
// whose config asks for a far larger model than their tensors hold, and MIDI folders with files that
// cannot be read. Each is refused (or, for skipped MIDI files, listed) before it costs anything.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli_testing.h"
#include "core/safetensors.h"
#include "file_testing.h"
#include "testing.h"
#include "train/config/config.h"
#include "train/config/run_options.h"
#include "train/data/data.h"
#include "train/music/midi.h"
#include "train/music/music.h"
#include "train/trainer/checkpoint.h"

using namespace relgrad;
using relgrad::testing::CerrCapture;
using relgrad::testing::check_throws_with;
using relgrad::testing::contains;
using relgrad::testing::run_relgrad;
using relgrad::testing::TempDir;
using relgrad::testing::write_bytes;

namespace {

// "a.a.a…a = 1" with `parts` parts.
std::string dotted_key(int parts) {
  std::string key = "a";
  for (int k = 1; k < parts; ++k) key += ".a";
  return key + " = 1\n";
}

// A one-step run of a small encoder-decoder, its checkpoint path.
std::string small_checkpoint(const TempDir& dir) {
  const std::string out = dir.file("run");
  auto res =
      run_relgrad({"train", "--model.d_model=16", "--model.n_heads=2", "--model.d_ff=32",
                   "--model.n_encoder_layers=2", "--model.n_decoder_layers=1", "--model.cross.max_length=8",
                   "--data.max_len=6", "--data.batch_size=4", "--optim.warmup_steps=1", "--train.steps=1",
                   "--train.eval_batches=1", "--train.samples=0", "--train.out_dir=" + out});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  return out + "/checkpoint.safetensors";
}

// Rewrites the checkpoint at `path` with `edit` applied to its config JSON, the header checksum
// recomputed to match, as a buggy or hostile writer would (every other check still passes).
template <class Edit>
void rewrite_config(const std::string& from, const std::string& to, Edit edit) {
  SafetensorsFile f = load_safetensors(from);
  auto md = f.metadata;
  md["config"] = edit(md["config"]);
  md["header_checksum"] = checksum_hex(checkpoint_header_checksum(md, f.tensors));
  save_safetensors(to, f.tensors, md);
}

// Replaces the number after "key": in a JSON text, the first one after "within" (a section's name),
// with `value`.
std::string set_number(std::string json, const std::string& within, const std::string& key,
                       const std::string& value) {
  size_t section = json.find("\"" + within + "\"");
  REQUIRE(section != std::string::npos);
  size_t at = json.find("\"" + key + "\":", section);
  REQUIRE(at != std::string::npos);
  size_t start = json.find_first_of("-0123456789", at + key.size() + 3);
  size_t end = json.find_first_not_of("-0123456789.e+", start);
  return json.replace(start, end - start, value);
}

}  // namespace

// ---- configs: nesting and duplicate keys ---------------------------------------------------------

TEST_CASE("inputs: a deeply nested TOML config is refused with its file and line, not a crash") {
  TempDir dir;
  const std::string path = dir.file("deep.toml");
  // 10,000 levels crashed toml++'s recursive parser (SIGSEGV); a 1 MiB file holds half a million.
  for (int parts : {10000, 500000}) {
    CAPTURE(parts);
    write_bytes(path, dotted_key(parts));
    RunConfig c = RunConfig::defaults();
    check_throws_with([&] { load_config_file(c, path); },
                      "[config] " + path + ":1: more than 1000 '.', '[' and '{'");
  }
  // Arrays and inline tables nest too.
  write_bytes(path, "x = " + std::string(5000, '[') + std::string(5000, ']') + "\n");
  RunConfig c = RunConfig::defaults();
  check_throws_with([&] { load_config_file(c, path); }, "more than 1000");
  // What is inside strings and comments does not count: a valid config with dots there loads.
  std::string ok = "# " + std::string(3000, '.') + "\n[model]\nd_model = 32\n[train]\nout_dir = \"" +
                   std::string(3000, '.') + "\"\n[model.cross]\nmax_length = 8\n";
  write_bytes(path, ok);
  RunConfig loaded = RunConfig::defaults();
  load_config_file(loaded, path);
  CHECK(loaded.model.d_model == 32);
  CHECK(loaded.model.cross.max_length == 8);
  CHECK(loaded.train.out_dir == std::string(3000, '.'));
  // The CLI: exit 2 (a config error), the file named.
  write_bytes(path, dotted_key(10000));
  auto res = run_relgrad({"train", "--config", path, "--dry-run"});
  CHECK(res.code == 2);
  CHECK(contains(res.err, path + ":1: more than 1000"));
}

TEST_CASE("inputs: a TOML table deeper than any key is refused before recursing, naming the depth") {
  TempDir dir;
  const std::string path = dir.file("four.toml");
  write_bytes(path, "[model.cross.max_length.x]\ny = 1\n");
  RunConfig c = RunConfig::defaults();
  check_throws_with(
      [&] { load_config_file(c, path); },
      "[config] " + path + ": unknown key 'model.cross.max_length.x': a table nested 4 or more levels deep");
  // A 4-part key that is no table is an unknown key as before, with the nearest key as a hint.
  write_bytes(path, "[model.cross.max_length]\nx = 1\n");
  check_throws_with([&] { load_config_file(c, path); },
                    "unknown key 'model.cross.max_length.x' (did you mean 'model.cross.max_length'?)");
  write_bytes(path, dotted_key(900));  // under the mark limit: the walk refuses it at the 4th level
  check_throws_with([&] { load_config_file(c, path); },
                    "unknown key 'a.a.a.a': a table nested 4 or more levels deep");
  // The JSON walk says the same.
  check_throws_with([&] { load_config_json_text(c, R"({"a":{"b":{"c":{"d":{"e":1}}}}})", "x.json"); },
                    "[config] x.json: unknown key 'a.b.c.d': a table nested 4 or more levels deep");
}

TEST_CASE("inputs: duplicate JSON keys are refused, as TOML refuses them, naming the key") {
  RunConfig c = RunConfig::defaults();
  check_throws_with([&] { load_config_json_text(c, R"({"model":{"d_model":8,"d_model":16}})", "dup.json"); },
                    "[config] dup.json: duplicate key 'model.d_model'");
  check_throws_with(
      [&] { load_config_json_text(c, R"({"train":{"steps":5},"train":{"seed":2}})", "dup.json"); },
      "duplicate key 'train'");
  check_throws_with(
      [&] { load_config_json_text(c, R"({"model":{"cross":{"clip":1,"clip":1}}})", "dup.json"); },
      "duplicate key 'model.cross.clip'");
  CHECK(c.model.d_model == RunConfig::defaults().model.d_model);  // nothing applied from a refused text
  // The same key in different objects is no duplicate.
  load_config_json_text(c, R"({"model":{"cross":{"clip":3},"encoder_self":{"clip":4}}})", "ok.json");
  CHECK(c.model.cross.clip == 3);
  CHECK(c.model.encoder_self.clip == 4);

  // A config file (CLI: exit 2), and a checkpoint's config (the same parser: refused when loaded).
  TempDir dir;
  write_bytes(dir.file("dup.json"), R"({"model":{"d_model":8,"d_model":16}})");
  auto res = run_relgrad({"train", "--config", dir.file("dup.json"), "--dry-run"});
  CHECK(res.code == 2);
  CHECK(contains(res.err, "duplicate key 'model.d_model'"));
  const std::string ck = small_checkpoint(dir), bad = dir.file("dup.safetensors");
  rewrite_config(ck, bad, [](std::string json) {
    size_t at = json.find("\"d_model\"");
    return json.insert(at, "\"d_model\": 16, ");
  });
  check_throws_with([&] { load_run(bad); }, "duplicate key 'model.d_model'");
  auto eval = run_relgrad({"eval", bad});
  CHECK(eval.code == 1);
  CHECK(contains(eval.err, "duplicate key 'model.d_model'"));
}

// ---- data.text_path ------------------------------------------------------------------------------

TEST_CASE("inputs: data.text_path must be a regular file: FIFO, device and directory are refused unread") {
  TempDir dir;
  const std::string fifo = dir.file("corpus.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Before the check, opening the FIFO waited for a writer forever; this writer lets such a reader
  // go (it then sees an empty file), so the test fails instead of hanging without the check.
  std::atomic<bool> done{false};
  std::thread writer([&] {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < until) {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  check_throws_with([&] { TextDataset d(fifo); },
                    "[TextDataset] " + fifo + ": is a FIFO, not a regular file");
  done = true;
  writer.join();
  check_throws_with([&] { TextDataset d("/dev/null"); },
                    "[TextDataset] /dev/null: is a character device, not a regular file");
  // /dev/zero was read until memory ran out: tried only once devices are known to be refused, so that
  // this test fails (on /dev/null, taken for an empty file) rather than exhausting memory without the check.
  bool devices_refused = false;
  try {
    TextDataset d("/dev/null");
  } catch (const Error& e) {
    devices_refused = contains(e.what(), "is a character device");
  }
  if (devices_refused)
    check_throws_with([&] { TextDataset d("/dev/zero"); },
                      "[TextDataset] /dev/zero: is a character device, not a regular file");
  check_throws_with([&] { TextDataset d(dir.path.string()); },
                    "[TextDataset] " + dir.path.string() + ": is a directory, not a regular file");
  // The old wording of a missing file is kept.
  check_throws_with([&] { TextDataset d(dir.file("none.txt")); },
                    "[TextDataset] cannot open '" + dir.file("none.txt") + "'");
  // Through the CLI: exit 1 with the file named.
  auto res =
      run_relgrad({"train", "--model.type=decoder-only", "--data.source=text", "--data.text_path=/dev/null",
                   "--train.steps=1", "--optim.warmup_steps=0", "--train.out_dir=" + dir.file("run")});
  CHECK(res.code == 1);
  CHECK(contains(res.err, "/dev/null: is a character device, not a regular file"));
}

TEST_CASE("inputs: data.text_path larger than 1 GiB is refused from its size, before reading") {
  TempDir dir;
  const std::string big = dir.file("big.txt");
  write_bytes(big, "");
  REQUIRE(::truncate(big.c_str(), static_cast<off_t>(kTextFileMaxBytes + 1)) == 0);  // sparse: no disk used
  check_throws_with(
      [&] { TextDataset d(big); },
      "[TextDataset] " + big + ": file has 1073741825 bytes, more than the limit of 1073741824");
  // At the limit's scale nothing changes for a normal file.
  write_bytes(big, "hello, world\n");
  TextDataset ok(big, 0.0);
  CHECK(ok.size() == 13);
}

// ---- a checkpoint's config against its tensors -----------------------------------------------

TEST_CASE("inputs: a checkpoint whose config asks for another model is refused before it is built") {
  TempDir dir;
  const std::string ck = small_checkpoint(dir), bad = dir.file("bad.safetensors");
  CHECK_NOTHROW(load_run(ck));
  const std::string prefix = "[checkpoint] " + bad + ": its config does not describe its tensors: ";
  struct Case {
    std::string within, key, value, message;
  };
  const std::vector<Case> cases = {
      {"model", "n_encoder_layers", "3",
       "model.n_encoder_layers = 3, but the tensors hold 2 blocks encoder.layers.<i>"},
      {"model", "n_encoder_layers", "1000000",
       "model.n_encoder_layers = 1000000, but the tensors hold 2 blocks"},
      {"model", "n_decoder_layers", "2",
       "model.n_decoder_layers = 2, but the tensors hold 1 blocks decoder.layers.<i>"},
      {"model", "d_model", "8192",
       "and model.d_model = 8192 make decoder.embed.weight (13, 8192), but it is (13, 16)"},
      {"model", "d_ff", "4096",
       "model.d_ff = 4096 and model.d_model = 16 make decoder.layers.0.ff.fc1.weight (4096, 16)"},
      {"data", "num_symbols", "100000", "the vocabulary of 100003 (from the data keys)"},
      // A cross-attention table of 399,999 rows: only the bound on the total size sees it.
      {"cross", "max_length", "200000", "make at least 3,207,496 parameters, but the tensors hold 8,520"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.key);
    CAPTURE(c.value);
    rewrite_config(ck, bad,
                   [&](const std::string& json) { return set_number(json, c.within, c.key, c.value); });
    check_throws_with([&] { load_run(bad); }, prefix);
    check_throws_with([&] { load_run(bad); }, c.message);
    auto res = run_relgrad({"eval", bad});
    CHECK(res.code == 1);
    CHECK(contains(res.err, "its config does not describe its tensors"));
  }
}

TEST_CASE("inputs: train --resume refuses a checkpoint whose config does not describe its tensors, before building") {
  TempDir dir;
  const std::string ck = small_checkpoint(dir), bad = dir.file("wide.safetensors");
  rewrite_config(ck, bad, [&](const std::string& json) { return set_number(json, "model", "d_model", "8192"); });
  // With and without --dry-run: the check runs before the trainer builds the model from the config.
  for (const bool dry_run : {true, false}) {
    CAPTURE(dry_run);
    std::vector<std::string> args = {"train", "--resume", bad, "--train.out_dir=" + dir.file("resumed"),
                                     "--train.steps=2"};
    if (dry_run) args.push_back("--dry-run");
    auto res = run_relgrad(args);
    CHECK(res.code == 1);
    CHECK(contains(res.err, "[checkpoint] " + bad + ": its config does not describe its tensors: "));
    CHECK(contains(res.err, "model.d_model = 8192"));
    CHECK_FALSE(std::filesystem::exists(dir.file("resumed")));
  }
  // The same checkpoint unedited still resumes.
  auto good = run_relgrad({"train", "--resume", ck, "--train.out_dir=" + dir.file("resumed_ok"), "--train.steps=2",
                           "--train.eval_batches=1"});
  CHECK_MESSAGE(good.code == 0, good.err);
}

TEST_CASE(
    "inputs: a checkpoint's data.max_len is bounded (sample draws and attends over sources that long)") {
  TempDir dir;
  const std::string ck = small_checkpoint(dir), bad = dir.file("long.safetensors");
  rewrite_config(ck, bad,
                 [&](const std::string& json) { return set_number(json, "data", "max_len", "100000000"); });
  check_throws_with([&] { load_run(bad); }, "data.max_len must be at most 4096, got 100000000");
  auto res = run_relgrad({"sample", bad});
  CHECK(res.code == 1);
  CHECK(contains(res.err, "data.max_len must be at most 4096"));
  // A config given to train: a config error (exit 2) before anything runs.
  auto train = run_relgrad({"train", "--data.max_len=5000", "--dry-run"});
  CHECK(train.code == 2);
  CHECK(contains(train.err, "data.max_len must be at most 4096, got 5000"));
}

// ---- MIDI folders --------------------------------------------------------------------------------

TEST_CASE("inputs: MIDI files that cannot be used are listed when training loads the folder") {
  TempDir dir;
  const std::string folder = dir.file("midi");
  std::filesystem::create_directories(folder);
  SynthMusicConfig synth;
  for (int i = 0; i < 2; ++i)
    write_midi(folder + "/good" + std::to_string(i) + ".mid", midi_of(synth_piece(synth, i).notes));
  write_bytes(folder + "/broken.mid", "MThd");
  MidiFile empty;
  empty.format = 0;
  empty.tracks.resize(1);
  write_midi(folder + "/silent.mid", empty);
  std::filesystem::create_directories(folder + "/folder.mid");  // not a file: never opened, listed

  RunConfig c = RunConfig::defaults();
  c.model_type = ModelKind::DecoderOnly;
  c.data.source = "music";
  c.data.music_dir = folder;
  c.data.val_fraction = 0.0;
  c.data.context = 16;
  c.data.batch_size = 2;
  {
    CerrCapture err;  // what `relgrad train` does: trainer_options with its default warnings stream
    TrainerOptions o = trainer_options(c);
    const std::string text = err.text.str();
    CHECK(contains(text, "warning: data.music_dir: skipped '" + folder + "/broken.mid': [midi] "));
    CHECK(contains(text,
                   "warning: data.music_dir: skipped '" + folder + "/silent.mid': [MusicDataset] no notes"));
    CHECK(contains(text, "warning: data.music_dir: skipped '" + folder + "/folder.mid': [MusicDataset] " +
                             folder + "/folder.mid: not a regular file"));
    CHECK_FALSE(contains(text, "good0.mid"));
  }
  // Many: the first kListedSkips, then a count.
  for (int i = 0; i < 25; ++i) write_bytes(folder + "/bad" + std::to_string(100 + i) + ".mid", "MThd");
  std::ostringstream out;
  trainer_options(c, &out);
  const std::string text = out.str();
  size_t lines = 0;
  for (size_t at = 0; (at = text.find("warning: data.music_dir: skipped '", at)) != std::string::npos; ++at)
    ++lines;
  CHECK(lines == kListedSkips);
  CHECK(contains(text, "warning: data.music_dir: skipped 8 more file(s) (28 in all)"));
  // Nothing skipped, nothing said.
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  for (int i = 0; i < 2; ++i)
    write_midi(folder + "/good" + std::to_string(i) + ".mid", midi_of(synth_piece(synth, i).notes));
  std::ostringstream quiet;
  trainer_options(c, &quiet);
  CHECK(quiet.str().empty());
}
