// The Bach chorales through the `relgrad` command (train/music/chorales.h, train/config/sources/chorales.cpp):
// a tiny chorale language model and a tiny harmoniser trained through the CLI, sampled as MIDI files that
// read back as four voices (the harmoniser's soprano exactly the melody it was given), evaluated,
// resumed (other data refused), and the config errors of the chorale keys. Also that a harmoniser's
// explicit cross-attention positions reach the model, in training batches and in the sampler.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_testing.h"
#include "core/safetensors.h"
#include "file_testing.h"
#include "model_testing.h"
#include "testing.h"
#include "train/config/run_options.h"
#include "train/instruments/probe.h"
#include "train/music/chorales.h"
#include "train/music/midi.h"
#include "train/music/music.h"
#include "train/trainer/distributed.h"
#include "train/trainer/sampler.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string repo_root() { return fs::path(RELGRAD_GOLDEN_DIR).parent_path().parent_path().string(); }

const std::vector<std::string> kTiny = {
    "--model.d_model=16",        "--model.n_heads=2",    "--model.d_ff=32",        "--optim.warmup_steps=1",
    "--train.steps=3",           "--train.eval_every=0", "--train.eval_batches=1", "--train.samples=1",
    "--train.target_accuracy=0", "--data.batch_size=4"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The continuation model: a decoder-only LM over the serialised voices (Huang's relative attention), on
// a copy of the shipped file (so that the resume test can change it).
struct ChoraleRun {
  TempDir dir;
  std::string out_dir, checkpoint, data_path;
  CliResult result;
  ChoraleRun() {
    out_dir = dir.file("lm");
    data_path = dir.file("chorales.json");
    write_bytes(data_path, read_bytes(default_chorales_path()));
    result = run_relgrad(with(
        {"train", "--model.type=decoder-only", "--data.source=chorales", "--data.chorales_path=" + data_path,
         "--data.context=32", "--model.n_decoder_layers=1", "--model.decoder_self.scheme=huang",
         "--model.decoder_self.max_length=32", "--sample.max_new_tokens=16", "--train.out_dir=" + out_dir},
        kTiny));
    checkpoint = out_dir + "/checkpoint.safetensors";
  }
};
const ChoraleRun& chorale_run() {
  static ChoraleRun r;
  REQUIRE_MESSAGE(r.result.code == 0, r.result.err);
  return r;
}

// The harmoniser: soprano → alto, tenor, bass, with the seed's relative cross-attention under explicit
// positions (each target query at its own 16th step).
struct HarmonyRun {
  TempDir dir;
  std::string out_dir, checkpoint;
  CliResult result;
  HarmonyRun() {
    out_dir = dir.file("harmony");
    result = run_relgrad(
        with({"train", "--model.type=encoder-decoder", "--data.source=chorales",
              "--data.chorale_task=harmonize", "--data.harmony_steps=8", "--model.n_encoder_layers=1",
              "--model.n_decoder_layers=1", "--model.cross_alignment=explicit", "--model.cross.scheme=seed",
              "--model.cross.max_length=16", "--model.cross.out_of_range=clip", "--train.out_dir=" + out_dir},
             kTiny));
    checkpoint = out_dir + "/checkpoint.safetensors";
  }
};
const HarmonyRun& harmony_run() {
  static HarmonyRun r;
  REQUIRE_MESSAGE(r.result.code == 0, r.result.err);
  return r;
}

const ChoraleSet& shipped() {
  static const ChoraleSet set = read_chorales(default_chorales_path());
  return set;
}

std::vector<int> soprano_of(const Chorale& c) {
  std::vector<int> s;
  for (const auto& step : c.steps) s.push_back(step[0]);
  return s;
}

// The channels a file's notes sound on.
std::vector<int> channels_of(const MidiFile& file) {
  std::vector<int> seen;
  for (const Note& n : notes_of(file))
    if (std::find(seen.begin(), seen.end(), n.channel) == seen.end()) seen.push_back(n.channel);
  std::sort(seen.begin(), seen.end());
  return seen;
}

}  // namespace

TEST_CASE("cli chorales: a continuation model trains, stores its vocabulary and data checksum") {
  const ChoraleRun& r = chorale_run();
  CHECK(fs::exists(r.checkpoint));
  LoadedRun loaded = load_run(r.checkpoint);
  CHECK(loaded.config.data.source == "chorales");
  CHECK(loaded.config.data.chorale_task == ChoraleTask::Continue);
  CHECK(decoder_lm_of(*loaded.model).config.vocab_size == kChoraleVocabSize);
  CHECK(loaded.vocab.size == kChoraleVocabSize);
  CHECK(loaded.vocab.names == chorale_vocab().names);
  CHECK(loaded.checkpoint.meta.extra.count("data_checksum") == 1);
  CHECK(contains(loaded.checkpoint.meta.extra.at("vocab"), "\"kind\":\"names\""));
  CHECK(fs::exists(r.out_dir + "/sample.mid"));  // the samples printed after training
}

TEST_CASE("cli chorales: sample --format midi continues a valid chorale's first 8 steps in four voices") {
  const ChoraleRun& r = chorale_run();
  TempDir dir;
  const std::string path = dir.file("out.mid");
  CliResult res = run_relgrad(
      {"sample", r.checkpoint, "--format", "midi", "-o", path, "--seed", "2", "--max-new-tokens", "24"});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  CHECK(contains(res.out, "wrote " + path));
  CHECK(contains(res.out, "soprano"));
  CHECK(contains(res.out, "bass"));
  const Chorale got = chorale_from_midi(read_midi(path));
  const Chorale& first = shipped().valid.at(0);
  REQUIRE(got.steps.size() >= 8);
  for (size_t k = 0; k < 8; ++k) CHECK(got.steps[k] == first.steps[k]);  // the prompt, voice by voice
  CHECK(got.steps.size() <= 8 + 6);                                      // 24 new tokens are at most 6 steps
  for (int channel : channels_of(read_midi(path))) CHECK((channel >= 0 && channel < kChoraleVoices));

  // --chorale N prompts with another valid chorale; --prompt-midi with a file's voices.
  CliResult other = run_relgrad({"sample", r.checkpoint, "--format", "midi", "-o", dir.file("c3.mid"),
                                 "--chorale", "3", "--max-new-tokens", "8"});
  REQUIRE_MESSAGE(other.code == 0, other.err);
  const Chorale third = chorale_from_midi(read_midi(dir.file("c3.mid")));
  REQUIRE(third.steps.size() >= 8);
  for (size_t k = 0; k < 8; ++k) CHECK(third.steps[k] == shipped().valid.at(3).steps[k]);
  Chorale prompt;
  prompt.steps.assign(shipped().valid.at(5).steps.begin(), shipped().valid.at(5).steps.begin() + 4);
  write_midi(dir.file("prompt.mid"), chorale_midi(prompt));
  CliResult from_file =
      run_relgrad({"sample", r.checkpoint, "--format", "midi", "-o", dir.file("p.mid"), "--prompt-midi",
                   dir.file("prompt.mid"), "-n", "2", "--max-new-tokens", "8"});
  REQUIRE_MESSAGE(from_file.code == 0, from_file.err);
  for (const char* name : {"p_0.mid", "p_1.mid"}) {
    const Chorale c = chorale_from_midi(read_midi(dir.file(name)));
    REQUIRE(c.steps.size() >= 4);
    for (size_t k = 0; k < 4; ++k) CHECK(c.steps[k] == prompt.steps[k]);
  }
}

TEST_CASE("cli chorales: the harmoniser trains with explicit positions and harmonises a chorale's soprano") {
  const HarmonyRun& r = harmony_run();
  LoadedRun loaded = load_run(r.checkpoint);
  CHECK(loaded.config.data.chorale_task == ChoraleTask::Harmonize);
  CHECK(encoder_decoder_of(*loaded.model).config.explicit_cross());
  CHECK(encoder_decoder_of(*loaded.model).config.vocab_size == kChoraleVocabSize);
  // The samples printed after training: the trainer's SampleModel gave the model its positions.
  CHECK(fs::exists(r.out_dir + "/harmony.mid"));
  TempDir dir;
  const std::string path = dir.file("h.mid");
  CliResult res = run_relgrad({"sample", r.checkpoint, "--chorale", "2", "--format", "midi", "-o", path});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  CHECK(contains(res.out, "wrote " + path));
  for (const char* voice : {"soprano", "alto", "tenor", "bass"}) CHECK(contains(res.out, voice));
  const Chorale got = chorale_from_midi(read_midi(path));
  const std::vector<int> melody = soprano_of(shipped().valid.at(2));
  // The file ends with its last note: trailing steps where every voice rests are not in it.
  REQUIRE(got.steps.size() <= melody.size());
  size_t last_note = 0;
  for (size_t k = 0; k < melody.size(); ++k)
    if (melody[k] != kChoraleRestPitch) last_note = k;
  CHECK(got.steps.size() > last_note);
  CHECK(soprano_of(got) == std::vector<int>(melody.begin(), melody.begin() + got.steps.size()));
}

TEST_CASE("cli chorales: --melody harmonises a MIDI file's melody, which stays the soprano") {
  const HarmonyRun& r = harmony_run();
  TempDir dir;
  Chorale tune;  // a melody alone: C5 D5 E5 (each two 16ths), a rest, G5
  for (int pitch : {72, 72, 74, 74, 76, 76, -1, 79}) tune.steps.push_back({pitch, -1, -1, -1});
  write_midi(dir.file("melody.mid"), chorale_midi(tune));
  REQUIRE(melody_from_midi(read_midi(dir.file("melody.mid"))) == soprano_of(tune));
  CliResult res = run_relgrad({"sample", r.checkpoint, "--melody", dir.file("melody.mid"), "--format", "midi",
                               "-o", dir.file("out.mid")});
  REQUIRE_MESSAGE(res.code == 0, res.err);
  CHECK(contains(res.out, "C5"));
  const Chorale got = chorale_from_midi(read_midi(dir.file("out.mid")));
  REQUIRE(got.steps.size() == tune.steps.size());  // the melody's last step sounds
  CHECK(soprano_of(got) == soprano_of(tune));
  // Text only: printed, nothing written.
  CliResult text = run_relgrad({"sample", r.checkpoint, "--melody", dir.file("melody.mid")});
  REQUIRE_MESSAGE(text.code == 0, text.err);
  CHECK_FALSE(contains(text.out, "wrote"));
  CHECK(contains(text.out, "soprano  C5 C5 D5 D5 E5 E5 REST G5"));
}

TEST_CASE("cli chorales: eval works on both kinds of chorale checkpoint") {
  for (const std::string& checkpoint : {chorale_run().checkpoint, harmony_run().checkpoint}) {
    CliResult res = run_relgrad({"eval", checkpoint, "--batches", "2"});
    CHECK_CLI(res, 0);
    CHECK(contains(res.out, "held-out loss"));
  }
  TempDir dir;
  CliResult dump =
      run_relgrad({"eval", harmony_run().checkpoint, "--dump-logits", dir.file("l.safetensors")});
  CHECK_CLI(dump, 0);
  CHECK(load_safetensors(dir.file("l.safetensors")).tensors.count("tgt_positions") == 1);
}

TEST_CASE("cli chorales: explicit positions reach the harmoniser, in batches and in the sampler") {
  const HarmonyRun& r = harmony_run();
  LoadedRun loaded = load_run(r.checkpoint);
  RunData data(loaded.config);
  Batch batch = data.batch(0, Split::HeldOut);
  REQUIRE(batch.tgt_positions.defined());
  const int64_t t2 = batch.tgt_in.size(1);
  CHECK(batch.tgt_positions.to_vector<int64_t>() == harmony_query_positions(8).to_vector<int64_t>());
  auto loss = [&](const Batch& b) {
    Tensor logits = loaded.model->logits(b);
    return cross_entropy(logits.reshape({-1, logits.size(2)}), b.tgt_out.reshape({-1})).item();
  };
  const double explicit_loss = loss(batch);
  Batch moved = batch;  // the queries placed as "scaled" would place them: i · t1 / t2
  std::vector<int64_t> scaled;
  for (int64_t i = 0; i < t2; ++i) scaled.push_back(i * batch.src.size(1) / t2);
  moved.tgt_positions = from_vector<int64_t>(scaled, {t2});
  CHECK(loss(moved) != doctest::Approx(explicit_loss).epsilon(1e-6));
  Batch none = batch;
  none.tgt_positions = Tensor();
  CHECK_THROWS(loaded.model->logits(none));  // an explicit model without positions is an error

  // The sampler: the cached and the recomputed decoding agree only if the cache is given every position.
  const Tensor src = batch.src.narrow(0, 0, 1).contiguous();
  SamplingOptions o;
  o.max_new_tokens = 3 * 8;
  o.temperature = 1.0;
  o.seed = 11;
  o.eos = -1;
  const Tensor positions = target_positions(loaded.config)(1 + o.max_new_tokens);
  CHECK(positions.to_vector<int64_t>() == harmony_query_positions(8).to_vector<int64_t>());
  EncoderDecoder& model = encoder_decoder_of(*loaded.model);
  const auto cached = generate(model, src, Tensor(), o, true, positions).to_vector<int64_t>();
  const auto recomputed = generate(model, src, Tensor(), o, false, positions).to_vector<int64_t>();
  CHECK(cached == recomputed);
  CHECK_THROWS_WITH(generate(model, src, Tensor(), o), doctest::Contains("give tgt_positions"));
  CHECK_THROWS(generate(model, src, Tensor(), o, true, positions.narrow(0, 0, 5)));
}

TEST_CASE("cli chorales: a data-parallel shard and Batch::to keep the batch's tgt_positions whole") {
  RunConfig c = RunConfig::defaults();
  apply_overrides(c, {"--data.source=chorales", "--data.chorale_task=harmonize", "--data.harmony_steps=4",
                      "--data.batch_size=4", "--model.cross_alignment=explicit"});
  c.validate();
  RunData data(c);
  const Batch batch = data.batch(0, Split::Train);
  REQUIRE(batch.tgt_positions.defined());
  const std::vector<int64_t> expected = batch.tgt_positions.to_vector<int64_t>();
  CHECK(expected == harmony_query_positions(4).to_vector<int64_t>());
  for (int rank = 0; rank < 2; ++rank) {
    const Batch shard = shard_batch(batch, shard_rows(4, rank, 2));
    CHECK(shard.src.size(0) == 2);
    REQUIRE(shard.tgt_positions.defined());
    CHECK(shard.tgt_positions.to_vector<int64_t>() == expected);
  }
  const Batch moved = batch.to(Device::cpu());
  REQUIRE(moved.tgt_positions.defined());
  CHECK(moved.tgt_positions.to_vector<int64_t>() == expected);
}

TEST_CASE("cli chorales: resume refuses a changed chorale file") {
  const ChoraleRun& r = chorale_run();
  std::string text = read_bytes(r.data_path);
  const size_t at = text.find("60");
  REQUIRE(at != std::string::npos);
  text[at + 1] = '1';  // one pitch 60 → 61: still a valid file, other data
  write_bytes(r.data_path, text);
  CliResult res = run_relgrad({"train", "--resume", r.checkpoint, "--train.steps=4"});
  CHECK(res.code != 0);
  CHECK(contains(res.err, "different"));
  CHECK(contains(res.err, r.data_path));
  write_bytes(r.data_path, read_bytes(default_chorales_path()));  // as the other tests expect it
}

TEST_CASE("cli chorales: config errors name the keys") {
  auto dry = [](const std::vector<std::string>& args) {
    return run_relgrad(with({"train", "--data.source=chorales", "--dry-run"}, args));
  };
  CliResult lm_as_encdec = dry({"--model.type=encoder-decoder"});
  CHECK_CLI(lm_as_encdec, 2);
  CHECK(contains(lm_as_encdec.err, "data.chorale_task = \"continue\""));
  CHECK(contains(lm_as_encdec.err, "model.type = \"decoder-only\""));
  CliResult harmony_as_lm = dry({"--model.type=decoder-only", "--data.chorale_task=harmonize"});
  CHECK_CLI(harmony_as_lm, 2);
  CHECK(contains(harmony_as_lm.err, "model.type = \"encoder-decoder\""));
  CliResult context = dry({"--model.type=decoder-only", "--data.context=30"});
  CHECK_CLI(context, 2);
  CHECK(contains(context.err, "data.context must be a multiple of 4"));
  CliResult steps =
      dry({"--model.type=encoder-decoder", "--data.chorale_task=harmonize", "--data.harmony_steps=0"});
  CHECK_CLI(steps, 2);
  CHECK(contains(steps.err, "data.harmony_steps"));
  CliResult task = dry({"--data.chorale_task=sing"});
  CHECK_CLI(task, 2);
  CHECK(contains(task.err, "continue, harmonize"));
  // Explicit alignment needs data that place the queries: a synthetic task has none.
  CliResult explicit_synthetic = run_relgrad({"train", "--model.cross_alignment=explicit", "--dry-run"});
  CHECK_CLI(explicit_synthetic, 2);
  CHECK(contains(explicit_synthetic.err, "model.cross_alignment = \"explicit\" needs data"));
  CliResult positions = dry({"--model.type=decoder-only", "--data.context=64",
                             "--model.absolute_position=learned", "--model.max_positions=32"});
  CHECK_CLI(positions, 2);
  CHECK(contains(positions.err, "model.max_positions = 32 is shorter than the 64 tokens"));
  CliResult ok = dry({"--model.type=encoder-decoder", "--data.chorale_task=harmonize",
                      "--model.cross_alignment=explicit", "--model.absolute_position=learned"});
  CHECK_CLI(ok, 0);
  CHECK(contains(ok.out, "cross_alignment = \"explicit\""));
  CHECK(contains(ok.out, "absolute_position = \"learned\""));
}

TEST_CASE("cli chorales: learned absolute positions derive max_positions from the data") {
  RunConfig c = RunConfig::defaults();
  apply_overrides(c,
                  {"--data.source=chorales", "--model.type=encoder-decoder", "--data.chorale_task=harmonize",
                   "--data.harmony_steps=16", "--model.absolute_position=learned"});
  c.validate();
  c.derive_from_data();
  CHECK(c.model.max_positions == 3 * 16 + 1);
  CHECK(c.model.vocab_size == kChoraleVocabSize);
  RunConfig lm = RunConfig::defaults();
  apply_overrides(lm, {"--data.source=chorales", "--model.type=decoder-only", "--data.context=64",
                       "--model.absolute_position=learned"});
  lm.derive_from_data();
  CHECK(lm.model.max_positions == 64);
  RunConfig none = RunConfig::defaults();  // no absolute positions: the config is as before
  none.derive_from_data();
  CHECK(none.model.max_positions == 0);
}

TEST_CASE("cli chorales: sample refuses the options that do not apply") {
  const ChoraleRun& lm = chorale_run();
  const HarmonyRun& hm = harmony_run();
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"sample", lm.checkpoint, "--melody", dir.file("m.mid")}, "--melody is for harmonisers"},
      {{"sample", lm.checkpoint, "--input", "C4"}, "this is a chorale model"},
      {{"sample", lm.checkpoint, "--prompt", "x"}, "this is a chorale model"},
      {{"sample", lm.checkpoint, "--chorale", "100000"}, "valid chorales (0 .. "},
      {{"sample", lm.checkpoint, "--chorale", "1", "--prompt-midi", dir.file("p.mid")}, "not both"},
      {{"sample", hm.checkpoint, "--prompt-midi", dir.file("p.mid")}, "takes --melody"},
      {{"sample", hm.checkpoint, "--max-new-tokens", "5"}, "--max-new-tokens does not apply"},
      {{"sample", hm.checkpoint, "--chorale", "1", "--melody", dir.file("m.mid")}, "not both"},
      {{"sample", hm.checkpoint, "-o", dir.file("x.mid")}, "only goes with --format midi"},
  };
  for (const Case& c : cases) {
    CliResult res = run_relgrad(c.args);
    CHECK_CLI(res, 2);
    CHECK_MESSAGE(contains(res.err, c.says), res.err);
  }
  CHECK_FALSE(fs::exists(dir.file("x.mid")));
}

