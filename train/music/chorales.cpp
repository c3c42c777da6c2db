// The chorale file (parse, read, find, write), the token serialisation and MIDI both ways
// (train/music/chorales.h). The datasets are in train/music/chorale_data.cpp.
//
// The parser is nlohmann's SAX interface driving a small state machine, so the file is checked as it
// streams past and nothing but the chorales themselves is kept: no DOM of a 64 MiB hostile file, and
// every refusal knows where it is (split, chorale, step, voice) or, for bad JSON, the byte offset.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/music/chorales.h"

namespace relgrad {

namespace {

const char* const kVoiceNames[kChoraleVoices] = {"soprano", "alto", "tenor", "bass"};
const char* const kSplitNames[3] = {"train", "valid", "test"};

// SAX handler: depth 1 is the top object, 2 a split's array of chorales, 3 a chorale's array of
// steps, 4 a step's array of voices. Anything out of place throws at once.
class ChoraleSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  ChoraleSax(ChoraleSet& set, std::string origin, size_t size)
      : set_(set), origin_(std::move(origin)), size_(size) {}

  bool null() override { return value("null"); }
  bool boolean(bool b) override { return value(b ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return integer(v, std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    // Anything above 1000 is out of range anyway; the clamp keeps a value above 2^63 from wrapping.
    return integer(v > 1000 ? 1000 : static_cast<int64_t>(v), std::to_string(v));
  }
  bool number_float(number_float_t v, const string_t& text) override {
    // numpy writes 60.0; an integral float is that integer, anything else is refused.
    if (depth_ == 4 && std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 1000)
      return integer(static_cast<int64_t>(v), text);
    if (depth_ == 4) fail(where_voice() + ": " + text + " is not an integer");
    return value("the number " + text);
  }
  bool string(string_t& s) override { return value("a string (\"" + s.substr(0, 20) + "\")"); }
  bool binary(binary_t&) override { return value("binary data"); }

  bool start_object(std::size_t) override {
    if (depth_ != 0) return value("an object");
    depth_ = 1;
    return true;
  }
  bool key(string_t& k) override {
    int which = -1;
    for (int i = 0; i < 3; ++i)
      if (k == kSplitNames[i]) which = i;
    if (which < 0)
      fail("unexpected key '" + k.substr(0, 40) + "' (the keys are \"train\", \"valid\" and \"test\")");
    if (seen_[which]) fail("duplicate key '" + k + "'");
    seen_[which] = true;
    split_ = which;
    return true;
  }
  bool end_object() override {
    for (int i = 0; i < 3; ++i)
      if (!seen_[i]) fail(std::string("missing key '") + kSplitNames[i] + "'");
    depth_ = 0;
    done_ = true;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 1) {
      depth_ = 2;
      chorale_ = -1;
    } else if (depth_ == 2) {
      depth_ = 3;
      ++chorale_;
      split().emplace_back();
    } else if (depth_ == 3) {
      depth_ = 4;
      Chorale& c = split().back();
      if (static_cast<int64_t>(c.steps.size()) >= kMaxChoraleSteps)
        fail(where_chorale() + ": more than " + std::to_string(kMaxChoraleSteps) + " steps");
      c.steps.push_back({0, 0, 0, 0});
      voice_ = 0;
    } else {
      return value("an array");
    }
    return true;
  }
  bool end_array() override {
    if (depth_ == 4) {
      if (voice_ != kChoraleVoices)
        fail(where_step() + ": a step must be an array of four integers (soprano, alto, tenor, bass), got " +
             std::to_string(voice_) + " value" + (voice_ == 1 ? "" : "s"));
    } else if (depth_ == 3) {
      if (split().back().steps.empty()) fail(where_chorale() + ": a chorale must have at least one step");
    }
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    // nlohmann's own text repeats the position as "line L, column C"; keep its reason only.
    const size_t colon = what.find(": syntax error");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    // nlohmann counts the bytes read, the offending one included (end of input counts as one).
    const size_t offset = position > 0 ? position - 1 : 0;
    fail("not valid JSON at byte " + std::to_string(offset) +
         (offset >= size_ ? " (the end of the text)" : "") + ": " + what);
    return false;
  }
  bool done() const { return done_; }

 private:
  std::vector<Chorale>& split() { return split_ == 0 ? set_.train : split_ == 1 ? set_.valid : set_.test; }
  std::string where_chorale() const {
    return std::string(kSplitNames[split_]) + " chorale " + std::to_string(chorale_);
  }
  std::string where_step() {
    return where_chorale() + " step " + std::to_string(split().back().steps.size() - 1);
  }
  std::string where_voice() {
    if (voice_ >= kChoraleVoices) return where_step();
    return where_step() + " voice " + std::to_string(voice_) + " (" + kVoiceNames[voice_] + ")";
  }
  std::string where() {
    switch (depth_) {
      case 0: return "the top level";
      case 1: return std::string("key '") + kSplitNames[split_] + "'";
      case 2: return kSplitNames[split_];
      case 3: return where_chorale();
      default: return where_voice();
    }
  }
  [[noreturn]] void fail(const std::string& what) { throw Error("[chorales] " + origin_ + ": " + what); }

  // A value that does not belong where it stands: say what was expected there.
  [[noreturn]] bool value(const std::string& what) {
    switch (depth_) {
      case 0:
        fail("the file must be one JSON object with the keys \"train\", \"valid\" and \"test\", got " + what);
      case 1: fail(where() + " must be an array of chorales, got " + what);
      case 2:
        fail(where() + " chorale " + std::to_string(chorale_ + 1) +
             ": a chorale must be an array of steps, got " + what);
      case 3:
        fail(where() + " step " + std::to_string(split().back().steps.size()) +
             ": a step must be an array of four integers, got " + what);
      default: fail(where() + ": must be -1 or a pitch 0..127, got " + what);
    }
  }
  bool integer(int64_t v, const std::string& text) {
    if (depth_ != 4) return value("the number " + text);
    if (voice_ >= kChoraleVoices)
      fail(where_step() +
           ": a step must be an array of four integers (soprano, alto, tenor, bass), got more");
    if (v < -1 || v > 127) fail(where_voice() + ": " + text + " is not -1 or a pitch 0..127");
    split().back().steps.back()[voice_++] = static_cast<int>(v);
    return true;
  }

  ChoraleSet& set_;
  std::string origin_;
  size_t size_;
  int depth_ = 0, split_ = 0, voice_ = 0;
  int64_t chorale_ = -1;
  bool seen_[3] = {false, false, false};
  bool done_ = false;
};

std::string pitch_name(int p) {
  static const char* const kNames[12] = {"C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B"};
  return kNames[p % 12] + std::to_string(p / 12 - 1);
}

}  // namespace

const char* to_string(ChoraleSplit split) { return kSplitNames[static_cast<int>(split)]; }

const std::vector<Chorale>& ChoraleSet::split(ChoraleSplit s) const {
  return s == ChoraleSplit::Train ? train : s == ChoraleSplit::Valid ? valid : test;
}

ChoraleSet parse_chorales(const std::string& json_text, const std::string& origin) {
  RG_CHECK(static_cast<int64_t>(json_text.size()) <= kMaxChoraleFileBytes, "chorales", origin,
           ": the text is ", json_text.size(), " bytes, more than the limit of ", kMaxChoraleFileBytes,
           " bytes");
  ChoraleSet set;
  ChoraleSax sax(set, origin, json_text.size());
  nlohmann::json::sax_parse(json_text, &sax);
  RG_CHECK(sax.done(), "chorales", origin, ": incomplete JSON");
  return set;
}

ChoraleSet read_chorales(const std::string& path) {
  return parse_chorales(read_file(path, "chorales", static_cast<uint64_t>(kMaxChoraleFileBytes)), path);
}

std::string default_chorales_path() {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("data") / "jsb" / "Jsb16thSeparated.json";
  std::vector<fs::path> tried;
  std::error_code ec;
  tried.push_back(fs::current_path(ec) / rel);
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      tried.push_back(dir / rel);
      if (dir == dir.root_path()) break;
    }
#ifdef RELGRAD_SOURCE_DIR
  tried.push_back(fs::path(RELGRAD_SOURCE_DIR) / rel);
#endif
  std::string list;
  for (const fs::path& p : tried) {
    if (fs::is_regular_file(p, ec)) return p.string();
    list += (list.empty() ? "" : ", ") + p.string();
  }
  RG_CHECK(false, "chorales", "cannot find ", rel.string(), " (looked in: ", list,
           "); give the path of Jsb16thSeparated.json");
  return "";
}

