// Standard MIDI File reader and writer. See midi.h for the data model, the rules and the limits.
#include "train/music/midi.h"

#include <algorithm>

#include "core/base/error.h"
#include "core/file_io.h"

namespace relgrad {

namespace {

std::string hex_byte(unsigned b) {
  static const char* digits = "0123456789ABCDEF";
  return std::string("0x") + digits[(b >> 4) & 15] + digits[b & 15];
}

// Data bytes of a channel message, by its kind (high nibble).
int channel_data_size(uint8_t status) {
  const int kind = status & 0xF0;
  return kind == 0xC0 || kind == 0xD0 ? 1 : 2;
}

// A cursor over the file's bytes. Every read checks against `limit_` (the end of the current chunk,
// or of the file), so no read can run past the input.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& name) : bytes_(bytes), name_(name), limit_(bytes.size()) {}

  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw Error(detail::concat("[midi] ", name_, ": ", what, " at byte ", at));
  }
  size_t pos() const { return pos_; }
  size_t left() const { return limit_ - pos_; }
  void set_limit(size_t limit, bool in_chunk) { limit_ = limit; in_chunk_ = in_chunk; }
  void skip(size_t n) { pos_ += n; }  // callers check n <= left()

  uint8_t byte(const char* what) {
    if (pos_ >= limit_) fail(detail::concat("truncated ", what, in_chunk_ ? " (end of chunk)" : " (end of file)"), pos_);
    return static_cast<uint8_t>(bytes_[pos_++]);
  }
  uint32_t u16(const char* what) { uint32_t hi = byte(what); return (hi << 8) | byte(what); }
  uint32_t u32(const char* what) { uint32_t hi = u16(what); return (hi << 16) | u16(what); }

  // A variable-length quantity: 7 bits per byte, high bit = more follows, at most 4 bytes.
  uint32_t vlq(const char* what) {
    const size_t at = pos_;
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const uint8_t b = byte(what);
      value = (value << 7) | (b & 0x7F);
      if (!(b & 0x80)) return value;
    }
    fail(detail::concat(what, " is a variable-length quantity longer than 4 bytes"), at);
  }

  std::vector<uint8_t> take(uint32_t n, const char* what) {
    if (n > left()) fail(detail::concat(what, " declares ", n, " bytes but only ", left(), " remain"), pos_);
    std::vector<uint8_t> out(bytes_.begin() + pos_, bytes_.begin() + pos_ + n);
    pos_ += n;
    return out;
  }

 private:
  const std::string& bytes_;
  const std::string& name_;
  size_t pos_ = 0;
  size_t limit_;
  bool in_chunk_ = false;
};

// The events of one MTrk chunk whose body is [r.pos(), end). `events_so_far` counts all tracks.
MidiTrack read_track(Reader& r, size_t end, int64_t& events_so_far) {
  MidiTrack track;
  r.set_limit(end, true);
  int64_t tick = 0;
  uint8_t running = 0;  // 0 = no running status
  while (r.pos() < end) {
    const size_t at = r.pos();
    tick += r.vlq("delta time");
    const size_t status_at = r.pos();
    const uint8_t first = r.byte("event");
    MidiEvent e;
    e.tick = tick;
    if (first >= 0x80 && first < 0xF0) {
      e.status = running = first;
    } else if (first < 0x80) {
      if (!running) r.fail(detail::concat("data byte ", hex_byte(first), " with no running status (no previous channel ",
                                          "message, or a meta/sysex event cancelled it)"), status_at);
      e.status = running;
    } else {
      e.status = first;
      running = 0;  // meta and sysex events cancel running status (SMF 1.0)
    }

    if (e.is_channel()) {
      const int n = channel_data_size(e.status);
      if (first < 0x80) e.data.push_back(first);
      while (static_cast<int>(e.data.size()) < n) {
        const size_t data_at = r.pos();
        const uint8_t b = r.byte("channel message");
        if (b >= 0x80) r.fail(detail::concat("data byte ", hex_byte(b), " of a ", hex_byte(e.status), " message is >= 0x80"), data_at);
        e.data.push_back(b);
      }
    } else if (e.status == 0xFF) {
      e.meta_type = r.byte("meta event");
      e.data = r.take(r.vlq("meta event length"), "meta event");
      if (e.meta_type == 0x2F) break;  // End of Track: anything after it in the chunk is ignored
    } else if (e.status == 0xF0 || e.status == 0xF7) {
      e.data = r.take(r.vlq("sysex length"), "sysex event");
    } else {
      r.fail(detail::concat("status byte ", hex_byte(e.status), " (system common/real-time) is not allowed in a file"), status_at);
    }
    if (++events_so_far > kMidiMaxEvents) r.fail(detail::concat("more than ", kMidiMaxEvents, " events (relgrad's limit)"), at);
    track.events.push_back(std::move(e));
  }
  track.end_tick = tick;  // End of Track's tick, or the last event's when it is missing
  return track;
}

