// Notes and the performance event encoding. See music.h for the token layout and every rule.
// (The synthetic generator and the dataset are in music_data.cpp.)
#include "train/music/music.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

#include "core/base/error.h"

namespace relgrad {

int velocity_bin(int velocity) {
  RG_CHECK(velocity >= 1 && velocity <= 127, "music", "velocity must be in [1, 127], got ", velocity);
  return (velocity - 1) * kVelocityBins / 127;
}

int bin_velocity(int bin) {
  RG_CHECK(bin >= 0 && bin < kVelocityBins, "music", "velocity bin must be in [0, ", kVelocityBins, "), got ", bin);
  return 4 * bin + 1;
}

namespace {

bool by_start_pitch(const Note& a, const Note& b) {
  return std::tie(a.start, a.pitch, a.channel, a.end) < std::tie(b.start, b.pitch, b.channel, b.end);
}

// A note on the 10 ms grid: [start, end) in steps.
struct StepNote { int64_t start, end; int pitch, bin; };

void check_note(const Note& n, size_t i) {
  RG_CHECK(n.pitch >= 0 && n.pitch <= 127, "music", "note ", i, ": pitch must be in [0, 127], got ", n.pitch);
  RG_CHECK(n.velocity >= 1 && n.velocity <= 127, "music", "note ", i, ": velocity must be in [1, 127], got ", n.velocity);
  RG_CHECK(n.channel >= 0 && n.channel <= 15, "music", "note ", i, ": channel must be in [0, 15], got ", n.channel);
  RG_CHECK(std::isfinite(n.start) && std::isfinite(n.end) && n.start >= 0 && n.end >= n.start, "music", "note ", i,
           ": need 0 <= start <= end (finite), got start ", n.start, " end ", n.end);
  // Bounds the TIME_SHIFTs a (possibly hostile) file can make us emit: at most 10^5 s / 1 s of them.
  RG_CHECK(n.end <= kMaxMusicSeconds, "music", "note ", i, ": end ", n.end, " s is later than relgrad's limit of ",
           kMaxMusicSeconds, " s");
}

// The canonical notes on the grid, sorted by (start, pitch): see music.h.
std::vector<StepNote> canonical_steps(std::vector<StepNote> notes) {
  for (StepNote& n : notes) n.end = std::max(n.end, n.start + 1);
  // Per pitch, by start, the longest first among equal starts.
  std::sort(notes.begin(), notes.end(), [](const StepNote& a, const StepNote& b) {
    return std::make_tuple(a.pitch, a.start, -a.end, a.bin) < std::make_tuple(b.pitch, b.start, -b.end, b.bin);
  });
  std::vector<StepNote> kept;
  kept.reserve(notes.size());
  for (const StepNote& n : notes) {
    if (!kept.empty() && kept.back().pitch == n.pitch && kept.back().end > n.start) {
      if (kept.back().start == n.start) continue;  // same pitch, same start: keep the longer (first)
      kept.back().end = n.start;                   // a re-struck pitch cuts the sounding note
    }
    kept.push_back(n);
  }
  std::sort(kept.begin(), kept.end(), [](const StepNote& a, const StepNote& b) {
    return std::tie(a.start, a.pitch) < std::tie(b.start, b.pitch);
  });
  return kept;
}

std::vector<StepNote> to_steps(const std::vector<Note>& notes) {
  std::vector<StepNote> out;
  out.reserve(notes.size());
  for (size_t i = 0; i < notes.size(); ++i) {
    const Note& n = notes[i];
    check_note(n, i);
    out.push_back({std::llround(n.start / kStepSeconds), std::llround(n.end / kStepSeconds), n.pitch, velocity_bin(n.velocity)});
  }
  return canonical_steps(std::move(out));
}

std::vector<Note> from_steps(const std::vector<StepNote>& steps) {
  std::vector<Note> out;
  out.reserve(steps.size());
  // Dividing by 100 (not multiplying by 0.01) gives the double nearest to the true time.
  for (const StepNote& s : steps) out.push_back({s.pitch, bin_velocity(s.bin), s.start / 100.0, s.end / 100.0, 0});
  return out;
}

}  // namespace

// ---- MIDI ↔ notes -------------------------------------------------------------------------------

std::vector<Note> notes_of(const MidiFile& file, const NoteOptions& options) {
  const TempoMap tempo(file);  // refuses format 2
  std::vector<Note> notes;
  for (const MidiTrack& track : file.tracks) {
    struct Sounding { int64_t note = -1; bool released = false; };  // index into notes; key up under the pedal
    std::array<std::array<Sounding, 128>, 16> sounding{};
    std::array<bool, 16> pedal{};
    auto end_note = [&](int ch, int pitch, int64_t tick) {
      Sounding& s = sounding[ch][pitch];
      notes[s.note].end = tempo.seconds(tick);
      s = Sounding{};
    };
    for (const MidiEvent& e : track.events) {
      if (!e.is_channel() || e.data.size() != 2) continue;  // notes and controllers have 2 data bytes
      const int ch = e.channel();
      if (e.is_note_on() || e.is_note_off()) {
        if (ch == kDrumChannel && !options.include_drums) continue;
        const int pitch = e.data[0];
        Sounding& s = sounding[ch][pitch];
        if (e.is_note_on()) {
          if (s.note >= 0) end_note(ch, pitch, e.tick);
          const double t = tempo.seconds(e.tick);
          s.note = static_cast<int64_t>(notes.size());
          notes.push_back({pitch, e.data[1], t, t, ch});
        } else if (s.note >= 0 && !s.released) {
          if (options.sustain_pedal && pedal[ch]) s.released = true;
          else end_note(ch, pitch, e.tick);
        }
      } else if (options.sustain_pedal && e.kind() == 0xB0 && e.data[0] == 64) {
        const bool down = e.data[1] >= 64;
        if (pedal[ch] && !down)
          for (int p = 0; p < 128; ++p)
            if (sounding[ch][p].released) end_note(ch, p, e.tick);
        pedal[ch] = down;
      }
    }
    const int64_t end = track.end();
    for (int ch = 0; ch < 16; ++ch)
      for (int p = 0; p < 128; ++p)
        if (sounding[ch][p].note >= 0) end_note(ch, p, end);
  }
  std::stable_sort(notes.begin(), notes.end(), by_start_pitch);
  return notes;
}

MidiFile midi_of(const std::vector<Note>& notes, const MidiOutOptions& options) {
  RG_CHECK(options.ticks_per_quarter >= 1 && options.ticks_per_quarter <= 32767, "music",
           "ticks_per_quarter must be in [1, 32767], got ", options.ticks_per_quarter);
  RG_CHECK(options.tempo >= 1 && options.tempo <= 0xFFFFFF, "music", "tempo must be in [1, 16777215] microseconds per quarter, got ",
           options.tempo);
  const double ticks_per_second = 1e6 * options.ticks_per_quarter / options.tempo;
  // (tick, 0 = off / 1 = on, pitch, channel, velocity): sorting this tuple puts offs before ons.
  std::vector<std::array<int64_t, 5>> events;
  events.reserve(2 * notes.size());
  for (size_t i = 0; i < notes.size(); ++i) {
    const Note& n = notes[i];
    check_note(n, i);
    const int64_t on = std::llround(n.start * ticks_per_second);
    const int64_t off = std::max<int64_t>(on + 1, std::llround(n.end * ticks_per_second));
    events.push_back({on, 1, n.pitch, n.channel, n.velocity});
    events.push_back({off, 0, n.pitch, n.channel, 0});
  }
  std::sort(events.begin(), events.end());
  MidiFile file;
  file.format = 0;
  file.ticks_per_quarter = options.ticks_per_quarter;
  file.tracks.resize(1);
  std::vector<MidiEvent>& out = file.tracks[0].events;
  out.reserve(events.size() + 1);
  out.push_back(MidiEvent::set_tempo(0, options.tempo));
  for (const auto& [tick, on, pitch, channel, velocity] : events)
    out.push_back(on ? MidiEvent::note_on(tick, channel, pitch, velocity) : MidiEvent::note_off(tick, channel, pitch));
  file.tracks[0].end_tick = out.back().tick;
  return file;
}

// ---- the encoding ---------------------------------------------------------------------------------

std::vector<Note> quantize_notes(const std::vector<Note>& notes) { return from_steps(to_steps(notes)); }

std::vector<int64_t> encode_notes(const std::vector<Note>& notes) {
  const std::vector<StepNote> steps = to_steps(notes);
  // (step, 0 = off / 1 = on, pitch, bin): sorting puts the offs of a step before its ons.
  std::vector<std::array<int64_t, 4>> events;
  events.reserve(2 * steps.size());
  for (const StepNote& n : steps) {
    events.push_back({n.start, 1, n.pitch, n.bin});
    events.push_back({n.end, 0, n.pitch, n.bin});
  }
  std::sort(events.begin(), events.end());
  std::vector<int64_t> tokens;
  tokens.reserve(3 * events.size());
  int64_t now = 0;
  int64_t bin = -1;  // none yet: the first NOTE_ON always gets a VELOCITY
  for (const auto& [step, on, pitch, b] : events) {
    for (int64_t gap = step - now; gap > 0; gap -= kMaxShiftSteps) tokens.push_back(kTimeShiftBase + std::min<int64_t>(gap, kMaxShiftSteps));
    now = step;
    if (!on) {
      tokens.push_back(kNoteOffBase + pitch);
      continue;
    }
    if (b != bin) tokens.push_back(kVelocityBase + b);
    bin = b;
    tokens.push_back(kNoteOnBase + pitch);
  }
  return tokens;
}

std::vector<Note> decode_notes(const std::vector<int64_t>& tokens) {
  std::vector<StepNote> notes;
  std::array<int64_t, 128> sounding;  // index into notes, or -1
  sounding.fill(-1);
  int64_t now = 0;
  int bin = kDefaultVelocityBin;
  for (int64_t id : tokens) {
    if (id == kEos) break;
    if (id < kNoteOnBase || id >= kMusicVocabSize) continue;  // PAD, BOS, out of range
    if (id < kNoteOffBase) {
      const int pitch = static_cast<int>(id - kNoteOnBase);
      if (sounding[pitch] >= 0) {
        StepNote& old = notes[sounding[pitch]];
        old.end = now;  // a zero-length one is dropped by canonical_steps (same start as the new note)
      }
      sounding[pitch] = static_cast<int64_t>(notes.size());
      notes.push_back({now, -1, pitch, bin});
    } else if (id < kTimeShiftBase + 1) {
      const int pitch = static_cast<int>(id - kNoteOffBase);
      if (sounding[pitch] < 0) continue;  // stray note-off
      notes[sounding[pitch]].end = now;   // zero length becomes one step in canonical_steps
      sounding[pitch] = -1;
    } else if (id < kVelocityBase) {
      now += id - kTimeShiftBase;
    } else {
      bin = static_cast<int>(id - kVelocityBase);
    }
  }
  for (int64_t index : sounding)
    if (index >= 0) notes[index].end = now;
  return from_steps(canonical_steps(std::move(notes)));
}

std::vector<int64_t> encode_performance(const MidiFile& file, const NoteOptions& options) {
  return encode_notes(notes_of(file, options));
}

MidiFile decode_performance(const std::vector<int64_t>& tokens, const MidiOutOptions& options) {
  return midi_of(decode_notes(tokens), options);
}

Vocab music_vocab() {
  Vocab v;
  v.names = {"<pad>", "<bos>", "<eos>"};
  for (int p = 0; p < 128; ++p) v.names.push_back("NOTE_ON_" + std::to_string(p));
  for (int p = 0; p < 128; ++p) v.names.push_back("NOTE_OFF_" + std::to_string(p));
  for (int k = 1; k <= kMaxShiftSteps; ++k) v.names.push_back("TIME_SHIFT_" + std::to_string(10 * k) + "ms");
  for (int b = 0; b < kVelocityBins; ++b) v.names.push_back("VEL_" + std::to_string(b));
  v.size = static_cast<int64_t>(v.names.size());
  v.pad = kPad;
  return v;
}

}  // namespace relgrad
