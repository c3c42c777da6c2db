// The Standard MIDI File reader and writer (train/music/midi.h): hand-built byte fixtures, mido as the
// oracle (tests/golden/midi_*, written once by tools/check_midi_with_mido.py), a truncation sweep and
// a seeded mutation fuzz loop (every input gives a relgrad::Error or a valid parse, never a crash).
//
// Fuzzing longer, under the sanitizers (200,000 inputs take seconds):
//   cmake --preset asan && cmake --build --preset asan -j2 --target relgrad_tests     (CMakePresets.json)
//   RELGRAD_MIDI_FUZZ=200000 build-asan/tests/relgrad_tests -tc="midi*,music*"
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "file_testing.h"
#include "train/music/midi.h"
#include "train/music/music.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;

namespace {

std::string golden_path(const std::string& name) { return std::string(RELGRAD_GOLDEN_DIR) + "/" + name; }

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}

std::string be32(uint32_t v) { return bytes({int(v >> 24), int((v >> 16) & 255), int((v >> 8) & 255), int(v & 255)}); }

// A file: MThd (format, ntracks, division), then each chunk (MTrk bodies unless `raw_chunks`).
std::string smf(int format, int ntracks, int division, const std::vector<std::string>& track_bodies) {
  std::string out = "MThd" + be32(6) + bytes({format >> 8, format & 255, ntracks >> 8, ntracks & 255, division >> 8, division & 255});
  for (const std::string& body : track_bodies) out += "MTrk" + be32(static_cast<uint32_t>(body.size())) + body;
  return out;
}

std::string hex(const std::vector<uint8_t>& data) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : data) { out += digits[b >> 4]; out += digits[b & 15]; }
  return out;
}

// The bytes mido's msg.bytes() gives for an event: status, then for meta events the type and a
// variable-length size, then the data (a sysex event's data ends with its F7 already).
std::vector<uint8_t> mido_bytes(const MidiEvent& e) {
  std::vector<uint8_t> out{e.status};
  if (e.is_meta() || e.is_sysex()) {
    if (e.is_meta()) out.push_back(e.meta_type);
    if (e.is_meta()) {
      std::vector<uint8_t> vlq;
      uint32_t n = static_cast<uint32_t>(e.data.size());
      do { vlq.insert(vlq.begin(), static_cast<uint8_t>((n & 0x7F) | (vlq.empty() ? 0 : 0x80))); n >>= 7; } while (n);
      out.insert(out.end(), vlq.begin(), vlq.end());
    }
  }
  out.insert(out.end(), e.data.begin(), e.data.end());
  return out;
}

// What mido's description (tools/check_midi_with_mido.py) says, and what relgrad sees, in one form.
struct MidoView {
  std::vector<std::string> structure;  // "file", "msg" and "tempo" lines
  std::vector<Note> notes;
  double length = 0;
};

MidoView read_mido_view(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.is_open(), "missing golden file " << path);
  MidoView view;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "note") {
      Note n;
      fields >> n.pitch >> n.velocity >> n.channel >> n.start >> n.end;
      view.notes.push_back(n);
    } else if (kind == "length") {
      fields >> view.length;
    } else {
      view.structure.push_back(line);
    }
  }
  return view;
}

MidoView relgrad_view(const MidiFile& file) {
  MidoView view;
  view.structure.push_back("file " + std::to_string(file.format) + " " + std::to_string(file.ticks_per_quarter) + " " +
                           std::to_string(file.tracks.size()));
  std::vector<std::pair<int64_t, int>> tempos;
  for (size_t t = 0; t < file.tracks.size(); ++t) {
    for (const MidiEvent& e : file.tracks[t].events) {
      view.structure.push_back("msg " + std::to_string(t) + " " + std::to_string(e.tick) + " " + hex(mido_bytes(e)));
      if (e.is_meta(0x51)) tempos.emplace_back(e.tick, e.tempo());
    }
    view.structure.push_back("msg " + std::to_string(t) + " " + std::to_string(file.tracks[t].end()) + " ff2f00");
  }
  std::stable_sort(tempos.begin(), tempos.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [tick, tempo] : tempos) view.structure.push_back("tempo " + std::to_string(tick) + " " + std::to_string(tempo));
  NoteOptions raw;
  raw.sustain_pedal = false;  // mido pairs raw note-on/off messages
  raw.include_drums = true;
  view.notes = notes_of(file, raw);
  TempoMap tempo(file);
  for (const MidiTrack& track : file.tracks) view.length = std::max(view.length, tempo.seconds(track.end()));
  return view;
}