TEST_CASE("cli chorales: music-bench refuses malformed lists before running anything") {
  TempDir dir;
  for (const auto& [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--seeds", "1,,2"}, "an empty item"},
           {{"--seeds", "one"}, "is not a seed"},
           {{"--treatments", "huang,"}, "an empty item"},
       }) {
    CliResult res = run_relgrad(with({"music-bench", "--out", dir.file("bench")}, args));
    CHECK_CLI(res, 2);
    CHECK_MESSAGE(contains(res.err, says), res.err);
  }
  CHECK_FALSE(fs::exists(dir.file("bench")));
}

TEST_CASE("cli chorales: configs/chorales.toml and configs/harmonize.toml validate and open their data") {
  for (const char* name : {"chorales.toml", "harmonize.toml"}) {
    RunConfig c = RunConfig::defaults();
    load_config_file(c, repo_root() + "/configs/" + name);
    CHECK_NOTHROW(c.validate());
    CHECK(c.data.source == "chorales");
    CHECK(c.data.chorales_path.empty());  // the shipped file: nothing to download
    RunData data(c);
    CHECK_NOTHROW(data.batch(0, Split::Train));
  }
}

TEST_CASE("cli chorales: a harmoniser aligned by scaled or left placement trains and samples") {
  // Harmonisation batches always carry tgt_positions; a model whose cross_alignment is not explicit must place
  // its queries by its own alignment and leave them unused (RunModel::logits), not refuse the batch.
  for (const std::string alignment : {"scaled", "left"}) {
    CAPTURE(alignment);
    TempDir dir;
    const CliResult r = run_relgrad(
        with({"train", "--model.type=encoder-decoder", "--data.source=chorales",
              "--data.chorale_task=harmonize", "--data.harmony_steps=8", "--model.n_encoder_layers=1",
              "--model.n_decoder_layers=1", "--model.cross_alignment=" + alignment,
              "--model.cross.scheme=seed", "--model.cross.max_length=32", "--model.cross.out_of_range=clip",
              "--train.out_dir=" + dir.file("h")},
             kTiny));
    CHECK_CLI(r, 0);
    CHECK(fs::exists(dir.file("h/checkpoint.safetensors")));
    CHECK(fs::exists(dir.file("h/harmony.mid")));
  }
}

TEST_CASE("cli chorales: the probe places an explicit harmoniser's cross queries at the batch's positions") {
  const HarmonyRun& r = harmony_run();
  LoadedRun loaded = load_run(r.checkpoint);
  RunData data(loaded.config);
  const Batch batch = data.batch(0, Split::HeldOut);
  const std::vector<int64_t> expected = batch.tgt_positions.to_vector<int64_t>();
  // ⌊i / 3⌋ is not what the model's cross_alignment (left: π(i) = i) would give, so the check can fail.
  const int64_t t2 = static_cast<int64_t>(expected.size()), t1 = batch.src.size(1);
  const Alignment alignment = alignment_rule(loaded.config.model.cross_alignment);
  REQUIRE(expected != AttentionGeometry::query_positions_for(t2, t1, alignment).to_vector<int64_t>());
  int cross = 0;
  for (const AttentionRecord& rec : record_attention(*loaded.model, batch)) {
    if (rec.place != "cross") continue;
    ++cross;
    CHECK(rec.positions == expected);
  }
  CHECK(cross == 1);
}
