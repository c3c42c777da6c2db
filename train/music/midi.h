// Standard MIDI Files (SMF, the ".mid" format), read and written by relgrad itself: no library, so
// that a hostile or broken file can only ever produce a relgrad::Error (Debian's libsmf was found to overflow
// its heap on every truncation of a valid file).
//
// Data model. A file is a header (format, ticks per quarter note) and tracks; a track is a list of
// events with ABSOLUTE tick times (non-decreasing). Each event keeps its bytes as the file had them:
//   status 0x80..0xEF  channel message (high nibble = kind, low nibble = channel 0..15);
//                      data = its 1 or 2 data bytes (each < 0x80)
//   status 0xFF        meta event; meta_type = its type (0x51 tempo, 0x58 time signature, 0x01..0x0F
//                      text, ...); data = its payload
//   status 0xF0, 0xF7  sysex (F0) or escape/continuation (F7) event; data = the bytes after the
//                      length, as stored (an F0 message normally ends with its own 0xF7 byte)
// The End of Track meta event (FF 2F 00) is not an event here: the reader removes it and records
// its tick in MidiTrack::end_tick; the writer always writes exactly one, at the end. A note-on with
// velocity 0 is kept as it is (so a file is rewritten byte for byte) and means note-off:
// is_note_off() says so.
//
// Reader rules (the SMF 1.0 spec):
//   - chunks: "MThd" first (length >= 6; extra header bytes skipped), then chunks of any type; the
//     first `ntrks` "MTrk" chunks are the tracks, other chunk types are skipped; bytes after the
//     last track are ignored. Fewer MTrk chunks than the header declares is an error.
//   - format 0 (one track) and 1 (simultaneous tracks sharing track 0's tempo map) are read; format 2
//     (independent sequences) is read as it is, but TempoMap and the music encoding refuse it.
//   - division: ticks per quarter note (1..32767); SMPTE time codes (top bit set) are refused.
//   - variable-length quantities have at most 4 bytes (values < 2^28).
//   - running status: a data byte where a status byte is expected repeats the last channel status;
//     meta and sysex events cancel it, so a data byte right after them (or at the start of a track)
//     is an error. (mido is more lenient: it keeps the running status across meta events.)
//   - system common / real-time bytes (0xF1..0xFE) are not allowed in a file; data bytes >= 0x80 are
//     errors; an End of Track ends the track even if the chunk has bytes left (they are ignored);
//     a track without End of Track is accepted and ends at its last byte.
// Every problem is "[midi] <path>: <what> at byte N" (N the offset in the file). Nothing is ever
// allocated from a count in the file before it has been checked against the bytes that are left,
// and every loop consumes input. Memory is bounded by the file: an event takes at least 2 bytes of
// the file and about 80 bytes of memory.
//
// Limits: file size kMidiMaxFileBytes (64 MiB), kMidiMaxEvents (8,000,000) events in all (about
// 650 MB in memory), tracks 65535 (the header field is 16 bits). Bigger inputs are clear errors.
//
// Fuzzing: the fuzz target is the "midi fuzz" test case (tests/test_midi.cpp): seeded mutations of
// valid files through parse_midi, the writer and the music encoding, 20,000 by default;
// RELGRAD_MIDI_FUZZ=<count> runs more. Run it in an -fsanitize=address,undefined build (see the
// top of tests/test_midi.cpp) so that a memory error is reported, not just a crash.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace relgrad {

inline constexpr uint64_t kMidiMaxFileBytes = uint64_t(64) << 20;
inline constexpr int64_t kMidiMaxEvents = 8'000'000;
inline constexpr uint32_t kMidiMaxVlq = 0x0FFFFFFF;  // the largest 4-byte variable-length quantity
inline constexpr int kMidiDefaultTempo = 500000;     // microseconds per quarter note (120 bpm)

struct MidiEvent {
  int64_t tick = 0;        // absolute time in ticks from the start of the track
  uint8_t status = 0;      // see the file comment
  uint8_t meta_type = 0;   // meta events only, else 0
  std::vector<uint8_t> data;