void check_same_view(const MidoView& mine, const MidoView& mido) {
  CHECK(mine.structure == mido.structure);
  for (size_t i = 0; i < std::min(mine.structure.size(), mido.structure.size()); ++i)
    if (mine.structure[i] != mido.structure[i]) {
      FAIL_CHECK("line ", i, ": relgrad '", mine.structure[i], "' vs mido '", mido.structure[i], "'");
      break;
    }
  REQUIRE(mine.notes.size() == mido.notes.size());
  for (size_t i = 0; i < mine.notes.size(); ++i) {
    const Note &a = mine.notes[i], &b = mido.notes[i];
    CHECK(a.pitch == b.pitch);
    CHECK(a.velocity == b.velocity);
    CHECK(a.channel == b.channel);
    CHECK(a.start == doctest::Approx(b.start).epsilon(1e-9));
    CHECK(a.end == doctest::Approx(b.end).epsilon(1e-9));
  }
  CHECK(mine.length == doctest::Approx(mido.length).epsilon(1e-9));
}

// The files relgrad writes for the oracle: one from notes (music.h), one built event by event.
MidiFile relgrad_notes_file() {
  std::vector<Note> notes;
  const int melody[] = {60, 62, 64, 60, 60, 62, 64, 60, 64, 65, 67};
  for (int i = 0; i < 11; ++i) notes.push_back({melody[i], 40 + 7 * i, 0.25 * i, 0.25 * i + 0.25, 0});  // re-struck 60s
  notes.push_back({48, 90, 0.0, 1.0, 1});
  notes.push_back({55, 90, 1.0, 2.755, 1});
  notes.push_back({36, 120, 0.5, 0.6, 9});  // a drum hit
  return midi_of(notes);
}

MidiFile relgrad_events_file() {
  MidiFile f;
  f.format = 1;
  f.ticks_per_quarter = 192;
  f.tracks.resize(3);
  auto& conductor = f.tracks[0].events;
  conductor = {MidiEvent::text(0, 0x03, "conductor"), MidiEvent::set_tempo(0, 750000), MidiEvent::time_signature(0, 6, 3),
               MidiEvent::set_tempo(576, 250000), MidiEvent::set_tempo(1152, 1000000)};
  auto& lead = f.tracks[1].events;
  lead.push_back(MidiEvent::program_change(0, 0, 73));
  lead.push_back(MidiEvent::sysex(0, {0x43, 0x10, 0x4C, 0x00, 0x00, 0x7E, 0x00, 0xF7}));
  for (int i = 0; i < 16; ++i) {
    lead.push_back(MidiEvent::note_on(96 * i, 0, 72 + (i * 5) % 12, 64 + i));
    lead.push_back(MidiEvent::pitch_bend(96 * i + 10, 0, (i - 8) * 1000));
    lead.push_back(i % 2 ? MidiEvent::note_off(96 * i + 90, 0, 72 + (i * 5) % 12, 40) : MidiEvent::note_on(96 * i + 90, 0, 72 + (i * 5) % 12, 0));
  }
  auto& bass = f.tracks[2].events;
  for (int i = 0; i < 4; ++i) {
    bass.push_back(MidiEvent::note_on(384 * i, 2, 36 + 2 * i, 100));
    bass.push_back(MidiEvent::control_change(384 * i + 1, 2, 11, 90 - i));
    bass.push_back(MidiEvent::note_off(384 * i + 380, 2, 36 + 2 * i));
  }
  f.tracks[2].end_tick = 1600;  // End of Track later than the last event
  return f;
}

}  // namespace

