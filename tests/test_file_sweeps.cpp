// File sweeps (docs/reliability.md): every loader of a relgrad file format, fed every
// truncation (lengths 0 .. size-1) and every single-byte change (each position xor 0x01, 0x80 and
// 0xFF) of a small valid file, must either throw relgrad::Error or load, and never crash, hang or
// throw anything else. Subjects: (a) a checkpoint written by save_checkpoint (a few KiB), (b) a token
// file, (c) a MIDI file. Run them alone with  relgrad_tests -tc="file sweeps*"  (ctest -R "file sweeps").
// Each case prints the number of inputs it ran and its time.
//
// What must hold beyond "no crash":
//   checkpoint  every truncation is refused; every change in the data section is refused by the
//               checksum; every change in the header is refused (the header checksum covers the
//               metadata and the tensor table) except where the JSON still means the same thing.
//   tokens      every truncation and every change after the header is refused (the checksum); a
//               change in the header is refused, or loads the very same ids (vocab_size is the one
//               field outside the checksum; the loaded ids are then still below it).
//   MIDI        every truncation is refused; a change gives an Error or a valid file (a changed data
//               byte is often another valid note), and whatever loads can be written out again.
#include <chrono>
#include <functional>
#include <typeinfo>

#include "file_testing.h"
#include "layers/linear.h"
#include "testing.h"
#include "train/trainer/checkpoint.h"
#include "train/music/chorales.h"
#include "train/music/midi.h"
#include "train/optim/optim.h"
#include "train/data/token_file.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

constexpr unsigned char kFlips[] = {0x01, 0x80, 0xFF};

// How a loader took one input.
enum class Outcome { Loaded, Refused, Other };

struct Tally {
  int64_t cases = 0, loaded = 0, refused = 0, other = 0;
  double slowest_ms = 0;
  void add(Outcome o, double ms) {
    ++cases;
    (o == Outcome::Loaded ? loaded : o == Outcome::Refused ? refused : other) += 1;
    slowest_ms = std::max(slowest_ms, ms);
  }
};

// Runs `load` on `bytes`; `message` gets the Error's text. Any other exception is reported by name.
Outcome run(const std::function<void(const std::string&)>& load, const std::string& bytes, std::string* message,
            double* ms) {
  auto start = std::chrono::steady_clock::now();
  Outcome outcome = Outcome::Loaded;
  try {
    load(bytes);
  } catch (const Error& e) {
    *message = e.what();
    outcome = Outcome::Refused;
  } catch (const std::exception& e) {
    *message = std::string("non-relgrad exception ") + typeid(e).name() + ": " + e.what();
    outcome = Outcome::Other;
  } catch (...) {
    *message = "non-std exception";
    outcome = Outcome::Other;
  }
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- (a) checkpoint ----------------------------------------------------------------------------
std::string sweep_checkpoint(const std::string& path) {
  Generator init(5);
  Linear model(12, 12, true, &init);  // 156 parameters; with AdamW's two moments ~2 KB of data
  AdamW opt(model.parameters(), AdamWOptions(0.1));
  opt.zero_grad();
  Tensor x = relgrad::testing::uniform({3, 12}, -1, 1, kFloat32, 6);
  sum(mul(model(x), model(x))).backward();
  opt.step();
  CheckpointMeta meta;
  meta.step = 12;
  meta.config_json = "{\"model\":{\"d_model\":12}}";
  meta.rng_seed = 77;
  meta.rng_offset = 1234;
  meta.data_position = 99;
  meta.num_threads = 2;
  meta.extra["note"] = "sweep";
  save_checkpoint(path, model, &opt, meta);
  return read_bytes(path);
}

// Everything load_checkpoint returns, as comparable text (tensor bytes included).
std::string describe(const Checkpoint& c) {
  std::string s = std::to_string(c.meta.step) + "|" + c.meta.config_json + "|" + std::to_string(c.meta.rng_seed) + "|" +
                  std::to_string(c.meta.rng_offset) + "|" + std::to_string(c.meta.data_position) + "|" +
                  std::to_string(c.meta.num_threads) + "|" + c.optimizer_name + "|";
  for (const auto& [k, v] : c.meta.extra) s += k + "=" + v + "|";
  for (const auto* group : {&c.model, &c.optimizer})
    for (const auto& [name, t] : *group) {
      s += name + ":" + dtype_name(t.dtype()) + shape_str(t.shape()) + ":";
      s.append(static_cast<const char*>(t.raw_data()), t.numel() * dtype_size(t.dtype()));
    }
  return s;
}

}  // namespace

