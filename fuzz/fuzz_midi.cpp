// libFuzzer target: train/music/midi.h parse_midi on arbitrary bytes, then everything downstream of the
// parser on what it accepted (as the "midi fuzz" test does): the writer must accept every file the
// reader makes and read back the same file; the tempo map and the music encoding must either work or
// throw relgrad::Error.
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "train/music/midi.h"
#include "train/music/music.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  relgrad::MidiFile file;
  try {
    file = relgrad::parse_midi(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const relgrad::Error&) {
    return 0;
  }
  try {
    if (!(relgrad::parse_midi(relgrad::serialize_midi(file), "rewritten") == file))
      relgrad::fuzz::finding("parse(serialize(file)) != file");
  } catch (const relgrad::Error& e) {
    relgrad::fuzz::finding(std::string("a file the reader accepted was refused on rewrite: ") + e.what());
  }
  try {
    relgrad::TempoMap tempo(file);
    for (const relgrad::MidiTrack& t : file.tracks) (void)tempo.seconds(t.end());
  } catch (const relgrad::Error&) {
  }
  try {
    (void)relgrad::decode_performance(relgrad::encode_performance(file));
  } catch (const relgrad::Error&) {
  }
  return 0;
}