TEST_CASE("midi mido fixtures: relgrad reads what mido reads") {
  for (std::string name : {"midi_mido_format0", "midi_mido_format1", "midi_mido_running"}) {
    CAPTURE(name);
    MidiFile f = read_midi(golden_path(std::string(name) + ".mid"));
    check_same_view(relgrad_view(f), read_mido_view(golden_path(std::string(name) + ".txt")));
  }
}

TEST_CASE("midi mido fixtures: relgrad rewrites them byte for byte") {
  for (std::string name : {"midi_mido_format0.mid", "midi_mido_format1.mid", "midi_mido_running.mid"}) {
    CAPTURE(name);
    const std::string original = relgrad::testing::read_bytes(golden_path(name));
    CHECK(serialize_midi(parse_midi(original, name)) == original);  // mido writes running status too
  }
}

TEST_CASE("midi golden: files relgrad writes are the committed ones, and mido reads them as relgrad does") {
  // RELGRAD_UPDATE_GOLDEN=1 rewrites the .mid files; then run tools/check_midi_with_mido.py relgrad.
  const bool update = std::getenv("RELGRAD_UPDATE_GOLDEN") != nullptr;
  const std::pair<const char*, MidiFile> files[] = {{"midi_relgrad_notes", relgrad_notes_file()},
                                                    {"midi_relgrad_events", relgrad_events_file()}};
  if (update)
    for (const auto& [name, file] : files) write_midi(golden_path(std::string(name) + ".mid"), file);
  for (const auto& [name, file] : files) {
    const std::string path = golden_path(std::string(name) + ".mid");
    CAPTURE(path);
    CHECK(serialize_midi(file) == relgrad::testing::read_bytes(path));
    MidiFile back = read_midi(path);
    CHECK(back == file);
    check_same_view(relgrad_view(back), read_mido_view(golden_path(std::string(name) + ".txt")));
  }
}

TEST_CASE("midi running status and velocity-0 note-offs") {
  const std::string body = bytes({0x00, 0x90, 60, 100, 0x00, 64, 90,  // running status: 64 90 is a note-on
                                  0x60, 60, 0,                        // a note-on with velocity 0
                                  0x00, 0x80, 64, 10, 0x10, 0xC1, 5, 0x00, 7, 0x00, 0xFF, 0x2F, 0x00});
  MidiFile f = parse_midi(smf(0, 1, 96, {body}));
  REQUIRE(f.tracks.size() == 1);
  const auto& ev = f.tracks[0].events;
  REQUIRE(ev.size() == 6);
  CHECK(ev[1] == MidiEvent::note_on(0, 0, 64, 90));
  CHECK(ev[2].status == 0x90);
  CHECK(ev[2].tick == 96);
  CHECK(ev[2].is_note_off());
  CHECK_FALSE(ev[2].is_note_on());
  CHECK(ev[3].is_note_off());
  CHECK(ev[4] == MidiEvent::program_change(112, 1, 5));
  CHECK(ev[5] == MidiEvent::program_change(112, 1, 7));  // running status with one data byte
  CHECK(f.tracks[0].end_tick == 112);
  // Written back with running status it is the same bytes; without, every status is written.
  CHECK(serialize_midi(f) == smf(0, 1, 96, {body}));
  MidiWriteOptions plain;
  plain.running_status = false;
  CHECK(serialize_midi(f, plain).size() == smf(0, 1, 96, {body}).size() + 3);
  CHECK(parse_midi(serialize_midi(f, plain)) == f);
}