std::string chorales_to_json(const ChoraleSet& set) {
  std::string out = "{";
  for (int s = 0; s < 3; ++s) {
    out += std::string(s ? ", \"" : "\"") + kSplitNames[s] + "\": [";
    const auto& chorales = set.split(static_cast<ChoraleSplit>(s));
    for (size_t c = 0; c < chorales.size(); ++c) {
      out += c ? ", [" : "[";
      for (size_t k = 0; k < chorales[c].steps.size(); ++k) {
        const auto& st = chorales[c].steps[k];
        out += (k ? ", [" : "[") + std::to_string(st[0]) + ", " + std::to_string(st[1]) + ", " +
               std::to_string(st[2]) + ", " + std::to_string(st[3]) + "]";
      }
      out += "]";
    }
    out += "]";
  }
  return out + "}";
}

// ---- tokens --------------------------------------------------------------------------------------

Vocab chorale_vocab() {
  Vocab v;
  v.size = kChoraleVocabSize;
  v.names = {"<pad>", "<bos>", "<eos>", "REST"};
  for (int p = 0; p < 128; ++p) v.names.push_back(pitch_name(p));
  return v;
}

int64_t chorale_token(int pitch) {
  RG_CHECK(pitch >= -1 && pitch <= 127, "chorale_token", "pitch must be -1 (rest) or 0..127, got ", pitch);
  return pitch < 0 ? kChoraleRest : kChoralePitchBase + pitch;
}