TEST_CASE("file sweeps: checkpoint truncated at every length and with every byte changed") {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  const std::string good = sweep_checkpoint(path);
  const std::string expected = describe(load_checkpoint(path));
  const size_t data_start = safetensors_data_start(good);
  REQUIRE(data_start < good.size());
  const std::string probe = dir.file("probe.safetensors");
  std::string loaded_description;
  auto load = [&](const std::string& bytes) {
    write_bytes(probe, bytes);
    loaded_description = describe(load_checkpoint(probe));
  };
  const auto start = std::chrono::steady_clock::now();

  Tally cut;
  for (size_t len = 0; len < good.size(); ++len) {
    std::string message;
    double ms = 0;
    Outcome o = run(load, good.substr(0, len), &message, &ms);
    cut.add(o, ms);
    CHECK_MESSAGE(o == Outcome::Refused, "truncated to ", len, " bytes: ", o == Outcome::Loaded ? "loaded" : message);
    if (o == Outcome::Refused) CHECK_MESSAGE(message.rfind("[checkpoint] " + probe + ": ", 0) == 0, message);
  }

  Tally header, data;
  int64_t header_same = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char x : kFlips) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      std::string message;
      double ms = 0;
      Outcome o = run(load, bad, &message, &ms);
      (i < data_start ? header : data).add(o, ms);
      CHECK_MESSAGE(o != Outcome::Other, "byte ", i, " ^ ", int(x), ": ", message);
      if (i >= data_start) {
        CHECK_MESSAGE((o == Outcome::Refused && message.find("checksum mismatch") != std::string::npos),
                      "data byte ", i, " ^ ", int(x), " not caught by the checksum: ", message);
      } else if (o == Outcome::Loaded) {
        // A header change that still loads must not have changed anything the checkpoint says.
        header_same += loaded_description == expected;
        CHECK_MESSAGE(loaded_description == expected, "header byte ", i, " ('", good[i], "') ^ ", int(x),
                      " loaded a different checkpoint");
      }
    }
  }
  const double seconds = seconds_since(start);
  MESSAGE("checkpoint sweep: file ", good.size(), " bytes (header ", data_start, "); truncations ", cut.cases,
          " (all refused: ", cut.refused == cut.cases, "); header changes ", header.cases, ": ", header.refused,
          " refused, ", header.loaded, " loaded the same checkpoint; data changes ", data.cases, ": ", data.refused,
          " refused by the checksum; slowest case ", std::max({cut.slowest_ms, header.slowest_ms, data.slowest_ms}),
          " ms; ", seconds, " s");
  CHECK(cut.refused == cut.cases);
  CHECK(data.refused == data.cases);
  CHECK(header.other + data.other + cut.other == 0);
  CHECK(header_same == header.loaded);
}