  bool is_channel() const { return status >= 0x80 && status < 0xF0; }
  bool is_meta() const { return status == 0xFF; }
  bool is_meta(uint8_t type) const { return status == 0xFF && meta_type == type; }
  bool is_sysex() const { return status == 0xF0 || status == 0xF7; }
  int kind() const { return status & 0xF0; }     // 0x80 note-off, 0x90 note-on, 0xB0 control, ...
  int channel() const { return status & 0x0F; }  // channel messages only
  bool is_note_on() const { return kind() == 0x90 && data.size() == 2 && data[1] > 0; }
  bool is_note_off() const { return (kind() == 0x80 || (kind() == 0x90 && data.size() == 2 && data[1] == 0)) && is_channel(); }
  int tempo() const;  // microseconds per quarter of a tempo meta event (checked)

  // Constructors for the common events (arguments checked: channel 0..15, values 0..127).
  static MidiEvent note_on(int64_t tick, int channel, int pitch, int velocity);
  static MidiEvent note_off(int64_t tick, int channel, int pitch, int velocity = 0);
  static MidiEvent control_change(int64_t tick, int channel, int control, int value);
  static MidiEvent program_change(int64_t tick, int channel, int program);
  static MidiEvent pitch_bend(int64_t tick, int channel, int value);  // value -8192..8191
  static MidiEvent meta(int64_t tick, uint8_t type, std::vector<uint8_t> data);
  static MidiEvent text(int64_t tick, uint8_t type, const std::string& text);  // 0x01 text, 0x03 track name, ...
  static MidiEvent set_tempo(int64_t tick, int microseconds_per_quarter);     // 1 .. 2^24 - 1
  static MidiEvent time_signature(int64_t tick, int numerator, int denominator_power, int clocks = 24, int notated_32nds = 8);
  static MidiEvent sysex(int64_t tick, std::vector<uint8_t> data);            // F0 event; data should end with 0xF7

  bool operator==(const MidiEvent& o) const {
    return tick == o.tick && status == o.status && meta_type == o.meta_type && data == o.data;
  }
  bool operator!=(const MidiEvent& o) const { return !(*this == o); }
};

struct MidiTrack {
  std::vector<MidiEvent> events;  // sorted by tick (non-decreasing); no End of Track event
  int64_t end_tick = 0;           // tick of End of Track; may be left 0 when building a track
  // Where the track really ends (and the writer puts End of Track): max(end_tick, last event's tick).
  int64_t end() const { return events.empty() ? end_tick : std::max(end_tick, events.back().tick); }
  // Same events and same end() (a track built with end_tick 0 equals the one read back).
  bool operator==(const MidiTrack& o) const { return events == o.events && end() == o.end(); }
};

struct MidiFile {
  int format = 1;                 // 0, 1 or 2
  int ticks_per_quarter = 480;    // 1..32767
  std::vector<MidiTrack> tracks;
  bool operator==(const MidiFile& o) const {
    return format == o.format && ticks_per_quarter == o.ticks_per_quarter && tracks == o.tracks;
  }
};

// Parses the bytes of a file; `name` is used in error messages only.
MidiFile parse_midi(const std::string& bytes, const std::string& name = "<memory>");
// Reads and parses a file (at most kMidiMaxFileBytes).
MidiFile read_midi(const std::string& path);

struct MidiWriteOptions {
  bool running_status = true;  // omit a channel status byte equal to the previous one (as mido does)
};
// The bytes of a file. Checks: format 0 has exactly one track, format 1 and 2 at least one (at most
// 65535); ticks_per_quarter 1..32767; events sorted by tick, tick >= 0, deltas and lengths below
// 2^28; channel messages have the right number of data bytes, each < 0x80. End of Track meta events
// found among the events are not written (only their tick counts towards the end).
std::string serialize_midi(const MidiFile& file, const MidiWriteOptions& options = {});
// serialize_midi, written atomically (core/file_io.h).
void write_midi(const std::string& path, const MidiFile& file, const MidiWriteOptions& options = {});

// Ticks → seconds for a format 0 or 1 file: the tempo events of all tracks form one map (by the
// spec they live in track 0 of a format-1 file, but stray ones elsewhere are honoured too); before
// the first tempo event the tempo is 120 bpm. Format 2 is refused.
class TempoMap {
 public:
  explicit TempoMap(const MidiFile& file);
  double seconds(int64_t tick) const;
  int tempo_at(int64_t tick) const;  // microseconds per quarter in effect at `tick`

 private:
  struct Segment { int64_t tick; int tempo; double seconds; };  // from `tick` on, at `tempo`
  std::vector<Segment> segments_;  // sorted by tick; the first at tick 0
  int ticks_per_quarter_;
};

}  // namespace relgrad