TEST_CASE("midi meta events, sysex and tempo") {
  const std::string body = bytes({0x00, 0xFF, 0x51, 0x03, 0x0F, 0x42, 0x40,        // tempo 1,000,000
                                  0x00, 0xFF, 0x58, 0x04, 0x03, 0x02, 0x18, 0x08,  // 3/4
                                  0x00, 0xFF, 0x01, 0x03, 'a', 'b', 'c',           // text
                                  0x00, 0xF0, 0x03, 0x7E, 0x01, 0xF7,              // sysex
                                  0x10, 0xF7, 0x02, 0x01, 0x02,                    // escape
                                  0x00, 0x90, 60, 100, 0x83, 0x00, 0xFF, 0x51, 0x03, 0x07, 0xA1, 0x20,
                                  0x83, 0x00, 0x90, 60, 0, 0x00, 0xFF, 0x2F, 0x00});
  MidiFile f = parse_midi(smf(0, 1, 384, {body}));
  const auto& ev = f.tracks[0].events;
  REQUIRE(ev.size() == 8);
  CHECK(ev[0].tempo() == 1000000);
  CHECK(ev[1] == MidiEvent::time_signature(0, 3, 2));
  CHECK(ev[2] == MidiEvent::text(0, 0x01, "abc"));
  CHECK(ev[3] == MidiEvent::sysex(0, {0x7E, 0x01, 0xF7}));
  CHECK(ev[4].status == 0xF7);
  CHECK(ev[4].data == std::vector<uint8_t>{1, 2});
  CHECK(ev[6].tempo() == 500000);
  TempoMap tempo(f);
  CHECK(tempo.seconds(384) == doctest::Approx(1.0));                 // 1 s per quarter up to tick 400
  CHECK(tempo.seconds(784) == doctest::Approx(400 / 384.0 + 0.5));   // then 0.5 s per quarter
  CHECK(tempo.tempo_at(399) == 1000000);
  CHECK(tempo.tempo_at(400) == 500000);
  std::vector<Note> notes = notes_of(f);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].start == doctest::Approx(16 / 384.0));
  CHECK(notes[0].end == doctest::Approx(400 / 384.0 + 0.5));
  CHECK(serialize_midi(f) == smf(0, 1, 384, {body}));
}

TEST_CASE("midi unknown chunks, long headers and trailing bytes are skipped") {
  const std::string track = bytes({0x00, 0x90, 60, 100, 0x10, 0x80, 60, 0, 0x00, 0xFF, 0x2F, 0x00, 0xAA, 0xBB});  // junk after EOT
  std::string file = "MThd" + be32(8) + bytes({0, 1, 0, 2, 0, 96, 0x12, 0x34});  // 2 extra header bytes
  file += "XFIH" + be32(3) + "abc";                                            // unknown chunk
  file += "MTrk" + be32(static_cast<uint32_t>(track.size())) + track;
  file += "XFKM" + be32(0);
  file += "MTrk" + be32(static_cast<uint32_t>(track.size())) + track;
  file += "trailing";
  MidiFile f = parse_midi(file);
  REQUIRE(f.tracks.size() == 2);
  CHECK(f.tracks[1].events.size() == 2);
  CHECK(f.tracks[1].end_tick == 16);
  CHECK(notes_of(f).size() == 2);
  // A track without End of Track ends at its last event.
  MidiFile g = parse_midi(smf(0, 1, 96, {bytes({0x00, 0x90, 60, 100, 0x20, 0x80, 60, 0})}));
  CHECK(g.tracks[0].end_tick == 32);
}

