// Writes the seed corpus of the fuzz targets: small valid files of every kind, made by relgrad's own
// writers (so they follow the formats as this build writes them). Run from the repository root after
// a format change:   build-asan/fuzz/fuzz_make_corpus fuzz/corpus
// Existing files are overwritten; inputs added by hand (e.g. regressions) are left alone.
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/file_io.h"
#include "autograd/ops.h"
#include "core/safetensors.h"
#include "layers/linear.h"
#include "train/trainer/checkpoint.h"
#include "train/config/config.h"
#include "train/music/midi.h"
#include "train/music/music.h"
#include "train/optim/optim.h"
#include "train/data/token_file.h"

using namespace relgrad;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  try {
    const fs::path out = argc > 1 ? argv[1] : "fuzz/corpus";
    const fs::path repo = argc > 2 ? argv[2] : ".";
    auto dir = [&](const char* name) { fs::create_directories(out / name); return (out / name).string() + "/"; };

    // safetensors: each dtype, a scalar, an empty tensor, metadata; and a file with nothing in it.
    const std::string st = dir("safetensors");
    save_safetensors(st + "dtypes.safetensors",
                     {{"f32", from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})},
                      {"f64", from_vector(std::vector<double>{0.5, -1}, {2})},
                      {"i64", from_vector(std::vector<int64_t>{7, 8, 9}, {3})},
                      {"mask", from_vector(std::vector<float>{1, 0}, {2}).to(kBool)},
                      {"scalar", full({}, 3.0)},
                      {"none", zeros({0, 3})}},
                     {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}});
    save_safetensors(st + "empty.safetensors", {});

    // checkpoints: a Linear(2, 3) after one AdamW step (model + optimizer state), and without optimizer.
    const std::string ck = dir("checkpoint");
    Generator gen(1);
    Linear lin(2, 3, true, &gen);
    AdamW opt(lin.parameters(), AdamWOptions());
    sum(lin(ones({1, 2}))).backward();
    opt.step();
    CheckpointMeta meta;
    meta.step = 1;
    meta.config_json = R"({"model":{"d_model":2}})";
    meta.rng_seed = 1;
    meta.rng_offset = 4;
    meta.data_position = 3;
    meta.num_threads = 2;
    meta.extra["note"] = "seed";
    save_checkpoint(ck + "linear_adamw.safetensors", lin, &opt, meta);
    save_checkpoint(ck + "linear.safetensors", lin, nullptr, CheckpointMeta());

    // MIDI: the golden files of tests/golden (copied by hand) plus a short canon with running status.
    const std::string mid = dir("midi");
    for (const char* name : {"midi_mido_format0.mid", "midi_mido_format1.mid", "midi_mido_running.mid",
                             "midi_relgrad_events.mid", "midi_relgrad_notes.mid"})
      fs::copy_file(repo / "tests/golden" / name, mid + name, fs::copy_options::overwrite_existing);
    SynthMusicConfig canon;
    canon.styles = {MusicStyle::Canon};
    canon.beats = 8;
    write_midi(mid + "canon.mid", midi_of(synth_piece(canon, 0).notes));

    // configs: the repository's TOML files, the default config in both forms, a small JSON file.
    const std::string toml = dir("config_toml"), json = dir("config_json");
    for (const auto& entry : fs::directory_iterator(repo / "configs"))
      if (entry.path().extension() == ".toml")
        fs::copy_file(entry.path(), toml + entry.path().filename().string(), fs::copy_options::overwrite_existing);
    write_file_atomic(toml + "effective.toml", config_to_toml(RunConfig::defaults()), "corpus");
    write_file_atomic(json + "effective.json", config_to_json(RunConfig::defaults()), "corpus");
    write_file_atomic(json + "small.json",
                      R"({"model": {"type": "decoder-only", "d_model": 32, "decoder_self": {"scheme": "alibi"}},)"
                      R"( "data": {"source": "text", "context": 64}, "optim": {"lr": 3e-4, "nesterov": false},)"
                      R"( "train": {"steps": 10, "out_dir": "runs/x"}})",
                      "corpus");

    // token files: 2-byte ids, 4-byte ids (vocab > 65536), and no tokens at all.
    const std::string tok = dir("tokens");
    write_token_file(tok + "small.tokens", {0, 1, 2, 3, 4, 5, 6, 7, 255, 3}, 256);
    write_token_file(tok + "wide.tokens", {0, 70000, 12, 69999}, 70001);
    write_token_file(tok + "empty.tokens", {}, 1);
    std::printf("corpus written to %s\n", out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
}