TEST_CASE("file sweeps: token file truncated at every length and with every byte changed") {
  std::vector<int32_t> ids;
  for (int k = 0; k < 1000; ++k) ids.push_back((k * 37 + k / 7) % 300);
  TempDir dir;
  const std::string path = dir.file("sweep.tokens");
  write_token_file(path, ids, 300);
  const std::string good = read_bytes(path);
  REQUIRE(good.size() == kTokenFileHeaderBytes + 2000);
  TokenFile loaded;
  auto load = [&](const std::string& bytes) { loaded = parse_token_file(bytes, "sweep.tokens"); };
  const auto start = std::chrono::steady_clock::now();

  Tally cut, header, payload;
  for (size_t len = 0; len < good.size(); ++len) {
    std::string message;
    double ms = 0;
    Outcome o = run(load, good.substr(0, len), &message, &ms);
    cut.add(o, ms);
    CHECK_MESSAGE(o == Outcome::Refused, "truncated to ", len, " bytes: ", message);
    if (o == Outcome::Refused) CHECK_MESSAGE(message.rfind("[tokens] sweep.tokens: ", 0) == 0, message);
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char x : kFlips) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      std::string message;
      double ms = 0;
      Outcome o = run(load, bad, &message, &ms);
      (i < kTokenFileHeaderBytes ? header : payload).add(o, ms);
      CHECK_MESSAGE(o != Outcome::Other, "byte ", i, " ^ ", int(x), ": ", message);
      if (i >= kTokenFileHeaderBytes) {
        CHECK_MESSAGE(o == Outcome::Refused, "id byte ", i, " ^ ", int(x), " was not caught");
      } else if (o == Outcome::Loaded) {
        CHECK_MESSAGE((i >= 16 && i < 24), "header byte ", i, " ^ ", int(x), " loaded (only vocab_size may)");
        CHECK(loaded.tokens == ids);
        CHECK(loaded.vocab_size > 299);
      }
    }
  }
  // Trailing bytes after a valid file are refused too.
  std::string message;
  double ms = 0;
  CHECK(run(load, good + std::string(1, '\0'), &message, &ms) == Outcome::Refused);
  const double seconds = seconds_since(start);
  MESSAGE("token file sweep: file ", good.size(), " bytes; truncations ", cut.cases, " (", cut.refused,
          " refused); header changes ", header.cases, ": ", header.refused, " refused, ", header.loaded,
          " loaded the same ids with another vocab_size; id changes ", payload.cases, ": ", payload.refused,
          " refused; slowest case ", std::max({cut.slowest_ms, header.slowest_ms, payload.slowest_ms}), " ms; ", seconds,
          " s");
  CHECK(cut.refused == cut.cases);
  CHECK(payload.refused == payload.cases);
}

TEST_CASE("file sweeps: MIDI file truncated at every length and with every byte changed") {
  MidiFile song;
  song.format = 1;
  song.ticks_per_quarter = 96;
  MidiTrack meta_track;
  meta_track.events = {MidiEvent::text(0, 0x03, "sweep"), MidiEvent::set_tempo(0, 600000),
                       MidiEvent::time_signature(0, 3, 2), MidiEvent::set_tempo(384, 450000)};
  song.tracks.push_back(meta_track);
  for (int channel : {0, 9}) {
    MidiTrack t;
    t.events.push_back(MidiEvent::program_change(0, channel, 5 + channel));
    t.events.push_back(MidiEvent::control_change(0, channel, 7, 100));
    int64_t tick = 0;
    for (int n = 0; n < 90; ++n) {
      const int pitch = 40 + (n * 7 + channel) % 40;
      t.events.push_back(MidiEvent::note_on(tick, channel, pitch, 30 + n % 90));
      t.events.push_back(MidiEvent::note_off(tick + 20 + n % 50, channel, pitch));
      if (n % 30 == 0) t.events.push_back(MidiEvent::pitch_bend(tick + 5, channel, n * 50 - 2000));
      tick += 24 + (n % 3) * 200;  // some deltas need 2-byte variable-length quantities
    }
    std::stable_sort(t.events.begin(), t.events.end(), [](const MidiEvent& a, const MidiEvent& b) { return a.tick < b.tick; });
    song.tracks.push_back(t);
  }
  song.tracks[1].events.push_back(MidiEvent::sysex(song.tracks[1].events.back().tick, {0x7E, 0x7F, 0x09, 0x01, 0xF7}));
  const std::string good = serialize_midi(song);
  REQUIRE(parse_midi(good, "sweep.mid") == song);
  auto load = [&](const std::string& bytes) {
    MidiFile f = parse_midi(bytes, "sweep.mid");
    parse_midi(serialize_midi(f), "rewritten");  // whatever loads can be written and read back
  };
  const auto start = std::chrono::steady_clock::now();

  Tally cut, flip;
  for (size_t len = 0; len < good.size(); ++len) {
    std::string message;
    double ms = 0;
    Outcome o = run(load, good.substr(0, len), &message, &ms);
    cut.add(o, ms);
    CHECK_MESSAGE(o == Outcome::Refused, "truncated to ", len, " bytes: ", message);
    if (o == Outcome::Refused) CHECK_MESSAGE(message.rfind("[midi] sweep.mid: ", 0) == 0, message);
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char x : kFlips) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      std::string message;
      double ms = 0;
      Outcome o = run(load, bad, &message, &ms);
      flip.add(o, ms);
      CHECK_MESSAGE(o != Outcome::Other, "byte ", i, " ^ ", int(x), ": ", message);
    }
  }
  const double seconds = seconds_since(start);
  MESSAGE("MIDI sweep: file ", good.size(), " bytes; truncations ", cut.cases, " (", cut.refused, " refused); changes ",
          flip.cases, ": ", flip.refused, " refused, ", flip.loaded, " loaded (valid files); slowest case ",
          std::max(cut.slowest_ms, flip.slowest_ms), " ms; ", seconds, " s");
  CHECK(cut.refused == cut.cases);
  CHECK(flip.loaded > 0);
  CHECK(flip.refused > 0);
}