TEST_CASE("midi malformed files are clear errors with the byte offset") {
  const std::string eot = bytes({0x00, 0xFF, 0x2F, 0x00});
  auto fails = [](const std::string& data, const std::string& what) {
    check_throws_with([&] { parse_midi(data, "f.mid"); }, what);
  };
  fails("", "[midi] f.mid: not a Standard MIDI File");
  fails("RIFF" + be32(4) + "RMID", "not a Standard MIDI File");
  fails(smf(0, 1, 0xE728, {eot}), "SMPTE time division (0xE728) is not supported");
  fails(smf(0, 1, 0, {eot}), "0 ticks per quarter note at byte 12");
  fails(smf(3, 1, 96, {eot}), "unknown format 3");
  fails(smf(0, 2, 96, {eot, eot}), "format 0 must have exactly 1 track");
  fails(smf(1, 0, 96, {}), "declares no tracks");
  fails(smf(1, 2, 96, {eot}), "declares 2 tracks but the file ends after 1 at byte 26");
  fails("MThd" + be32(5) + bytes({0, 0, 0, 1, 0}), "header length 5 is shorter than 6 at byte 4");
  fails("MThd" + be32(600) + bytes({0, 0, 0, 1, 0, 96}), "header declares 600 bytes but only 6 remain");
  fails(smf(0, 1, 96, {}) + "MTrk" + be32(100) + eot, "chunk of 100 bytes but only 4 remain (truncated file) at byte 18");
  fails(smf(0, 1, 96, {bytes({0x00, 60, 100})}), "data byte 0x3C with no running status");
  fails(smf(0, 1, 96, {bytes({0x00, 0x90, 60, 1, 0x00, 0xFF, 0x01, 0x00, 0x00, 60, 0})}), "data byte 0x3C with no running status");
  fails(smf(0, 1, 96, {bytes({0x00, 0x90, 60, 1, 0x00, 0xF0, 0x01, 0xF7, 0x00, 60, 0})}), "no running status (no previous channel message, or a meta/sysex event cancelled it) at byte 31");
  fails(smf(0, 1, 96, {bytes({0x81, 0x81, 0x81, 0x81, 0x01, 0x90, 60, 1})}), "delta time is a variable-length quantity longer than 4 bytes at byte 22");
  fails(smf(0, 1, 96, {bytes({0x00, 0x90, 60, 0x90})}), "data byte 0x90 of a 0x90 message is >= 0x80 at byte 25");
  fails(smf(0, 1, 96, {bytes({0x00, 0xF8})}), "status byte 0xF8 (system common/real-time) is not allowed");
  fails(smf(0, 1, 96, {bytes({0x00, 0xFF, 0x01, 0x05, 'a'})}), "meta event declares 5 bytes but only 1 remain at byte 26");
  fails(smf(0, 1, 96, {bytes({0x00, 0x90, 60})}), "truncated channel message (end of chunk) at byte 25");
  fails(smf(0, 1, 96, {bytes({0x00, 0xF0, 0xFF, 0xFF, 0xFF, 0x7F})}), "sysex event declares 268435455 bytes but only 0 remain at byte 28");
}

