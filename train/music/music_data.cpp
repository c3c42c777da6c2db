// The synthetic music generator, MusicDataset and the sample a music run prints (MusicData). See
// music.h for the styles, the counter scheme and the window/split rules. All times are built in
// integer 10 ms steps, so the pieces sit exactly on the encoding's grid and encode without loss.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <ostream>
#include <tuple>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/music/music.h"

namespace relgrad {

namespace {

constexpr uint32_t kPieceTag = 0x6D757369;   // "musi": the notes of synthetic pieces
constexpr uint32_t kWindowTag = 0x77696E64;  // "wind": which window a batch row takes
constexpr int64_t kRowsPerBatch = int64_t(1) << 20;

const char* const kStyleNames[] = {"scale", "arpeggio", "chords", "canon", "random_walk"};

// Semitones of the 7 degrees: major, natural minor, dorian, mixolydian.
const int kModes[4][7] = {{0, 2, 4, 5, 7, 9, 11}, {0, 2, 3, 5, 7, 8, 10}, {0, 2, 3, 5, 7, 9, 10}, {0, 2, 4, 5, 7, 9, 10}};

// Chord roots as scale degrees: I-IV-V-I, ii-V-I, I-vi-IV-V, 12-bar blues.
const std::vector<std::vector<int>> kProgressions = {
    {0, 3, 4, 0}, {1, 4, 0}, {0, 5, 3, 4}, {0, 0, 0, 0, 3, 3, 0, 0, 4, 3, 0, 4}};

// Pitch of scale degree `degree` (any integer; 7 = the tonic an octave up).
int degree_pitch(int tonic, const int* mode, int64_t degree) {
  const int64_t octave = degree >= 0 ? degree / 7 : -((-degree + 6) / 7);
  return tonic + static_cast<int>(12 * octave) + mode[degree - 7 * octave];
}

// Collects notes given in steps; velocities are snapped to bin values, pitches outside 0..127 dropped.
struct NoteSink {
  std::vector<Note> notes;
  void add(int pitch, int64_t start, int64_t length, int velocity, int channel = 0) {
    if (pitch < 0 || pitch > 127 || length <= 0) return;
    velocity = bin_velocity(velocity_bin(std::clamp(velocity, 1, 127)));
    notes.push_back({pitch, velocity, start / 100.0, (start + length) / 100.0, channel});
  }
};

// A random walk over the scale for `beats` beats: per beat one note, two halves, a rest, or a note
// held for two beats. Used by canon (leader) and random_walk.
void melody(CounterStream& rng, NoteSink& out, int tonic, const int* mode, int64_t beats, int64_t beat, int velocity) {
  static const int kSteps[] = {-2, -1, -1, 0, 1, 1, 2};
  int64_t degree = rng.between(0, 4);
  auto next_pitch = [&]() {
    degree += kSteps[rng.below(7)];
    if (degree < -3) degree = -1;  // reflect at the ends of the range
    if (degree > 11) degree = 9;
    return degree_pitch(tonic, mode, degree);
  };
  for (int64_t b = 0; b < beats;) {
    const int64_t t = b * beat;
    const int accent = b % 4 == 0 ? 12 : 0;
    const int64_t r = rng.below(8);
    if (r < 3) {
      out.add(next_pitch(), t, beat, velocity + accent);
    } else if (r < 6) {
      out.add(next_pitch(), t, beat / 2, velocity + accent);
      out.add(next_pitch(), t + beat / 2, beat / 2, velocity);
    } else if (r == 7 && b + 1 < beats) {
      out.add(next_pitch(), t, 2 * beat, velocity + accent);
      ++b;
    }  // else a rest
    ++b;
  }
}

void check_config(const SynthMusicConfig& c) {
  RG_CHECK(!c.styles.empty(), "synth_piece", "styles must not be empty");
  RG_CHECK(c.beats >= 1 && c.beats <= 4096, "synth_piece", "beats must be in [1, 4096], got ", c.beats);
  RG_CHECK(c.canon_lag_beats >= 1 && c.canon_lag_beats <= 4096, "synth_piece", "canon_lag_beats must be in [1, 4096], got ",
           c.canon_lag_beats);
  RG_CHECK(c.canon_interval >= -24 && c.canon_interval <= 24, "synth_piece", "canon_interval must be in [-24, 24], got ",
           c.canon_interval);
  RG_CHECK(c.min_beat_ms >= 100 && c.max_beat_ms <= 4000 && (c.min_beat_ms + 19) / 20 <= c.max_beat_ms / 20, "synth_piece",
           "need 100 <= min_beat_ms <= max_beat_ms <= 4000 with a multiple of 20 between them, got ", c.min_beat_ms, " and ",
           c.max_beat_ms);
}

// BOS events EOS: a piece as the model reads it.
std::vector<int64_t> framed(const std::vector<int64_t>& events) {
  std::vector<int64_t> seq{kBos};
  seq.insert(seq.end(), events.begin(), events.end());
  seq.push_back(kEos);
  return seq;
}

}  // namespace

const char* to_string(MusicStyle style) { return kStyleNames[static_cast<int>(style)]; }

MusicStyle music_style_from_string(const std::string& name) {
  for (int i = 0; i < 5; ++i)
    if (name == kStyleNames[i]) return static_cast<MusicStyle>(i);
  RG_CHECK(false, "synth_piece", "unknown music style '", name, "' (expected scale, arpeggio, chords, canon or random_walk)");
  return MusicStyle::Scale;
}

SynthPiece synth_piece(const SynthMusicConfig& c, int64_t piece, Split split) {
  check_config(c);
  RG_CHECK(piece >= 0, "synth_piece", "piece number must be >= 0, got ", piece);
  CounterStream rng = row_stream(c.seed, split, piece, kPieceTag);  // the tag in the row's word
  SynthPiece p;
  p.style = c.styles[rng.below(static_cast<int64_t>(c.styles.size()))];
  p.beat_steps = 2 * rng.between((c.min_beat_ms + 19) / 20, c.max_beat_ms / 20);
  p.tonic = static_cast<int>(rng.between(48, 71));
  const int* mode = kModes[rng.below(4)];
  const int velocity = static_cast<int>(rng.between(48, 108));
  const int64_t beat = p.beat_steps, half = beat / 2;
  NoteSink out;

  switch (p.style) {
    case MusicStyle::Scale: {
      const int64_t top = 7 * rng.between(1, 2);
      const int64_t step = rng.below(2) ? beat : half;
      const bool legato = rng.below(2);
      for (int64_t i = 0; i <= 2 * top; ++i) {
        const int64_t degree = i <= top ? i : 2 * top - i;  // up, then down
        out.add(degree_pitch(p.tonic, mode, degree), i * step, legato ? step : step / 2, velocity + (i % 4 == 0 ? 12 : 0));
      }
      break;
    }
    case MusicStyle::Arpeggio: {
      const auto& roots = kProgressions[rng.below(3)];
      const int size = rng.below(2) ? 3 : 4;  // triad or seventh: the period of the pattern
      const int inversion = static_cast<int>(rng.below(size));
      const int64_t repeats = rng.between(1, 2);
      int64_t t = 0;
      for (int root : roots) {
        std::vector<int> tones;
        for (int k = 0; k < size; ++k) tones.push_back(degree_pitch(p.tonic, mode, root + 2 * k) + (k < inversion ? 12 : 0));
        std::sort(tones.begin(), tones.end());
        for (int64_t r = 0; r < repeats; ++r)
          for (int k = 0; k < size; ++k, t += half) out.add(tones[k], t, half, velocity + (k == 0 && r == 0 ? 12 : 0));
      }
      break;
    }
    case MusicStyle::Chords: {
      const int which = static_cast<int>(rng.below(4));
      const auto& roots = kProgressions[which];
      const int64_t bar = (which == 3 ? 2 : 4) * beat;  // the blues moves in half bars to stay short
      const bool block = rng.below(2);
      for (size_t i = 0; i < roots.size(); ++i) {
        const int64_t t = static_cast<int64_t>(i) * bar;
        out.add(degree_pitch(p.tonic - 12, mode, roots[i]), t, block ? bar : beat, velocity + 12);  // bass
        for (int k = 0; k < 3; ++k) {
          const int pitch = degree_pitch(p.tonic, mode, roots[i] + 2 * k);
          if (block) out.add(pitch, t, bar, velocity);                                 // held for the bar
          else for (int64_t on = t + beat; on < t + bar; on += beat) out.add(pitch, on, half, velocity);  // oom-pah
        }
      }
      break;
    }
    case MusicStyle::Canon: {
      melody(rng, out, p.tonic, mode, c.beats, beat, velocity);
      const size_t leader = out.notes.size();
      const int64_t lag = c.canon_lag_beats * beat;
      for (size_t i = 0; i < leader; ++i) {
        const Note n = out.notes[i];
        const int64_t start = std::llround(n.start * 100), end = std::llround(n.end * 100);
        out.add(n.pitch + c.canon_interval, start + lag, end - start, n.velocity, 1);
      }
      break;
    }
    case MusicStyle::RandomWalk:
      melody(rng, out, p.tonic, mode, c.beats, beat, velocity);
      break;
  }
  p.notes = std::move(out.notes);
  std::stable_sort(p.notes.begin(), p.notes.end(), [](const Note& a, const Note& b) {
    return std::tie(a.start, a.pitch) < std::tie(b.start, b.pitch);
  });
  return p;
}

// ---- MusicDataset -------------------------------------------------------------------------------

MusicDataset::MusicDataset(const MusicDatasetConfig& config) : config_(config) {
  RG_CHECK(config.val_fraction >= 0.0 && config.val_fraction < 1.0, "MusicDataset", "val_fraction must be in [0, 1), got ",
           config.val_fraction);
  if (synthetic()) {
    check_config(config.synth);
    return;
  }
  namespace fs = std::filesystem;
  const std::string& folder = config.folder;
  std::error_code ec;
  RG_CHECK(fs::is_directory(folder, ec), "MusicDataset", "'", folder, "' is not a directory");
  std::vector<std::string> paths;  // relative to the folder
  std::vector<std::string> unreadable;  // .mid entries that are not regular files (a FIFO would block)
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec), end;
  RG_CHECK(!ec, "MusicDataset", "cannot list '", folder, "': ", ec.message());
  for (; it != end; it.increment(ec)) {
    RG_CHECK(!ec, "MusicDataset", "cannot list '", folder, "': ", ec.message());
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (ext != ".mid" && ext != ".midi") continue;
    if (!it->is_regular_file(ec)) {
      unreadable.push_back(it->path().string());
      continue;
    }
    const fs::path rel = fs::relative(it->path(), folder, ec);
    paths.push_back(ec ? it->path().string() : rel.string());
  }
  std::sort(paths.begin(), paths.end());
  std::sort(unreadable.begin(), unreadable.end());
  for (const std::string& path : unreadable)
    skipped_.push_back({path, "[MusicDataset] " + path + ": not a regular file"});

