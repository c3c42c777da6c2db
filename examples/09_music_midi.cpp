// 09 music: how a piece becomes tokens for a language model, and back. A C major scale and a chord
// are written as notes, saved as a MIDI file, read back, encoded in the performance events of
// Performance RNN / Music Transformer (train/music/music.h: NOTE_ON, NOTE_OFF, TIME_SHIFT in 10 ms
// steps, VELOCITY in 32 bins), printed, decoded back to notes and compared with the originals.
// When FluidSynth and a General MIDI soundfont are installed, the decoded piece is rendered to WAV
// the way `relgrad render` does it (it is the same code, run_cli in train/command/cli.h).
//
// Run: ./build/examples/09_music_midi [SOUNDFONT.sf2]   (default: Debian's fluid-soundfont-gm)
// expect: wrote 11 notes to .*scale[.]mid
// expect: read back 11 notes
// expect: VEL_19 NOTE_ON_60 TIME_SHIFT_500ms NOTE_OFF_60 NOTE_ON_62
// expect: round trip: same notes
// expect: (rendered .*[.]wav, [0-9]+ bytes|FluidSynth not found)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "relgrad.h"
#include "train/command/cli.h"
#include "train/music/midi.h"
#include "train/music/music.h"

using namespace relgrad;
namespace fs = std::filesystem;

namespace {

// The notes a model never sees directly: what a performance is before it is encoded.
std::vector<Note> c_major_scale_and_chord() {
  std::vector<Note> notes;
  const int scale[] = {60, 62, 64, 65, 67, 69, 71, 72};  // C4 D E F G A B C5
  for (int i = 0; i < 8; ++i) notes.push_back({scale[i], 80, 0.5 * i, 0.5 * i + 0.5});
  for (int pitch : {60, 64, 67}) notes.push_back({pitch, 100, 4.25, 5.75});  // C major chord after a rest
  return notes;
}

// Same notes within what the encoding keeps: the pitch, times on the 10 ms grid, the velocity bin.
bool same_notes(const std::vector<Note>& a, const std::vector<Note>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i].pitch == b[i].pitch && std::abs(a[i].start - b[i].start) <= kStepSeconds / 2 &&
                      std::abs(a[i].end - b[i].end) <= kStepSeconds / 2 &&
                      velocity_bin(a[i].velocity) == velocity_bin(b[i].velocity);
    if (!same) return false;
  }
  return true;
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " > /dev/null 2>&1").c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // One folder per user (a classroom shares /tmp): another student's files are neither read nor
    // overwritten, and the folder of one who ran it first does not make this run fail.
    const fs::path dir = fs::temp_directory_path() / ("relgrad_example_09_uid" + std::to_string(getuid()));
    fs::create_directories(dir);
    const std::string scale_mid = (dir / "scale.mid").string(), decoded_mid = (dir / "decoded.mid").string();

    // 1. Notes → a MIDI file (format 0, 500 ticks per quarter at 120 bpm: one tick is 1 ms).
    const std::vector<Note> notes = c_major_scale_and_chord();
    write_midi(scale_mid, midi_of(notes));
    std::printf("wrote %zu notes to %s (%lld bytes)\n", notes.size(), scale_mid.c_str(),
                static_cast<long long>(fs::file_size(scale_mid)));

    // 2. The file → notes again: note-on / note-off events paired up, ticks turned into seconds.
    const std::vector<Note> read = notes_of(read_midi(scale_mid));
    std::printf("read back %zu notes; the first: pitch %d, %.2f s to %.2f s, velocity %d\n", read.size(),
                read[0].pitch, read[0].start, read[0].end, read[0].velocity);

    // 3. Notes → tokens: one vocabulary of 391 ids. Time is not a position in the sequence but a
    // TIME_SHIFT event, so attention over this sequence has to learn what "one beat later" looks like.
    const std::vector<int64_t> tokens = encode_notes(read);
    const Vocab vocab = music_vocab();
    std::printf("%zu tokens (ids 0..%lld), the first ids:", tokens.size(),
                static_cast<long long>(vocab.size - 1));
    for (size_t i = 0; i < 6; ++i) std::printf(" %lld", static_cast<long long>(tokens[i]));
    std::printf("\nas events:\n");
    for (size_t i = 0; i < tokens.size(); i += 8) {
      std::vector<int64_t> line(tokens.begin() + i, tokens.begin() + std::min(i + 8, tokens.size()));
      std::printf("  %s\n", vocab.decode(line).c_str());
    }

    // 4. Tokens → notes: what turns a model's output into music. The velocity comes back as its
    // bin's value (80 → bin 19 → 77) and times on the 10 ms grid; nothing else may change.
    const std::vector<Note> decoded = decode_notes(tokens);
    if (!same_notes(notes, decoded) || !same_notes(read, decoded)) {
      std::fprintf(stderr, "round trip changed the notes (%zu in, %zu out)\n", notes.size(), decoded.size());
      return 1;
    }
    std::printf("round trip: same notes (%zu, pitches and times within %.0f ms, velocity %d comes back "
                "as %d)\n", decoded.size(), 1000 * kStepSeconds / 2, notes[0].velocity, decoded[0].velocity);
    write_midi(decoded_mid, decode_performance(tokens));

    // 5. Listening: FluidSynth is a program, not a library relgrad links, so it is optional.
    const std::string soundfont = argc > 1 ? argv[1] : "/usr/share/sounds/sf2/FluidR3_GM.sf2";
    const std::string missing = !on_path("fluidsynth")             ? "fluidsynth is not on PATH"
                                : !fs::is_regular_file(soundfont) ? "no soundfont " + soundfont
                                                                  : "";
    if (!missing.empty()) {
      std::printf("FluidSynth not found (%s); to hear %s: apt-get install fluidsynth fluid-soundfont-gm\n",
                  missing.c_str(), decoded_mid.c_str());
      return 0;
    }
    const std::string wav = (dir / "decoded.wav").string();
    const char* render_args[] = {"relgrad", "render", decoded_mid.c_str(), "-o", wav.c_str(),
                                 "--soundfont", soundfont.c_str()};
    std::ostringstream out, err;
    if (run_cli(7, render_args, out, err) != 0) {
      std::fprintf(stderr, "%s", err.str().c_str());
      return 1;
    }
    // A WAV file starts with "RIFF"; 5.75 s of 44.1 kHz audio is far more than its 44-byte header.
    std::ifstream in(wav, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    const auto bytes = static_cast<long long>(fs::file_size(wav));
    if (std::string(magic, 4) != "RIFF" || bytes < 44100) {
      std::fprintf(stderr, "%s is not the WAV file expected (%lld bytes)\n", wav.c_str(), bytes);
      return 1;
    }
    std::printf("rendered %s, %lld bytes\n", wav.c_str(), bytes);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
