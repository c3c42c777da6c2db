// Music for the sequence models: notes, the performance event encoding of Performance RNN / Music
// Transformer (Oore et al. 2018, Huang et al. 2018), a seeded generator of synthetic pieces, and a
// dataset of token windows for a decoder-only LM.
//
// Token ids (one vocabulary of 391; PAD/BOS/EOS as in train/data/data.h so samplers need no special case):
//   0 PAD, 1 BOS, 2 EOS
//   3   + p        NOTE_ON  pitch p (0..127)                              "NOTE_ON_60"
//   131 + p        NOTE_OFF pitch p                                       "NOTE_OFF_60"
//   258 + k        TIME_SHIFT of k steps of 10 ms, k = 1..100 (10 ms..1 s) "TIME_SHIFT_10ms" .. "TIME_SHIFT_1000ms"
//   359 + b        VELOCITY bin b = 0..31                                  "VEL_0" .. "VEL_31"
// The 388 event ids are those of the papers, in the same order, moved up by 3.
//
// Velocity: Magenta's 32 bins over 1..127, b = (v - 1) * 32 / 127 (integer division), and bin b
// decodes to v = 4 b + 1 (1, 5, .., 125), which encodes back to b. A VELOCITY token is emitted
// before a NOTE_ON only when the bin changes; a NOTE_ON decoded before any VELOCITY token gets bin 15
// (velocity 61).
//
// Time: note times are rounded to the 10 ms grid (absolute times, so errors do not accumulate);
// a note that would last 0 steps lasts 1 step (10 ms); a gap longer than 1 s is several TIME_SHIFTs
// (2.35 s → 1 s, 1 s, 350 ms). Pieces start at time 0, so leading silence is encoded too. At one
// time step all NOTE_OFFs come first (ascending pitch), then the NOTE_ONs (ascending pitch).
// The encoding has no channels and one note per pitch at a time, so the encoder first makes the
// notes canonical (quantize_notes): channel 0; two notes of one pitch starting at the same step
// become the longer one; a note of a pitch that is already sounding cuts the earlier one short.
//
// MIDI → notes (notes_of): ticks become seconds through one tempo map shared by all tracks
// (TempoMap, midi.h; format 2 is refused); the tracks of a format-1 file are merged. Per (track,
// channel, pitch) one note sounds at a time: a note-on while it sounds ends it; a note-off (or a
// note-on with velocity 0) with nothing sounding is ignored; a note still on at the end of its track
// ends there. Sustain pedal (controller 64, value >= 64 = down) is applied by default, as for Maestro
// in Music Transformer: a key released while the pedal is down keeps sounding until the pedal is
// lifted or the same pitch is struck again. Drums (channel 10, i.e. channel index 9) carry no pitch
// in the melodic sense and are dropped by default.
//
// Tokens → notes (decode_notes) repairs whatever a model produces: PAD, BOS and ids outside the
// vocabulary are skipped; EOS stops; a NOTE_OFF for a pitch that is not sounding is dropped; a NOTE_ON
// for a pitch already sounding ends the earlier note there (dropping it if it started at the same
// step); notes still on at the end end at the last time reached (at least one step after they
// began); the result is then made canonical, so decoding always yields notes the encoder accepts.
// For any notes, decode_notes(encode_notes(notes)) == quantize_notes(notes), and for a sequence the
// encoder wrote, encode_notes(decode_notes(tokens)) == tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/data.h"
#include "train/data/dataset.h"
#include "train/music/midi.h"