int chorale_pitch(int64_t token) {
  RG_CHECK(token >= kChoraleRest && token < kChoraleVocabSize, "chorale_pitch",
           "token must be REST (3) or a pitch (4..131), got ", token);
  return token == kChoraleRest ? kChoraleRestPitch : static_cast<int>(token - kChoralePitchBase);
}

Chorale chorale_opening(const Chorale& chorale) {
  Chorale opening;
  const size_t steps = std::min(kChoralePromptSteps, chorale.steps.size());
  opening.steps.assign(chorale.steps.begin(), chorale.steps.begin() + static_cast<std::ptrdiff_t>(steps));
  return opening;
}

std::vector<int64_t> chorale_tokens(const Chorale& chorale) {
  std::vector<int64_t> out;
  out.reserve(4 * chorale.steps.size() + 2);
  out.push_back(kBos);
  for (const auto& step : chorale.steps)
    for (int p : step) out.push_back(chorale_token(p));
  out.push_back(kEos);
  return out;
}

Chorale chorale_from_tokens(const std::vector<int64_t>& tokens) {
  Chorale c;
  std::array<int, kChoraleVoices> step{};
  int voice = 0;
  for (int64_t t : tokens) {
    if (t == kEos) break;
    if (t < kChoraleRest || t >= kChoraleVocabSize) continue;
    step[voice++] = chorale_pitch(t);
    if (voice == kChoraleVoices) {
      c.steps.push_back(step);
      voice = 0;
    }
  }
  return c;
}

std::vector<int64_t> soprano_tokens(const Chorale& chorale) {
  std::vector<int64_t> out;
  out.reserve(chorale.steps.size());
  for (const auto& step : chorale.steps) out.push_back(chorale_token(step[0]));
  return out;
}

std::vector<int64_t> lower_voice_tokens(const Chorale& chorale) {
  std::vector<int64_t> out;
  out.reserve(3 * chorale.steps.size());
  for (const auto& step : chorale.steps)
    for (int v = 1; v < kChoraleVoices; ++v) out.push_back(chorale_token(step[v]));
  return out;
}

Chorale chorale_from_parts(const std::vector<int64_t>& soprano, const std::vector<int64_t>& lower) {
  RG_CHECK(lower.size() == 3 * soprano.size(), "chorale_from_parts",
           "the lower voices need 3 tokens per soprano token: ", soprano.size(), " soprano tokens and ",
           lower.size(), " lower-voice tokens");
  Chorale c;
  c.steps.resize(soprano.size());
  for (size_t k = 0; k < soprano.size(); ++k) {
    c.steps[k][0] = chorale_pitch(soprano[k]);
    for (int v = 1; v < kChoraleVoices; ++v) c.steps[k][v] = chorale_pitch(lower[3 * k + v - 1]);
  }
  return c;
}

// ---- MIDI ----------------------------------------------------------------------------------------

namespace {

constexpr int kChoraleVelocity = 81;         // velocity 80's bin value (music.h)
constexpr MidiOutOptions kChoraleMidiOut{};  // 500 ticks per quarter at 120 bpm: a step is 125 ticks

// Fills each step k (midpoint (k + 0.5) · step) that `notes` (of one voice or all) cover with the
// note's pitch: the latest-starting note wins in a voice (pick = latest), the highest pitch in a
// melody (pick = highest). `next` skips filled steps (union-find), so the work is O(notes + steps)
// however long or overlapping the notes are.
void fill_steps(std::vector<int>& out, std::vector<Note> notes, double origin, double step, bool highest) {
  const int64_t n = static_cast<int64_t>(out.size());
  std::sort(notes.begin(), notes.end(),
            [&](const Note& a, const Note& b) { return highest ? a.pitch > b.pitch : a.start > b.start; });
  std::vector<int64_t> next(n + 1);
  for (int64_t k = 0; k <= n; ++k) next[k] = k;
  auto find = [&](int64_t k) {
    while (next[k] != k) k = next[k] = next[next[k]];
    return k;
  };
  for (const Note& note : notes) {
    // Steps whose midpoint lies in [start, end): k ≥ (start − origin)/step − ½, k < (end − origin)/step − ½.
    const int64_t first =
        std::max<int64_t>(0, static_cast<int64_t>(std::ceil((note.start - origin) / step - 0.5 - 1e-9)));
    const double last_d = std::ceil((note.end - origin) / step - 0.5 - 1e-9);
    const int64_t stop = static_cast<int64_t>(std::min<double>(static_cast<double>(n), last_d));
    for (int64_t k = find(std::min(first, n)); k < stop; k = find(k)) {
      out[k] = note.pitch;
      next[k] = k + 1;
    }
  }
}

// Steps of `step` seconds from `origin` up to `end`, checked against kMaxChoraleSteps.
int64_t step_count(double origin, double end, double step, const char* who) {
  const double steps = std::ceil((end - origin) / step - 1e-9);
  RG_CHECK(std::isfinite(steps) && steps <= static_cast<double>(kMaxChoraleSteps), who, "the notes last ",
           (end - origin), " s: more than ", kMaxChoraleSteps, " steps of ", step, " s");
  return std::max<int64_t>(0, static_cast<int64_t>(steps));
}

}  // namespace

