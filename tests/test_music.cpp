// Notes, the performance event encoding, the synthetic music generator and MusicDataset (train/music/music.h).
#include <map>
#include <random>
#include <set>

#include "file_testing.h"
#include "train/music/music.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;

namespace {

// Random notes on the 10 ms grid with bin velocities, or anywhere (quantised = false).
std::vector<Note> random_notes(uint64_t seed, int count, bool quantised) {
  std::mt19937_64 rng(seed);
  std::vector<Note> notes;
  for (int i = 0; i < count; ++i) {
    Note n;
    n.pitch = 40 + static_cast<int>(rng() % 40);
    n.velocity = 1 + static_cast<int>(rng() % 127);
    const double start = static_cast<double>(rng() % 40000) / 10000.0;  // 0..4 s, 0.1 ms resolution
    const double length = 0.001 + static_cast<double>(rng() % 25000) / 10000.0;
    n.start = start;
    n.end = start + length;
    n.channel = static_cast<int>(rng() % 3);
    notes.push_back(n);
  }
  return quantised ? quantize_notes(notes) : notes;
}

std::vector<int64_t> ids(std::initializer_list<int64_t> list) { return list; }
int64_t on(int p) { return kNoteOnBase + p; }
int64_t off(int p) { return kNoteOffBase + p; }
int64_t shift(int steps) { return kTimeShiftBase + steps; }
int64_t vel(int bin) { return kVelocityBase + bin; }

void check_notes_equal(const std::vector<Note>& a, const std::vector<Note>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i].pitch == b[i].pitch);
    CHECK(a[i].velocity == b[i].velocity);
    CHECK(a[i].channel == b[i].channel);
    CHECK(a[i].start == doctest::Approx(b[i].start).epsilon(1e-12));
    CHECK(a[i].end == doctest::Approx(b[i].end).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("music vocabulary layout and velocity bins") {
  Vocab v = music_vocab();
  CHECK(v.size == 391);
  CHECK(kMusicVocabSize == 391);
  CHECK(v.name(kPad) == "<pad>");
  CHECK(v.name(kEos) == "<eos>");
  CHECK(v.name(on(0)) == "NOTE_ON_0");
  CHECK(v.name(on(60)) == "NOTE_ON_60");
  CHECK(v.name(off(127)) == "NOTE_OFF_127");
  CHECK(v.name(shift(1)) == "TIME_SHIFT_10ms");
  CHECK(v.name(shift(100)) == "TIME_SHIFT_1000ms");
  CHECK(v.name(vel(16)) == "VEL_16");
  CHECK(v.name(390) == "VEL_31");
  CHECK(v.decode({kBos, vel(16), on(60), shift(50), off(60), kEos}) == "<bos> VEL_16 NOTE_ON_60 TIME_SHIFT_500ms NOTE_OFF_60 <eos>");
  CHECK(velocity_bin(1) == 0);
  CHECK(velocity_bin(4) == 0);
  CHECK(velocity_bin(5) == 1);
  CHECK(velocity_bin(127) == 31);
  for (int b = 0; b < kVelocityBins; ++b) CHECK(velocity_bin(bin_velocity(b)) == b);
  for (int v1 = 1; v1 < 127; ++v1) CHECK(velocity_bin(v1) <= velocity_bin(v1 + 1));
  check_throws_with([] { velocity_bin(0); }, "velocity must be in [1, 127], got 0");
  check_throws_with([] { bin_velocity(32); }, "velocity bin must be in [0, 32)");
}

TEST_CASE("music encoding of a small phrase, token by token") {
  // C4 (velocity 100) for 0.5 s; E4 (velocity 100) from 0.25 s for 2.35 s; a 5 ms note becomes 10 ms.
  std::vector<Note> notes = {{60, 100, 0.0, 0.5}, {64, 100, 0.25, 2.6}, {67, 30, 2.604, 2.606}};
  const int bin100 = velocity_bin(100), bin30 = velocity_bin(30);
  std::vector<int64_t> expected = ids({vel(bin100), on(60), shift(25), on(64), shift(25), off(60), shift(100), shift(100),
                                       shift(10), off(64), vel(bin30), on(67), shift(1), off(67)});
  CHECK(encode_notes(notes) == expected);
  std::vector<Note> back = decode_notes(expected);
  REQUIRE(back.size() == 3);
  CHECK(back[1].end == doctest::Approx(2.6));
  CHECK(back[2].start == doctest::Approx(2.6));
  CHECK(back[2].end == doctest::Approx(2.61));
  CHECK(back[0].velocity == bin_velocity(bin100));
}

TEST_CASE("music encode -> decode -> encode is the identity on quantised notes") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::vector<Note> notes = random_notes(seed, 60, true);
    std::vector<int64_t> tokens = encode_notes(notes);
    for (int64_t id : tokens) REQUIRE((id >= kNoteOnBase && id < kMusicVocabSize));
    std::vector<Note> decoded = decode_notes(tokens);
    check_notes_equal(decoded, notes);
    CHECK(encode_notes(decoded) == tokens);
    // Through a MIDI file and its bytes too (1 ms ticks at 120 bpm).
    MidiFile file = parse_midi(serialize_midi(decode_performance(tokens)));
    CHECK(encode_performance(file) == tokens);
  }
}