TEST_CASE("midi writer round trip and checks") {
  MidiFile f = relgrad_events_file();
  for (bool running : {true, false}) {
    MidiWriteOptions options;
    options.running_status = running;
    const std::string data = serialize_midi(f, options);
    CHECK(parse_midi(data) == f);
    relgrad::testing::TempDir dir;
    write_midi(dir.file("a.mid"), f, options);
    CHECK(read_midi(dir.file("a.mid")) == f);
  }
  // An End of Track among the events is not written twice; its tick extends the track.
  MidiFile g;
  g.format = 0;
  g.tracks.resize(1);
  g.tracks[0].events = {MidiEvent::note_on(0, 0, 60, 1), MidiEvent::meta(50, 0x2F, {})};
  MidiFile back = parse_midi(serialize_midi(g));
  CHECK(back.tracks[0].events.size() == 1);
  CHECK(back.tracks[0].end_tick == 50);

  auto refuses = [](MidiFile file, const std::string& what) { check_throws_with([&] { serialize_midi(file); }, what); };
  MidiFile bad = g;
  bad.tracks[0].events = {MidiEvent::note_on(10, 0, 60, 1), MidiEvent::note_on(5, 0, 60, 1)};
  refuses(bad, "tick 5 is before the previous event's tick 10");
  bad.tracks[0].events = {MidiEvent::note_on(-1, 0, 60, 1)};
  refuses(bad, "tick -1 is before");
  bad.tracks[0].events = {MidiEvent{0, 0x90, 0, {60}}};
  refuses(bad, "status 0x90 needs 2 data bytes, got 1");
  bad.tracks[0].events = {MidiEvent{0, 0x90, 0, {60, 200}}};
  refuses(bad, "data byte 0xC8 is >= 0x80");
  bad.tracks[0].events = {MidiEvent{0, 0xF8, 0, {}}};
  refuses(bad, "status 0xF8 cannot be written");
  bad.tracks[0].events = {MidiEvent::note_on(int64_t(1) << 28, 0, 60, 1)};
  refuses(bad, "exceeds the largest variable-length quantity");
  bad = g;
  bad.tracks.resize(2);
  refuses(bad, "format 0 needs exactly 1 track");
  bad = g;
  bad.ticks_per_quarter = 40000;
  refuses(bad, "ticks_per_quarter must be in [1, 32767]");
  check_throws_with([] { MidiEvent::note_on(0, 16, 60, 1); }, "channel must be in [0, 15], got 16");
  check_throws_with([] { MidiEvent::set_tempo(0, 0); }, "tempo must be in [1, 16777215]");
  check_throws_with([] { read_midi("/nonexistent/x.mid"); }, "[midi] /nonexistent/x.mid");
}

TEST_CASE("midi tempo map merges the tempo events of all tracks") {
  MidiFile f = relgrad_events_file();  // 0.75 s per quarter, 0.25 from tick 576, 1.0 from 1152; 192 ticks per quarter
  TempoMap tempo(f);
  CHECK(tempo.seconds(0) == 0.0);
  CHECK(tempo.seconds(192) == doctest::Approx(0.75));
  CHECK(tempo.seconds(576) == doctest::Approx(2.25));
  CHECK(tempo.seconds(768) == doctest::Approx(2.5));
  CHECK(tempo.seconds(1152) == doctest::Approx(3.0));
  CHECK(tempo.seconds(1344) == doctest::Approx(4.0));
  f.tracks[2].events.insert(f.tracks[2].events.begin(), MidiEvent::set_tempo(0, 500000));  // a stray one in track 2
  CHECK(TempoMap(f).seconds(192) == doctest::Approx(0.5));  // same tick: the later track wins
  f.format = 2;
  check_throws_with([&] { TempoMap t(f); }, "format 2");
  MidiEvent bad = MidiEvent::meta(0, 0x51, {1, 2});
  check_throws_with([&] { bad.tempo(); }, "with 2 bytes");
}

// ---- truncation and fuzzing -----------------------------------------------------------------------

namespace {

std::vector<std::string> seed_files() {
  std::vector<std::string> files;
  for (const char* name : {"midi_mido_format0.mid", "midi_mido_format1.mid", "midi_mido_running.mid", "midi_relgrad_events.mid"})
    files.push_back(relgrad::testing::read_bytes(golden_path(name)));
  files.push_back(serialize_midi(relgrad_notes_file(), MidiWriteOptions{false}));
  SynthMusicConfig canon;  // a longer two-voice file (about 2 KB) with running status
  canon.styles = {MusicStyle::Canon};
  canon.beats = 64;
  files.push_back(serialize_midi(midi_of(synth_piece(canon, 0).notes)));
  return files;
}

// Everything downstream of the parser, on whatever it accepted: must give an Error or a result.
void use(const MidiFile& f) {
  const MidiFile back = parse_midi(serialize_midi(f));  // the writer accepts everything the reader makes
  REQUIRE(back == f);
  try {
    std::vector<int64_t> tokens = encode_performance(f);
    (void)decode_performance(tokens);
  } catch (const Error&) {
  }
}

// 0 = parsed, 1 = relgrad::Error; anything else fails the test.
int parse_outcome(const std::string& data) {
  try {
    use(parse_midi(data, "fuzz"));
    return 0;
  } catch (const Error&) {
    return 1;
  }
}

}  // namespace