  struct Piece { uint64_t hash; std::string path; std::vector<int64_t> tokens; };
  std::vector<Piece> pieces;
  for (const std::string& rel : paths) {
    const std::string path = (fs::path(folder) / rel).string();
    try {
      std::vector<int64_t> events = encode_performance(read_midi(path), config.notes);
      if (events.empty()) { skipped_.push_back({path, "[MusicDataset] no notes"}); continue; }
      pieces.push_back({fnv1a64(rel.data(), rel.size()), path, framed(events)});
    } catch (const Error& e) {
      skipped_.push_back({path, e.what()});
    }
  }
  RG_CHECK(!pieces.empty(), "MusicDataset", "no usable .mid/.midi file in '", folder, "' (",
           paths.size() + unreadable.size(), " found, ",
           skipped_.size(), " skipped", skipped_.empty() ? "" : "; the first: " + skipped_[0].error, ")");
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return std::tie(a.hash, a.path) < std::tie(b.hash, b.path); });
  const int64_t n = static_cast<int64_t>(pieces.size());
  const int64_t val = config.val_fraction > 0 ? std::max<int64_t>(1, std::llround(n * config.val_fraction)) : 0;
  RG_CHECK(val < n, "MusicDataset", "'", folder, "' has ", n, " usable file(s), which leaves none for training at val_fraction ",
           config.val_fraction, " (need at least 2 files, or val_fraction 0)");
  for (int64_t i = 0; i < n; ++i) {
    (i < n - val ? train_files_ : val_files_).push_back(pieces[i].path);
    (i < n - val ? train_ : val_).push_back(std::move(pieces[i].tokens));
  }
}