// A chorale file (train/music/chorales.h): every truncation is refused (the JSON object is never
// closed); a change gives an Error naming the file or a valid set, which writes out and reads back
// the same.
TEST_CASE("file sweeps: chorale file truncated at every length and with every byte changed") {
  ChoraleSet set;
  for (int c = 0; c < 3; ++c) {
    Chorale chorale;
    for (int k = 0; k < 6 + 2 * c; ++k)
      chorale.steps.push_back({k % 5 == 4 ? -1 : 67 + k % 3 - c, 60 + c, 55 - k % 2, 48 - c + k % 4});
    (c == 0 ? set.train : c == 1 ? set.valid : set.test).push_back(chorale);
  }
  set.train.push_back(set.test[0]);
  const std::string good = chorales_to_json(set);
  REQUIRE(parse_chorales(good, "sweep.json").train == set.train);
  auto load = [&](const std::string& bytes) {
    const ChoraleSet got = parse_chorales(bytes, "sweep.json");
    const ChoraleSet again = parse_chorales(chorales_to_json(got), "rewritten");
    if (!(again.train == got.train && again.valid == got.valid && again.test == got.test))
      throw std::logic_error("a loaded chorale set does not survive being written and read back");
  };
  const auto start = std::chrono::steady_clock::now();
  Tally cut, flip;
  for (size_t len = 0; len < good.size(); ++len) {
    std::string message;
    double ms = 0;
    Outcome o = run(load, good.substr(0, len), &message, &ms);
    cut.add(o, ms);
    CHECK_MESSAGE(o == Outcome::Refused, "truncated to ", len, " bytes: ", message);
    if (o == Outcome::Refused) CHECK_MESSAGE(message.rfind("[chorales] sweep.json: ", 0) == 0, message);
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (unsigned char x : kFlips) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      std::string message;
      double ms = 0;
      Outcome o = run(load, bad, &message, &ms);
      flip.add(o, ms);
      CHECK_MESSAGE(o != Outcome::Other, "byte ", i, " ^ ", int(x), ": ", message);
      if (o == Outcome::Refused) CHECK_MESSAGE(message.rfind("[chorales] sweep.json: ", 0) == 0, message);
    }
  }
  const double seconds = seconds_since(start);
  MESSAGE("chorale sweep: file ", good.size(), " bytes; truncations ", cut.cases, " (", cut.refused,
          " refused); changes ", flip.cases, ": ", flip.refused, " refused, ", flip.loaded,
          " loaded (other pitches, or spaces); slowest case ", std::max(cut.slowest_ms, flip.slowest_ms),
          " ms; ", seconds, " s");
  CHECK(cut.refused == cut.cases);
  CHECK(flip.loaded > 0);
  CHECK(flip.refused > 0);
}