// ---- writer helpers --------------------------------------------------------------------------

void put_u16(std::string& out, uint32_t v) { out += static_cast<char>(v >> 8); out += static_cast<char>(v & 0xFF); }
void put_u32(std::string& out, uint32_t v) { put_u16(out, v >> 16); put_u16(out, v & 0xFFFF); }
void put_vlq(std::string& out, uint32_t v) {
  char buf[4];
  int n = 0;
  do { buf[n++] = static_cast<char>(v & 0x7F); v >>= 7; } while (v);
  while (n > 1) out += static_cast<char>(buf[--n] | 0x80);
  out += buf[0];
}

void check_byte(int value, int lo, int hi, const char* what) {
  RG_CHECK(value >= lo && value <= hi, "midi", what, " must be in [", lo, ", ", hi, "], got ", value);
}

}  // namespace

// ---- MidiEvent --------------------------------------------------------------------------------

int MidiEvent::tempo() const {
  RG_CHECK(is_meta(0x51) && data.size() == 3, "midi", "tempo event at tick ", tick, " must be meta 0x51 with 3 data bytes, got status ",
           hex_byte(status), " type ", hex_byte(meta_type), " with ", data.size(), " bytes");
  const int value = (data[0] << 16) | (data[1] << 8) | data[2];
  RG_CHECK(value > 0, "midi", "tempo event at tick ", tick, " has tempo 0 microseconds per quarter");
  return value;
}

MidiEvent MidiEvent::note_on(int64_t tick, int channel, int pitch, int velocity) {
  check_byte(channel, 0, 15, "channel"); check_byte(pitch, 0, 127, "pitch"); check_byte(velocity, 0, 127, "velocity");
  return {tick, static_cast<uint8_t>(0x90 | channel), 0, {static_cast<uint8_t>(pitch), static_cast<uint8_t>(velocity)}};
}
MidiEvent MidiEvent::note_off(int64_t tick, int channel, int pitch, int velocity) {
  check_byte(channel, 0, 15, "channel"); check_byte(pitch, 0, 127, "pitch"); check_byte(velocity, 0, 127, "velocity");
  return {tick, static_cast<uint8_t>(0x80 | channel), 0, {static_cast<uint8_t>(pitch), static_cast<uint8_t>(velocity)}};
}
MidiEvent MidiEvent::control_change(int64_t tick, int channel, int control, int value) {
  check_byte(channel, 0, 15, "channel"); check_byte(control, 0, 127, "control"); check_byte(value, 0, 127, "value");
  return {tick, static_cast<uint8_t>(0xB0 | channel), 0, {static_cast<uint8_t>(control), static_cast<uint8_t>(value)}};
}
MidiEvent MidiEvent::program_change(int64_t tick, int channel, int program) {
  check_byte(channel, 0, 15, "channel"); check_byte(program, 0, 127, "program");
  return {tick, static_cast<uint8_t>(0xC0 | channel), 0, {static_cast<uint8_t>(program)}};
}
MidiEvent MidiEvent::pitch_bend(int64_t tick, int channel, int value) {
  check_byte(channel, 0, 15, "channel"); check_byte(value, -8192, 8191, "pitch bend");
  const int v = value + 8192;  // 14 bits, least significant 7 first
  return {tick, static_cast<uint8_t>(0xE0 | channel), 0, {static_cast<uint8_t>(v & 0x7F), static_cast<uint8_t>(v >> 7)}};
}
MidiEvent MidiEvent::meta(int64_t tick, uint8_t type, std::vector<uint8_t> data) {
  return {tick, 0xFF, type, std::move(data)};
}
MidiEvent MidiEvent::text(int64_t tick, uint8_t type, const std::string& text) {
  return {tick, 0xFF, type, std::vector<uint8_t>(text.begin(), text.end())};
}
MidiEvent MidiEvent::set_tempo(int64_t tick, int us) {
  RG_CHECK(us >= 1 && us <= 0xFFFFFF, "midi", "tempo must be in [1, 16777215] microseconds per quarter, got ", us);
  return {tick, 0xFF, 0x51, {static_cast<uint8_t>(us >> 16), static_cast<uint8_t>((us >> 8) & 0xFF), static_cast<uint8_t>(us & 0xFF)}};
}
MidiEvent MidiEvent::time_signature(int64_t tick, int numerator, int denominator_power, int clocks, int notated_32nds) {
  check_byte(numerator, 1, 255, "numerator"); check_byte(denominator_power, 0, 255, "denominator power");
  check_byte(clocks, 0, 255, "clocks per click"); check_byte(notated_32nds, 0, 255, "32nds per quarter");
  return {tick, 0xFF, 0x58, {static_cast<uint8_t>(numerator), static_cast<uint8_t>(denominator_power),
                             static_cast<uint8_t>(clocks), static_cast<uint8_t>(notated_32nds)}};
}
MidiEvent MidiEvent::sysex(int64_t tick, std::vector<uint8_t> data) { return {tick, 0xF0, 0, std::move(data)}; }