std::vector<int64_t> MusicDataset::piece_tokens(int64_t index, int64_t row, Split split) const {
  return framed(encode_notes(synth_piece(config_.synth, index * kRowsPerBatch + row, split).notes));
}

Batch MusicDataset::batch(int64_t index, int64_t batch_size, int64_t context, Split split) const {
  RG_CHECK(index >= 0 && index < (int64_t(1) << 42), "MusicDataset", "batch index must be in [0, 2^42), got ", index);
  RG_CHECK(batch_size >= 1 && batch_size <= kRowsPerBatch && context >= 1, "MusicDataset",
           "need 1 <= batch_size <= 2^20 and context >= 1, got ", batch_size, " and ", context);
  const auto& seqs = sequences(split);
  RG_CHECK(synthetic() || !seqs.empty(), "MusicDataset", "no ", split == Split::Train ? "training" : "validation",
           " files (val_fraction is 0)");
  // Folder: a window start in [0, max(1, len - context)) per piece; one uniform draw over all of them.
  std::vector<int64_t> first_window{0};  // prefix sums over the split's pieces
  if (!synthetic())
    for (const auto& s : seqs) first_window.push_back(first_window.back() + std::max<int64_t>(1, static_cast<int64_t>(s.size()) - context));

  // (context) inputs and their next tokens; a short piece leaves PAD / -100 after its end.
  auto cut = [context](const std::vector<int64_t>& seq, int64_t start) {
    return std::vector<int64_t>(seq.begin() + start, seq.begin() + std::min<int64_t>(start + context + 1, seq.size()));
  };
  return window_rows(batch_size, context, [&](int64_t b) {
    CounterStream rng = row_stream(config_.seed, split, index * kRowsPerBatch + b, kWindowTag);
    if (synthetic()) {
      const std::vector<int64_t> own = piece_tokens(index, b, split);
      const int64_t len = static_cast<int64_t>(own.size());
      return cut(own, len > context + 1 ? rng.below(len - context) : 0);
    }
    const int64_t u = rng.below(first_window.back());
    const size_t s = std::upper_bound(first_window.begin(), first_window.end(), u) - first_window.begin() - 1;
    return cut(seqs[s], u - first_window[s]);
  });
}

void MusicData::print_samples(SampleModel& model, int64_t, const std::string& out_dir, std::ostream& out) const {
  std::vector<int64_t> seq = model.continue_prompt({kBos}, true);
  const std::string path = out_dir + "/sample.mid";
  MidiFile midi = decode_performance(seq);
  write_midi(path, midi);
  out << "sampled " << seq.size() - 1 << " events (" << decode_notes(seq).size() << " notes) from <bos>: " << path << "\n";
}

}  // namespace relgrad