TEST_CASE("music notes survive encoding up to quantisation") {
  for (uint64_t seed = 100; seed < 110; ++seed) {
    std::vector<Note> notes = random_notes(seed, 40, false);
    std::vector<Note> decoded = decode_notes(encode_notes(notes));
    check_notes_equal(decoded, quantize_notes(notes));
    // Without overlaps of one pitch, every note comes back within 5 ms and in its velocity bin.
    std::vector<Note> spaced;
    for (size_t i = 0; i < notes.size(); ++i) {
      Note n = notes[i];
      n.pitch = static_cast<int>(i) % 128;  // distinct pitches
      n.channel = 0;
      spaced.push_back(n);
    }
    std::sort(spaced.begin(), spaced.end(), [](const Note& a, const Note& b) { return std::tie(a.start, a.pitch) < std::tie(b.start, b.pitch); });
    decoded = decode_notes(encode_notes(spaced));
    std::map<int, Note> by_pitch;
    for (const Note& n : decoded) by_pitch[n.pitch] = n;
    REQUIRE(by_pitch.size() == spaced.size());
    for (const Note& n : spaced) {
      const Note& d = by_pitch[n.pitch];
      CHECK(std::abs(d.start - n.start) <= 0.005 + 1e-9);
      CHECK((std::abs(d.end - n.end) <= 0.005 + 1e-9 || d.end - d.start == doctest::Approx(0.01)));
      CHECK(velocity_bin(d.velocity) == velocity_bin(n.velocity));
    }
  }
}

TEST_CASE("music decoding repairs invalid sequences") {
  // PAD and BOS skipped, out-of-range ids skipped, stray NOTE_OFF dropped, no velocity → bin 15.
  std::vector<Note> n = decode_notes(ids({kPad, kBos, -7, 391, 100000, off(50), on(60), shift(10), off(60), off(60)}));
  REQUIRE(n.size() == 1);
  CHECK(n[0].pitch == 60);
  CHECK(n[0].velocity == bin_velocity(kDefaultVelocityBin));
  CHECK(n[0].end == doctest::Approx(0.1));
  // A NOTE_ON for a sounding pitch ends the first note there.
  n = decode_notes(ids({vel(20), on(60), shift(10), vel(5), on(60), shift(20), off(60)}));
  REQUIRE(n.size() == 2);
  CHECK(n[0].end == doctest::Approx(0.1));
  CHECK(n[1].start == doctest::Approx(0.1));
  CHECK(n[1].velocity == bin_velocity(5));
  // Re-struck at the same step: one note. Hanging notes end at the last time reached; EOS stops.
  n = decode_notes(ids({on(60), on(60), on(62), shift(30), on(64), kEos, shift(50), off(60)}));
  REQUIRE(n.size() == 3);
  CHECK(n[0].pitch == 60);
  CHECK(n[0].end == doctest::Approx(0.3));
  CHECK(n[1].end == doctest::Approx(0.3));
  CHECK(n[2].start == doctest::Approx(0.3));
  CHECK(n[2].end == doctest::Approx(0.31));  // hanging at the very end: one step
  // ON then OFF with no time between: a one-step note.
  n = decode_notes(ids({on(70), off(70)}));
  REQUIRE(n.size() == 1);
  CHECK(n[0].end == doctest::Approx(0.01));
  // Anything at all decodes to notes that re-encode and decode to themselves.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> tokens(1 + rng() % 200);
    for (auto& t : tokens) t = static_cast<int64_t>(rng() % 400) - 3;
    std::vector<Note> notes = decode_notes(tokens);
    std::vector<int64_t> again = encode_notes(notes);
    check_notes_equal(decode_notes(again), notes);
    CHECK(encode_notes(decode_notes(again)) == again);
  }
}

