// libFuzzer target: the chorale file parser (train/music/chorales.h parse_chorales) on arbitrary
// bytes, and, for inputs that are MIDI files ("MThd" first), the MIDI → chorale and MIDI → melody
// conversions. Whatever the parser accepts must hold pitches -1..127 in non-empty chorales of at most
// kMaxChoraleSteps steps, write out and read back the same, and survive tokens and MIDI both ways.
#include <cstdint>

#include "fuzz/fuzz_common.h"
#include "train/music/chorales.h"

namespace {

using relgrad::fuzz::finding;

void check_chorale(const relgrad::Chorale& c) {
  if (c.steps.empty() || static_cast<int64_t>(c.steps.size()) > relgrad::kMaxChoraleSteps)
    finding("accepted a chorale with no steps or too many");
  for (const auto& step : c.steps)
    for (int p : step)
      if (p < -1 || p > 127) finding("accepted a pitch outside -1..127");
  if (!(relgrad::chorale_from_tokens(relgrad::chorale_tokens(c)) == c)) finding("tokens do not round trip");
  if (!(relgrad::chorale_from_parts(relgrad::soprano_tokens(c), relgrad::lower_voice_tokens(c)) == c))
    finding("soprano + lower voices do not round trip");
  const relgrad::MidiFile midi = relgrad::chorale_midi(c);
  if (!(relgrad::chorale_from_midi(relgrad::parse_midi(relgrad::serialize_midi(midi), "fuzz")) == c))
    finding("MIDI does not round trip");
}

void parse_json(const std::string& bytes) {
  try {
    const relgrad::ChoraleSet set = relgrad::parse_chorales(bytes, "fuzz");
    const relgrad::ChoraleSet again = relgrad::parse_chorales(relgrad::chorales_to_json(set), "rewritten");
    if (!(again.train == set.train && again.valid == set.valid && again.test == set.test))
      finding("chorales_to_json does not read back the same set");
    int64_t checked = 0;
    for (const auto* split : {&set.train, &set.valid, &set.test})
      for (const relgrad::Chorale& c : *split)
        if (checked++ < 8) check_chorale(c);  // a few: MIDI of a huge accepted input would be slow
  } catch (const relgrad::Error&) {
  }
}

void parse_midi_input(const std::string& bytes) {
  relgrad::MidiFile file;
  try {
    file = relgrad::parse_midi(bytes, "fuzz");
  } catch (const relgrad::Error&) {
    return;
  }
  try {
    const relgrad::Chorale c = relgrad::chorale_from_midi(file);
    if (static_cast<int64_t>(c.steps.size()) > relgrad::kMaxChoraleSteps)
      finding("chorale_from_midi: too many steps");
    for (const auto& step : c.steps)
      for (int p : step)
        if (p < -1 || p > 127) finding("chorale_from_midi: a pitch outside -1..127");
    // What comes back is a chorale like any other, except that it may have no steps.
    if (!c.steps.empty() && !(relgrad::chorale_from_midi(relgrad::chorale_midi(c)) == c))
      finding("chorale_from_midi(chorale_midi(c)) != c");
  } catch (const relgrad::Error&) {
  }
  try {
    const std::vector<int> melody = relgrad::melody_from_midi(file);
    if (static_cast<int64_t>(melody.size()) > relgrad::kMaxChoraleSteps)
      finding("melody_from_midi: too many steps");
    for (int p : melody)
      if (p < -1 || p > 127) finding("melody_from_midi: a pitch outside -1..127");
  } catch (const relgrad::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.compare(0, 4, "MThd") == 0)
    parse_midi_input(bytes);
  else
    parse_json(bytes);
  return 0;
}