namespace relgrad {

inline constexpr int64_t kNoteOnBase = 3;
inline constexpr int64_t kNoteOffBase = kNoteOnBase + 128;        // 131
inline constexpr int64_t kTimeShiftBase = kNoteOffBase + 128 - 1;  // 258: TIME_SHIFT of k steps is 258 + k
inline constexpr int64_t kVelocityBase = kTimeShiftBase + 100 + 1;  // 359
inline constexpr int64_t kMusicVocabSize = kVelocityBase + 32;     // 391
inline constexpr int kMaxShiftSteps = 100;
inline constexpr int kVelocityBins = 32;
inline constexpr int kDefaultVelocityBin = 15;
inline constexpr double kStepSeconds = 0.01;
inline constexpr int kDrumChannel = 9;  // General MIDI's channel 10
// Notes must end within 10^5 s (27.8 h): encoding a later one is an error, so a hostile file with
// huge delta times cannot make the encoder emit billions of TIME_SHIFTs.
inline constexpr double kMaxMusicSeconds = 1e5;

int velocity_bin(int velocity);  // 1..127 → 0..31 (checked)
int bin_velocity(int bin);       // 0..31 → 4 bin + 1 (checked)

struct Note {
  int pitch = 60;      // 0..127
  int velocity = 64;   // 1..127
  double start = 0.0;  // seconds
  double end = 0.0;    // seconds, >= start
  int channel = 0;     // 0..15 (synthetic pieces use it for the voice)
  bool operator==(const Note& o) const {
    return pitch == o.pitch && velocity == o.velocity && start == o.start && end == o.end && channel == o.channel;
  }
};

struct NoteOptions {
  bool sustain_pedal = true;   // apply controller 64 (see above)
  bool include_drums = false;  // keep the notes of channel index 9
};
// The notes of a format 0 or 1 file, sorted by (start, pitch, channel).
std::vector<Note> notes_of(const MidiFile& file, const NoteOptions& options = {});

struct MidiOutOptions {
  int ticks_per_quarter = 500;  // at 120 bpm one tick is exactly 1 ms, so the 10 ms grid is exact
  int tempo = kMidiDefaultTempo;
};
// A format-0 file: a tempo event, then note-on / note-off (velocity 0) events; at one tick the
// note-offs come first, so a re-struck pitch reads back as two notes. A note shorter than one tick
// lasts one tick. Checks pitch, velocity, channel ranges and 0 <= start <= end (finite).
MidiFile midi_of(const std::vector<Note>& notes, const MidiOutOptions& options = {});

// The canonical form of notes under the encoding (see above): times on the 10 ms grid, velocities
// on bin values, channel 0, sorted by (start, pitch).
std::vector<Note> quantize_notes(const std::vector<Note>& notes);
std::vector<int64_t> encode_notes(const std::vector<Note>& notes);    // event ids only: no BOS/EOS
std::vector<Note> decode_notes(const std::vector<int64_t>& tokens);
std::vector<int64_t> encode_performance(const MidiFile& file, const NoteOptions& options = {});
MidiFile decode_performance(const std::vector<int64_t>& tokens, const MidiOutOptions& options = {});

// The 391 names: "<pad>", "<bos>", "<eos>", "NOTE_ON_0", .., "TIME_SHIFT_10ms", .., "VEL_31".
Vocab music_vocab();

// ------------------------------------------------------------------------------------------------
// Synthetic pieces, each a pure function of (seed, split, piece number): Philox4x32-10 under the
// key `seed` with the counter (block, 0x6D757369 "musi", low 32 bits of the piece number, high 31
// bits | split bit), the same scheme as the synthetic tasks (train/data/data.h). Every piece picks a key
// (tonic 48..71), a mode, a beat of min_beat_ms..max_beat_ms (a multiple of 20 ms, so half beats stay
// on the 10 ms grid) and a base velocity, then one style:
//   scale       a major/minor/dorian/mixolydian scale over 1-2 octaves, up and down
//   arpeggio    a diatonic progression, each chord's tones (triad or seventh, in an inversion)
//               broken upwards in half beats and repeated: a fixed period of 3 or 4 notes
//   chords      I-IV-V-I, ii-V-I, I-vi-IV-V or the 12-bar blues, block or oom-pah, with a bass line
//   canon       a random-walk melody of `beats` beats (channel 0) and the same melody canon_lag_beats
//               later, transposed by canon_interval semitones (channel 1): the musical shifted copy
//   random_walk a random walk over the scale with random rhythms (whole beats, halves, rests)
enum class MusicStyle { Scale, Arpeggio, Chords, Canon, RandomWalk };
const char* to_string(MusicStyle style);                    // "scale", "arpeggio", ...
MusicStyle music_style_from_string(const std::string& name);  // error lists the valid names

struct SynthMusicConfig {
  std::vector<MusicStyle> styles = {MusicStyle::Scale, MusicStyle::Arpeggio, MusicStyle::Chords, MusicStyle::Canon,
                                    MusicStyle::RandomWalk};  // each piece picks one, uniformly
  int64_t beats = 16;           // melody length of canon and random_walk
  int64_t canon_lag_beats = 2;  // the follower starts this many beats after the leader
  int canon_interval = -12;     // semitones, -24..24
  int64_t min_beat_ms = 300, max_beat_ms = 600;
  uint64_t seed = 0;
};

struct SynthPiece {
  MusicStyle style = MusicStyle::Scale;
  int64_t beat_steps = 0;  // the beat in 10 ms steps
  int tonic = 60;
  std::vector<Note> notes;  // on the 10 ms grid, velocities on bin values, sorted by (start, pitch)
};
// Piece number `piece` (>= 0) of the stream `split`.
SynthPiece synth_piece(const SynthMusicConfig& config, int64_t piece, Split split = Split::Train);

// ------------------------------------------------------------------------------------------------
// Token windows for a decoder-only LM: every piece is the sequence BOS events EOS, and a batch row is
// a window of context + 1 tokens of one piece: tokens = window[0, context), targets = window[1, context]
// (B, context) each, with PAD (targets -100, padding_mask true) after the end of a piece shorter than
// the window. Row b of batch n is a pure function of (seed, split, n, b), as in TextDataset.
//   synthetic (folder empty): row b of batch n is synth_piece number n * 2^20 + b (batch_size <= 2^20)
//     of the split's stream, at a random offset; the held-out stream shares no piece with training.
//   folder: every *.mid / *.midi below `folder` (recursively, sorted) is read and encoded up front;
//     a file that fails to parse or has no notes is skipped and listed in skipped() (the caller
//     reports them); no usable file at all is an error. The split is by file: files are ordered by an
//     FNV-1a hash of their path relative to the folder (stable when files are added) and the last
//     round(n * val_fraction) of them (at least 1 when val_fraction > 0) validate. A row picks one of
//     all the split's windows uniformly (so longer pieces are sampled more).
struct MusicDatasetConfig {
  std::string folder;            // empty: synthetic pieces
  SynthMusicConfig synth;        // synthetic only (its seed keys the pieces)
  NoteOptions notes;             // folder only
  double val_fraction = 0.1;     // folder only, in [0, 1)
  uint64_t seed = 0;             // window offsets
};

class MusicDataset {
 public:
  explicit MusicDataset(const MusicDatasetConfig& config);