// ---- reader -----------------------------------------------------------------------------------

MidiFile parse_midi(const std::string& bytes, const std::string& name) {
  Reader r(bytes, name);
  if (bytes.size() > kMidiMaxFileBytes) r.fail(detail::concat("file of ", bytes.size(), " bytes exceeds relgrad's limit of ", kMidiMaxFileBytes), 0);
  if (bytes.size() < 4 || bytes.compare(0, 4, "MThd") != 0) r.fail("not a Standard MIDI File (it does not start with \"MThd\")", 0);
  r.skip(4);
  const uint32_t header_length = r.u32("header length");
  if (header_length < 6) r.fail(detail::concat("header length ", header_length, " is shorter than 6"), 4);
  if (header_length > r.left()) r.fail(detail::concat("header declares ", header_length, " bytes but only ", r.left(), " remain"), 4);
  const size_t header_end = r.pos() + header_length;

  MidiFile file;
  file.format = static_cast<int>(r.u16("format"));
  const uint32_t ntracks = r.u16("track count");
  const uint32_t division = r.u16("division");
  if (file.format > 2) r.fail(detail::concat("unknown format ", file.format, " (expected 0, 1 or 2)"), 8);
  if (ntracks == 0) r.fail("the header declares no tracks", 10);
  if (file.format == 0 && ntracks != 1) r.fail(detail::concat("format 0 must have exactly 1 track, the header declares ", ntracks), 10);
  if (division & 0x8000) r.fail(detail::concat("SMPTE time division (", hex_byte(division >> 8), hex_byte(division & 0xFF).substr(2),
                                               ") is not supported, only ticks per quarter note"), 12);
  if (division == 0) r.fail("0 ticks per quarter note", 12);
  file.ticks_per_quarter = static_cast<int>(division);
  r.skip(header_end - r.pos());  // a longer header is allowed; its extra bytes mean nothing to us

  int64_t events = 0;
  while (file.tracks.size() < ntracks) {
    const size_t chunk_at = r.pos();
    if (r.left() < 8)
      r.fail(detail::concat("the header declares ", ntracks, " tracks but the file ends after ", file.tracks.size(),
                            r.left() ? " (with a truncated chunk header)" : ""), chunk_at);
    const std::string type = bytes.substr(chunk_at, 4);
    r.skip(4);
    const uint32_t length = r.u32("chunk length");
    if (length > r.left())
      r.fail(detail::concat("chunk of ", length, " bytes but only ", r.left(), " remain (truncated file)"), chunk_at + 4);
    const size_t end = r.pos() + length;
    if (type == "MTrk") {
      file.tracks.push_back(read_track(r, end, events));
      r.set_limit(bytes.size(), false);
    }
    r.skip(end - r.pos());  // unknown chunk types, and any bytes after a track's End of Track
  }
  return file;
}

MidiFile read_midi(const std::string& path) {
  return parse_midi(read_file(path, "midi", kMidiMaxFileBytes), path);
}

// ---- writer -----------------------------------------------------------------------------------