TEST_CASE("music notes_of: tempo changes, format-1 merge, pedal, drums, hanging notes") {
  MidiFile f;
  f.format = 1;
  f.ticks_per_quarter = 100;
  f.tracks.resize(3);
  f.tracks[0].events = {MidiEvent::set_tempo(0, 1000000), MidiEvent::set_tempo(200, 250000)};  // 10 ms/tick, then 2.5
  f.tracks[1].events = {MidiEvent::note_on(0, 0, 60, 80), MidiEvent::note_off(100, 0, 60),
                        MidiEvent::note_on(180, 0, 62, 80), MidiEvent::note_off(240, 0, 62),
                        MidiEvent::note_on(300, 9, 36, 100), MidiEvent::note_off(310, 9, 36)};
  f.tracks[2].events = {MidiEvent::note_on(50, 1, 48, 60), MidiEvent::control_change(60, 1, 64, 127),
                        MidiEvent::note_off(70, 1, 48), MidiEvent::note_on(80, 1, 52, 60), MidiEvent::note_off(90, 1, 52),
                        MidiEvent::control_change(120, 1, 64, 0), MidiEvent::note_on(130, 1, 55, 60)};
  f.tracks[2].end_tick = 400;
  std::vector<Note> notes = notes_of(f);
  REQUIRE(notes.size() == 5);
  // Sorted by start: 60 @0, 48 @0.5, 52 @0.8, 55 @1.3, 62 @1.8.
  CHECK(notes[0].pitch == 60);
  CHECK(notes[0].end == doctest::Approx(1.0));
  CHECK(notes[1].pitch == 48);
  CHECK(notes[1].end == doctest::Approx(1.2));  // released under the pedal: ends when it lifts
  CHECK(notes[2].pitch == 52);
  CHECK(notes[2].end == doctest::Approx(1.2));
  CHECK(notes[3].pitch == 55);
  CHECK(notes[3].end == doctest::Approx(2.0 + 200 * 0.0025));  // hanging: ends at the track's end (tick 400)
  CHECK(notes[4].pitch == 62);
  CHECK(notes[4].start == doctest::Approx(1.8));
  CHECK(notes[4].end == doctest::Approx(2.0 + 40 * 0.0025));  // across the tempo change
  NoteOptions options;
  options.sustain_pedal = false;
  options.include_drums = true;
  notes = notes_of(f, options);
  REQUIRE(notes.size() == 6);
  CHECK(notes[1].end == doctest::Approx(0.7));  // 48 without the pedal
  CHECK(notes[5].pitch == 36);
  CHECK(notes[5].channel == 9);
  // The encoding merges the tracks into one stream.
  std::vector<int64_t> tokens = encode_performance(f);
  check_notes_equal(decode_notes(tokens), quantize_notes(notes_of(f)));
  // A re-struck key ends the sounding one, also under the pedal; format 2 is refused.
  MidiFile g;
  g.format = 0;
  g.tracks.resize(1);
  g.tracks[0].events = {MidiEvent::control_change(0, 0, 64, 100), MidiEvent::note_on(0, 0, 60, 50), MidiEvent::note_off(10, 0, 60),
                        MidiEvent::note_on(480, 0, 60, 70), MidiEvent::note_off(960, 0, 60)};
  g.ticks_per_quarter = 480;
  notes = notes_of(g);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].end == doctest::Approx(0.5));
  CHECK(notes[1].end == doctest::Approx(1.0));
  g.format = 2;
  check_throws_with([&] { notes_of(g); }, "format 2");
}

TEST_CASE("music midi_of writes notes that read back exactly") {
  std::vector<Note> notes = random_notes(42, 50, true);
  for (size_t i = 0; i < notes.size(); ++i) notes[i].channel = static_cast<int>(i % 2);
  MidiFile f = midi_of(notes);
  CHECK(f.format == 0);
  CHECK(f.ticks_per_quarter == 500);
  NoteOptions options;
  std::vector<Note> back = notes_of(parse_midi(serialize_midi(f)), options);
  std::vector<Note> expected = notes;
  std::sort(expected.begin(), expected.end(), [](const Note& a, const Note& b) {
    return std::tie(a.start, a.pitch, a.channel, a.end) < std::tie(b.start, b.pitch, b.channel, b.end);
  });
  check_notes_equal(back, expected);
  check_throws_with([] { midi_of({{60, 0, 0.0, 1.0}}); }, "note 0: velocity must be in [1, 127], got 0");
  check_throws_with([] { midi_of({{60, 10, 1.0, 0.5}}); }, "need 0 <= start <= end");
  check_throws_with([] { encode_notes({{60, 10, 0.0, 2e5}}); }, "later than relgrad's limit");
}