  Batch batch(int64_t index, int64_t batch_size, int64_t context, Split split = Split::Train) const;

  using Skipped = SkippedFile;  // train/data/dataset.h
  bool synthetic() const { return config_.folder.empty(); }
  const std::vector<std::string>& files(Split split) const { return split == Split::Train ? train_files_ : val_files_; }
  const std::vector<std::vector<int64_t>>& sequences(Split split) const { return split == Split::Train ? train_ : val_; }
  const std::vector<Skipped>& skipped() const { return skipped_; }
  static Vocab vocab() { return music_vocab(); }

 private:
  std::vector<int64_t> piece_tokens(int64_t index, int64_t row, Split split) const;  // BOS events EOS
  MusicDatasetConfig config_;
  std::vector<std::string> train_files_, val_files_;
  std::vector<std::vector<int64_t>> train_, val_;
  std::vector<Skipped> skipped_;
};

// A MusicDataset in windows of `context`, as the trainer's Dataset; samples: a piece sampled from
// BOS, written to out_dir/sample.mid.
class MusicData : public Dataset {
 public:
  MusicData(const MusicDatasetConfig& config, int64_t batch_size, int64_t context)
      : music_(config), vocab_(MusicDataset::vocab()), batch_size_(batch_size), context_(context) {}
  Batch batch(int64_t index, Split split) const override { return music_.batch(index, batch_size_, context_, split); }
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return batch_size_; }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override;
  const std::vector<SkippedFile>& skipped_files() const override { return music_.skipped(); }
  const MusicDataset& music() const { return music_; }

 private:
  MusicDataset music_;
  Vocab vocab_;
  int64_t batch_size_, context_;
};

}  // namespace relgrad