TEST_CASE("midi truncation at every length is an error, never a crash") {
  int64_t inputs = 0, errors = 0;
  for (const std::string& file : seed_files()) {
    REQUIRE(parse_outcome(file) == 0);
    for (size_t n = 0; n < file.size(); ++n) {
      errors += parse_outcome(file.substr(0, n));  // a new string, so ASan sees reads past the end
      ++inputs;
    }
  }
  MESSAGE("truncation: ", inputs, " prefixes, ", errors, " errors");
  CHECK(errors == inputs);  // every seed ends with its last track, so every prefix is short of data
}

TEST_CASE("midi fuzz: seeded mutations only ever throw relgrad::Error") {
  const char* env = std::getenv("RELGRAD_MIDI_FUZZ");
  const int64_t iterations = env ? std::atoll(env) : 20000;
  const std::vector<std::string> seeds = seed_files();
  std::mt19937_64 rng(20240521);
  auto below = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  const uint8_t interesting[] = {0x00, 0x01, 0x7F, 0x80, 0x81, 0x90, 0xF0, 0xF7, 0xFF, 0x2F, 0x51};
  int64_t parsed = 0;
  for (int64_t it = 0; it < iterations; ++it) {
    std::string data = seeds[below(seeds.size())];
    const size_t mutations = 1 + below(4);
    for (size_t m = 0; m < mutations && !data.empty(); ++m) {
      const size_t at = below(data.size());
      switch (below(6)) {
        case 0: data[at] = static_cast<char>(rng()); break;
        case 1: data[at] = static_cast<char>(data[at] ^ (1 << below(8))); break;
        case 2: data[at] = static_cast<char>(interesting[below(sizeof(interesting))]); break;
        case 3: data.insert(at, 1, static_cast<char>(rng())); break;
        case 4: data.erase(at, 1 + below(8)); break;
        case 5: data.insert(at, data.substr(below(data.size()), 1 + below(16))); break;
      }
    }
    parsed += 1 - parse_outcome(data);
  }
  MESSAGE("fuzz: ", iterations, " mutated inputs, ", parsed, " parsed, ", iterations - parsed, " clean errors, 0 crashes");
}

TEST_CASE("midi hostile counts and lengths are refused before anything is sized by them") {
  const std::string eot = bytes({0x00, 0xFF, 0x2F, 0x00});
  auto fails = [](const std::string& data, const std::string& what) {
    check_throws_with([&] { parse_midi(data, "h.mid"); }, what);
  };
  // Lengths near 2^32 (a 32-bit "pos + length" would wrap) and the largest variable-length quantity.
  fails(smf(0, 1, 96, {}) + "MTrk" + be32(0xFFFFFFFF) + eot, "chunk of 4294967295 bytes but only 4 remain");
  fails(smf(0, 1, 96, {}) + "XXXX" + be32(0xFFFFFFF8) + eot, "chunk of 4294967288 bytes but only 4 remain");
  fails("MThd" + be32(0xFFFFFFFF) + bytes({0, 0, 0, 1, 0, 96}), "header declares 4294967295 bytes but only 6 remain");
  fails(smf(0, 1, 96, {bytes({0x00, 0xFF, 0x01, 0xFF, 0xFF, 0xFF, 0x7F})}), "meta event declares 268435455 bytes but only 0 remain");
  // 65535 tracks declared in a file that holds one: an error at the end of the file, not 65535 allocations.
  fails(smf(1, 65535, 96, {eot}), "declares 65535 tracks but the file ends after 1");
  // A truncated track whose chunk claims more than the file: the chunk length is checked first.
  std::string many = smf(0, 1, 96, {std::string(3000, '\0')});
  many.resize(many.size() - 1);
  fails(many, "chunk of 3000 bytes but only 2999 remain (truncated file)");
}