TEST_CASE("music synthetic pieces are deterministic and well formed") {
  SynthMusicConfig config;
  config.seed = 5;
  std::set<MusicStyle> seen;
  for (int64_t piece = 0; piece < 60; ++piece) {
    SynthPiece a = synth_piece(config, piece);
    SynthPiece b = synth_piece(config, piece);
    CHECK(a.notes == b.notes);
    CHECK(a.style == b.style);
    REQUIRE_FALSE(a.notes.empty());
    seen.insert(a.style);
    CHECK(a.beat_steps % 2 == 0);
    CHECK((a.beat_steps >= 30 && a.beat_steps <= 60));
    for (const Note& n : a.notes) {
      CHECK((n.pitch >= 0 && n.pitch <= 127));
      CHECK(n.end > n.start);
    }
    // On the grid already, so the encoding is lossless (apart from channels).
    std::vector<Note> flat = a.notes;
    for (Note& n : flat) n.channel = 0;
    std::vector<Note> q = quantize_notes(flat);
    if (a.style != MusicStyle::Canon) check_notes_equal(q, flat);  // a canon's voices may cross in pitch
    std::vector<int64_t> tokens = encode_notes(a.notes);
    CHECK(encode_notes(decode_notes(tokens)) == tokens);
  }
  CHECK(seen.size() == 5);
  CHECK(synth_piece(config, 0).notes != synth_piece(config, 1).notes);
  CHECK(synth_piece(config, 3, Split::HeldOut).notes != synth_piece(config, 3).notes);
  SynthMusicConfig other = config;
  other.seed = 6;
  CHECK(synth_piece(other, 0).notes != synth_piece(config, 0).notes);
  CHECK(to_string(MusicStyle::RandomWalk) == std::string("random_walk"));
  CHECK(music_style_from_string("canon") == MusicStyle::Canon);
  check_throws_with([] { music_style_from_string("fugue"); }, "unknown music style 'fugue'");
  SynthMusicConfig bad = config;
  bad.canon_interval = 30;
  check_throws_with([&] { synth_piece(bad, 0); }, "canon_interval must be in [-24, 24]");
}

TEST_CASE("music canon: the follower repeats the leader a fixed lag later") {
  SynthMusicConfig config;
  config.styles = {MusicStyle::Canon};
  config.canon_lag_beats = 3;
  config.canon_interval = -12;
  for (int64_t piece = 0; piece < 10; ++piece) {
    SynthPiece p = synth_piece(config, piece);
    const double lag = 3 * p.beat_steps / 100.0;
    std::vector<Note> leader, follower;
    for (const Note& n : p.notes) (n.channel == 0 ? leader : follower).push_back(n);
    REQUIRE(leader.size() == follower.size());
    REQUIRE(leader.size() >= 4);
    for (size_t i = 0; i < leader.size(); ++i) {
      CHECK(follower[i].pitch == leader[i].pitch - 12);
      CHECK(follower[i].start == doctest::Approx(leader[i].start + lag));
      CHECK(follower[i].end - follower[i].start == doctest::Approx(leader[i].end - leader[i].start));
      CHECK(follower[i].velocity == leader[i].velocity);
    }
  }
}