std::vector<Note> chorale_notes(const Chorale& chorale) {
  std::vector<Note> notes;
  const int64_t n = static_cast<int64_t>(chorale.steps.size());
  for (int v = 0; v < kChoraleVoices; ++v)
    for (int64_t k = 0; k < n;) {
      const int p = chorale.steps[k][v];
      int64_t end = k + 1;
      while (end < n && chorale.steps[end][v] == p) ++end;
      if (p >= 0) {
        RG_CHECK(p <= 127, "chorale_notes", "voice ", v, " step ", k, ": pitch ", p, " is not 0..127");
        notes.push_back({p, kChoraleVelocity, k * kChoraleStepSeconds, end * kChoraleStepSeconds, v});
      } else {
        RG_CHECK(p == -1, "chorale_notes", "voice ", v, " step ", k, ": pitch ", p, " is not -1 or 0..127");
      }
      k = end;
    }
  std::sort(notes.begin(), notes.end(), [](const Note& a, const Note& b) {
    return a.start != b.start ? a.start < b.start : a.channel < b.channel;
  });
  return notes;
}

MidiFile chorale_midi(const Chorale& chorale) {
  MidiFile file = midi_of(chorale_notes(chorale), kChoraleMidiOut);
  // End of Track at the chorale's end, so that trailing rests come back from chorale_from_midi.
  const int64_t ticks_per_step = kChoraleMidiOut.ticks_per_quarter / 4;
  for (MidiTrack& t : file.tracks)
    t.end_tick = std::max(t.end(), static_cast<int64_t>(chorale.steps.size()) * ticks_per_step);
  return file;
}

Chorale chorale_from_midi(const MidiFile& file) {
  const std::vector<Note> notes = notes_of(file, NoteOptions{false, false});
  std::vector<Note> voices[kChoraleVoices];
  double end = 0;
  for (const Note& note : notes)
    if (note.channel < kChoraleVoices) {
      voices[note.channel].push_back(note);
      end = std::max(end, note.end);
    }
  const TempoMap tempo(file);
  for (const MidiTrack& t : file.tracks) end = std::max(end, tempo.seconds(t.end()));
  const int64_t n = step_count(0.0, end, kChoraleStepSeconds, "chorale_from_midi");
  Chorale c;
  c.steps.assign(n, {-1, -1, -1, -1});
  for (int v = 0; v < kChoraleVoices; ++v) {
    std::vector<int> line(n, kChoraleRestPitch);
    fill_steps(line, voices[v], 0.0, kChoraleStepSeconds, false);
    for (int64_t k = 0; k < n; ++k) c.steps[k][v] = line[k];
  }
  return c;
}

std::vector<int> melody_from_midi(const MidiFile& file) {
  const std::vector<Note> notes = notes_of(file);
  RG_CHECK(!notes.empty(), "melody_from_midi", "the file has no notes");
  int tempo = kMidiDefaultTempo;
  int64_t first_tick = std::numeric_limits<int64_t>::max();
  for (const MidiTrack& t : file.tracks)
    for (const MidiEvent& e : t.events)
      if (e.is_meta(0x51) && e.tick < first_tick) {
        tempo = e.tempo();
        first_tick = e.tick;
      }
  const double step = tempo / 1e6 / 4;
  double origin = notes.front().start, end = 0;
  for (const Note& note : notes) {
    origin = std::min(origin, note.start);
    end = std::max(end, note.end);
  }
  std::vector<int> line(step_count(origin, end, step, "melody_from_midi"), kChoraleRestPitch);
  fill_steps(line, notes, origin, step, true);
  return line;
}

}  // namespace relgrad