std::string serialize_midi(const MidiFile& file, const MidiWriteOptions& options) {
  const size_t ntracks = file.tracks.size();
  RG_CHECK(file.format >= 0 && file.format <= 2, "midi", "format must be 0, 1 or 2, got ", file.format);
  RG_CHECK(ntracks >= 1 && ntracks <= 65535, "midi", "a file needs 1 to 65535 tracks, got ", ntracks);
  RG_CHECK(file.format != 0 || ntracks == 1, "midi", "format 0 needs exactly 1 track, got ", ntracks);
  RG_CHECK(file.ticks_per_quarter >= 1 && file.ticks_per_quarter <= 32767, "midi", "ticks_per_quarter must be in [1, 32767], got ",
           file.ticks_per_quarter);

  std::string out = "MThd";
  put_u32(out, 6);
  put_u16(out, file.format);
  put_u16(out, static_cast<uint32_t>(ntracks));
  put_u16(out, file.ticks_per_quarter);

  for (size_t t = 0; t < ntracks; ++t) {
    const MidiTrack& track = file.tracks[t];
    std::string body;
    int64_t prev = 0, end = track.end();
    uint8_t running = 0;
    for (size_t i = 0; i < track.events.size(); ++i) {
      const MidiEvent& e = track.events[i];
      RG_CHECK(e.tick >= prev, "midi", "track ", t, " event ", i, ": tick ", e.tick, " is before the previous event's tick ", prev,
               " (events must be sorted, ticks >= 0)");
      if (e.is_meta(0x2F)) { end = std::max(end, e.tick); continue; }  // written once, at the end
      RG_CHECK(e.tick - prev <= kMidiMaxVlq, "midi", "track ", t, " event ", i, ": delta of ", e.tick - prev,
               " ticks exceeds the largest variable-length quantity ", kMidiMaxVlq);
      RG_CHECK(e.data.size() <= kMidiMaxVlq, "midi", "track ", t, " event ", i, ": ", e.data.size(), " data bytes is too long");
      put_vlq(body, static_cast<uint32_t>(e.tick - prev));
      if (e.is_channel()) {
        RG_CHECK(static_cast<int>(e.data.size()) == channel_data_size(e.status), "midi", "track ", t, " event ", i, ": status ",
                 hex_byte(e.status), " needs ", channel_data_size(e.status), " data bytes, got ", e.data.size());
        for (uint8_t b : e.data)
          RG_CHECK(b < 0x80, "midi", "track ", t, " event ", i, ": data byte ", hex_byte(b), " is >= 0x80");
        if (!options.running_status || e.status != running) body += static_cast<char>(e.status);
        running = e.status;
      } else if (e.is_meta() || e.is_sysex()) {
        body += static_cast<char>(e.status);
        if (e.is_meta()) body += static_cast<char>(e.meta_type);
        put_vlq(body, static_cast<uint32_t>(e.data.size()));
        running = 0;
      } else {
        RG_CHECK(false, "midi", "track ", t, " event ", i, ": status ", hex_byte(e.status), " cannot be written to a file");
      }
      body.append(e.data.begin(), e.data.end());
      prev = e.tick;
    }
    end = std::max(end, prev);
    RG_CHECK(end - prev <= kMidiMaxVlq, "midi", "track ", t, ": end_tick ", end, " is too far after the last event");
    put_vlq(body, static_cast<uint32_t>(end - prev));
    body += "\xFF\x2F";
    body += '\0';
    RG_CHECK(body.size() <= 0xFFFFFFFFu, "midi", "track ", t, " is longer than 4 GiB");
    out += "MTrk";
    put_u32(out, static_cast<uint32_t>(body.size()));
    out += body;
  }
  return out;
}

void write_midi(const std::string& path, const MidiFile& file, const MidiWriteOptions& options) {
  write_file_atomic(path, serialize_midi(file, options), "midi");
}

// ---- TempoMap ---------------------------------------------------------------------------------

TempoMap::TempoMap(const MidiFile& file) : ticks_per_quarter_(file.ticks_per_quarter) {
  RG_CHECK(file.format != 2, "midi", "format 2 files hold independent sequences with their own tempo maps; not supported here");
  RG_CHECK(ticks_per_quarter_ >= 1, "midi", "ticks_per_quarter must be positive, got ", ticks_per_quarter_);
  std::vector<std::pair<int64_t, int>> changes;  // (tick, tempo) in track order, then event order
  for (const MidiTrack& track : file.tracks)
    for (const MidiEvent& e : track.events)
      if (e.is_meta(0x51)) changes.emplace_back(e.tick, e.tempo());
  std::stable_sort(changes.begin(), changes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  segments_.push_back({0, kMidiDefaultTempo, 0.0});
  for (const auto& [tick, tempo] : changes) {
    const Segment& last = segments_.back();
    const int64_t at = std::max<int64_t>(tick, 0);
    const double seconds = last.seconds + static_cast<double>(at - last.tick) * last.tempo / (1e6 * ticks_per_quarter_);
    segments_.push_back({at, tempo, seconds});  // several at one tick: the last one wins
  }
}

int TempoMap::tempo_at(int64_t tick) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), tick, [](int64_t t, const Segment& s) { return t < s.tick; });
  return it == segments_.begin() ? segments_.front().tempo : std::prev(it)->tempo;
}

double TempoMap::seconds(int64_t tick) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), tick, [](int64_t t, const Segment& s) { return t < s.tick; });
  const Segment& s = it == segments_.begin() ? segments_.front() : *std::prev(it);
  return s.seconds + static_cast<double>(tick - s.tick) * s.tempo / (1e6 * ticks_per_quarter_);
}

}  // namespace relgrad