TEST_CASE("music dataset: synthetic batches") {
  MusicDatasetConfig config;
  config.synth.seed = 3;
  MusicDataset data(config);
  CHECK(data.synthetic());
  const int64_t B = 4, T = 64;
  Batch a = data.batch(0, B, T);
  Batch again = data.batch(0, B, T);
  CHECK(a.decoder_only());
  CHECK(a.tokens.shape() == Shape{B, T});
  CHECK(a.targets.shape() == Shape{B, T});
  CHECK(a.padding_mask.shape() == Shape{B, T});
  std::vector<int64_t> tokens = a.tokens.to_vector<int64_t>(), targets = a.targets.to_vector<int64_t>();
  std::vector<bool> mask = a.padding_mask.to_vector<bool>();
  CHECK(tokens == again.tokens.to_vector<int64_t>());
  CHECK(tokens != data.batch(1, B, T).tokens.to_vector<int64_t>());
  CHECK(tokens != data.batch(0, B, T, Split::HeldOut).tokens.to_vector<int64_t>());
  int64_t counted = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      CHECK((tokens[i] >= 0 && tokens[i] < kMusicVocabSize));
      CHECK(mask[i] == (tokens[i] == kPad));
      if (t + 1 < T && !mask[i + 1]) CHECK(targets[i] == tokens[i + 1]);  // targets are the next tokens
      if (mask[i]) CHECK(targets[i] == kIgnoreIndex);
      counted += targets[i] != kIgnoreIndex;
    }
  CHECK(counted == a.num_targets);
  // A long window holds whole pieces: BOS first, EOS at the end, then padding.
  Batch whole = data.batch(2, 2, 4000);
  std::vector<int64_t> w = whole.tokens.to_vector<int64_t>(), wt = whole.targets.to_vector<int64_t>();
  CHECK(w[0] == kBos);
  CHECK(std::find(wt.begin(), wt.begin() + 4000, kEos) != wt.begin() + 4000);
  CHECK(w[3999] == kPad);
  check_throws_with([&] { data.batch(-1, 2, 8); }, "batch index must be in [0, 2^42)");
}

TEST_CASE("music dataset: a folder of MIDI files, split by file, bad files skipped") {
  relgrad::testing::TempDir dir;
  std::filesystem::create_directories(dir.path / "sub");
  SynthMusicConfig synth;
  for (int i = 0; i < 6; ++i)
    write_midi(dir.file(i < 3 ? "piece" + std::to_string(i) + ".mid" : "sub/piece" + std::to_string(i) + ".MIDI"),
               midi_of(synth_piece(synth, i).notes));
  relgrad::testing::write_bytes(dir.file("broken.mid"), "MThd");
  relgrad::testing::write_bytes(dir.file("notes.txt"), "not midi");
  MidiFile empty;
  empty.format = 0;
  empty.tracks.resize(1);
  write_midi(dir.file("silent.mid"), empty);

  MusicDatasetConfig config;
  config.folder = dir.path.string();
  config.val_fraction = 0.34;
  MusicDataset data(config);
  CHECK_FALSE(data.synthetic());
  CHECK(data.files(Split::Train).size() == 4);
  CHECK(data.files(Split::HeldOut).size() == 2);
  REQUIRE(data.skipped().size() == 2);
  CHECK(data.skipped()[0].path.find("broken.mid") != std::string::npos);
  CHECK(data.skipped()[0].error.find("[midi] ") == 0);
  CHECK(data.skipped()[0].error.find("broken.mid: truncated header length") != std::string::npos);
  CHECK(data.skipped()[1].error.find("no notes") != std::string::npos);
  for (const auto& seq : data.sequences(Split::Train)) {
    CHECK(seq.front() == kBos);
    CHECK(seq.back() == kEos);
  }
  Batch b = data.batch(0, 8, 32, Split::HeldOut);
  CHECK(b.tokens.shape() == Shape{8, 32});
  CHECK(b.num_targets > 0);
  CHECK(b.tokens.to_vector<int64_t>() == data.batch(0, 8, 32, Split::HeldOut).tokens.to_vector<int64_t>());
  // Each held-out window comes from a held-out file.
  std::vector<int64_t> row = b.tokens.to_vector<int64_t>();
  for (int64_t r = 0; r < 8; ++r) {
    bool found = false;
    for (const auto& seq : data.sequences(Split::HeldOut))
      found |= std::search(seq.begin(), seq.end(), row.begin() + r * 32, row.begin() + r * 32 + 8) != seq.end();
    CHECK(found);
  }

  config.val_fraction = 0.0;
  CHECK(MusicDataset(config).files(Split::Train).size() == 6);
  check_throws_with([&] { MusicDataset(config).batch(0, 2, 8, Split::HeldOut); }, "no validation files");
  relgrad::testing::TempDir nothing;
  relgrad::testing::write_bytes(nothing.file("bad.mid"), "MThd");
  config.folder = nothing.path.string();
  check_throws_with([&] { MusicDataset d(config); }, "no usable .mid/.midi file");
  config.folder = "/nonexistent";
  check_throws_with([&] { MusicDataset d(config); }, "is not a directory");
}
