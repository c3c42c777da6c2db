// The J.S. Bach chorales (train/music/chorales.h): the shipped file, the parser's refusals, the token
// serialisation, MIDI both ways, and the two datasets with their evaluation batches.
#include <algorithm>
#include <map>
#include <set>

#include "core/file_io.h"
#include "file_testing.h"
#include "train/music/chorales.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::TempDir;

namespace {

// The repository's copy (tests/golden is two levels below the repository root).
std::string shipped_path() { return std::string(RELGRAD_GOLDEN_DIR) + "/../../data/jsb/Jsb16thSeparated.json"; }

const ChoraleSet& shipped() {
  static const ChoraleSet set = read_chorales(shipped_path());
  return set;
}

int64_t steps_of(const std::vector<Chorale>& chorales) {
  int64_t n = 0;
  for (const Chorale& c : chorales) n += static_cast<int64_t>(c.steps.size());
  return n;
}

// Every chorale of the shipped file, all splits.
std::vector<const Chorale*> all_chorales() {
  std::vector<const Chorale*> out;
  for (const auto* split : {&shipped().train, &shipped().valid, &shipped().test})
    for (const Chorale& c : *split) out.push_back(&c);
  return out;
}

void check_refused(const std::string& json, const std::string& expected) {
  const std::string start = json.substr(0, 200);
  CAPTURE(start);
  check_throws_with([&] { parse_chorales(json, "t.json"); }, "[chorales] t.json: " + expected);
}

const char* kSmall = R"({"train": [[[60, 55, 52, 48], [62, 55, 53, 47]]], "valid": [[[-1, -1, -1, -1]]], "test": []})";

}  // namespace

TEST_CASE("chorales: the shipped file") {
  const std::string bytes = read_file(shipped_path(), "test");
  CHECK(bytes.size() == 1666444);
  CHECK(fnv1a64(bytes.data(), bytes.size()) == 0xbedae8707df2b3e0ULL);
  const ChoraleSet& set = shipped();
  CHECK(set.train.size() == 229);
  CHECK(set.valid.size() == 76);
  CHECK(set.test.size() == 77);
  CHECK(steps_of(set.train) == 55228);
  CHECK(steps_of(set.valid) == 18408);
  CHECK(steps_of(set.test) == 18900);
  int lo = 128, hi = -1;
  for (const Chorale* c : all_chorales())
    for (const auto& step : c->steps)
      for (int p : step)
        if (p >= 0) lo = std::min(lo, p), hi = std::max(hi, p);
  CHECK(lo == 36);
  CHECK(hi == 81);
  CHECK(set.test[0].steps[0] == std::array<int, 4>{65, 60, 57, 53});
  // The writer's text parses back to the same set.
  const ChoraleSet again = parse_chorales(chorales_to_json(set), "rewritten");
  CHECK(again.train == set.train);
  CHECK(again.valid == set.valid);
  CHECK(again.test == set.test);
  // Found from the source tree (or the working directory) without a path.
  CHECK(read_file(default_chorales_path(), "test") == bytes);
}

TEST_CASE("chorales: parsing accepts integral floats and empty splits") {
  const ChoraleSet s = parse_chorales(kSmall, "small");
  REQUIRE(s.train.size() == 1);
  CHECK(s.train[0].steps[1] == std::array<int, 4>{62, 55, 53, 47});
  CHECK(s.valid[0].steps[0] == std::array<int, 4>{-1, -1, -1, -1});
  CHECK(s.test.empty());
  const ChoraleSet f = parse_chorales(R"({"test": [], "valid": [], "train": [[[60.0, -1.0, 0, 127]]]})", "f");
  CHECK(f.train[0].steps[0] == std::array<int, 4>{60, -1, 0, 127});
  CHECK(to_string(ChoraleSplit::Valid) == std::string("valid"));
  CHECK(&f.split(ChoraleSplit::Train) == &f.train);
}

TEST_CASE("chorales: every refusal names its position") {
  check_refused(R"({"train": [], "valid": [], "test": [)", "not valid JSON at byte 36 (the end of the text)");
  check_refused(R"({"train": [], "valid": [], "test": []} x)", "not valid JSON at byte 39: syntax error");
  check_refused("", "not valid JSON at byte 0 (the end of the text)");
  check_refused(R"({"train": [], "valid": [], "train": [], "test": []})", "duplicate key 'train'");
  check_refused(R"({"train": [], "valid": []})", "missing key 'test'");
  check_refused(R"({"train": [], "valid": [], "test": [], "extra": []})", "unexpected key 'extra'");
  check_refused(R"([1, 2])", "the file must be one JSON object");
  check_refused(R"({"train": {}, "valid": [], "test": []})", "key 'train' must be an array of chorales, got an object");
  check_refused(R"({"train": [], "valid": [5], "test": []})", "valid chorale 0: a chorale must be an array of steps");
  check_refused(R"({"train": [], "valid": [], "test": [[[60,60,60,60]], []]})",
                "test chorale 1: a chorale must have at least one step");
  check_refused(R"({"train": [[[60,60,60,60], "x"]], "valid": [], "test": []})",
                "train chorale 0 step 1: a step must be an array of four integers, got a string");
  check_refused(R"({"train": [[[60,60,60,60], [1, 2, 3]]], "valid": [], "test": []})",
                "train chorale 0 step 1: a step must be an array of four integers (soprano, alto, tenor, bass), got 3");
  check_refused(R"({"train": [[[60,60,60,60,60]]], "valid": [], "test": []})",
                "train chorale 0 step 0: a step must be an array of four integers");
  check_refused(R"({"train": [], "valid": [], "test": [[[60,60,60,60]], [[1,2,200,4]]]})",
                "test chorale 1 step 0 voice 2 (tenor): 200 is not -1 or a pitch 0..127");
  check_refused(R"({"train": [[[60,60,60,-2]]], "valid": [], "test": []})",
                "train chorale 0 step 0 voice 3 (bass): -2 is not -1 or a pitch 0..127");
  check_refused(R"({"train": [[[60.5,60,60,60]]], "valid": [], "test": []})",
                "train chorale 0 step 0 voice 0 (soprano): 60.5 is not an integer");
  check_refused(R"({"train": [[[60,true,60,60]]], "valid": [], "test": []})",
                "train chorale 0 step 0 voice 1 (alto): must be -1 or a pitch 0..127, got true");
  check_refused(R"({"train": [[[60,[60],60,60]]], "valid": [], "test": []})",
                "train chorale 0 step 0 voice 1 (alto): must be -1 or a pitch 0..127, got an array");
  check_refused(R"({"train": [[[60,99999999999999999999,60,60]]], "valid": [], "test": []})",
                "train chorale 0 step 0 voice 1 (alto)");
  // More than kMaxChoraleSteps steps in one chorale.
  std::string many = R"({"valid": [], "test": [], "train": [[)";
  for (int64_t k = 0; k <= kMaxChoraleSteps; ++k) many += k ? ",[1,2,3,4]" : "[1,2,3,4]";
  check_refused(many + "]]}", "train chorale 0: more than 100000 steps");
  // Over the size limit, refused before parsing.
  check_refused(std::string(static_cast<size_t>(kMaxChoraleFileBytes) + 1, ' '), "the text is 67108865 bytes, more than the limit");
  // A missing file names its path.
  check_throws_with([] { read_chorales("/nonexistent/chorales.json"); }, "/nonexistent/chorales.json");
}

TEST_CASE("chorales: token layout, vocabulary and round trips") {
  const Vocab v = chorale_vocab();
  CHECK(v.size == 132);
  REQUIRE(v.names.size() == 132);
  CHECK(v.name(kPad) == "<pad>");
  CHECK(v.name(kBos) == "<bos>");
  CHECK(v.name(kEos) == "<eos>");
  CHECK(v.name(kChoraleRest) == "REST");
  CHECK(v.name(chorale_token(60)) == "C4");
  CHECK(v.name(chorale_token(54)) == "F#3");
  CHECK(v.name(chorale_token(0)) == "C-1");
  CHECK(v.name(chorale_token(127)) == "G9");
  CHECK(chorale_token(-1) == 3);
  CHECK(chorale_token(60) == 64);
  CHECK(chorale_pitch(3) == -1);
  CHECK(chorale_pitch(131) == 127);
  check_throws_with([] { chorale_token(128); }, "128");
  check_throws_with([] { chorale_pitch(kEos); }, "got 2");
  check_throws_with([] { chorale_pitch(132); }, "got 132");

  for (const Chorale* c : all_chorales()) {
    const std::vector<int64_t> t = chorale_tokens(*c);
    const int64_t n = static_cast<int64_t>(c->steps.size());
    REQUIRE(static_cast<int64_t>(t.size()) == 4 * n + 2);
    CHECK(t.front() == kBos);
    CHECK(t.back() == kEos);
    bool layout = true;
    for (int64_t k = 0; k < n; ++k)
      for (int v2 = 0; v2 < 4; ++v2) layout = layout && t[4 * k + 1 + v2] == chorale_token(c->steps[k][v2]);
    CHECK(layout);
    CHECK(chorale_from_tokens(t) == *c);
    const std::vector<int64_t> s = soprano_tokens(*c), lower = lower_voice_tokens(*c);
    CHECK(static_cast<int64_t>(s.size()) == n);
    CHECK(static_cast<int64_t>(lower.size()) == 3 * n);
    CHECK(chorale_from_parts(s, lower) == *c);
  }
  // What a model may write: PAD/BOS skipped, ids outside REST..131 skipped, EOS stops, a last
  // incomplete step dropped.
  const Chorale c = chorale_from_tokens({kPad, kBos, 64, 3, 60, kBos, 56, 500, -7, 64, 64, 64, kEos, 64, 64, 64, 64});
  REQUIRE(c.steps.size() == 1);
  CHECK(c.steps[0] == std::array<int, 4>{60, -1, 56, 52});
  CHECK(chorale_from_tokens({64, 64, 64}).steps.empty());
  check_throws_with([] { chorale_from_parts({64}, {64, 64}); }, "3 tokens per soprano token");
}

TEST_CASE("chorales: MIDI both ways") {
  TempDir dir;
  int written = 0;
  for (const Chorale* c : all_chorales()) {
    const MidiFile midi = chorale_midi(*c);
    CHECK(chorale_from_midi(midi) == *c);
    // Through the bytes of a file (every 25th chorale through the disk, all through memory).
    const std::string bytes = serialize_midi(midi);
    CHECK(chorale_from_midi(parse_midi(bytes, "mem")) == *c);
    if (written++ % 25 == 0) {
      const std::string path = dir.file("c.mid");
      write_midi(path, midi);
      CHECK(chorale_from_midi(read_midi(path)) == *c);
    }
    // The melody of the whole chorale is the highest voice sounding at each step (the soprano save
    // for voice crossings and soprano rests); of the soprano alone, the soprano line itself.
    const int64_t n = static_cast<int64_t>(c->steps.size());
    size_t lead = 0;
    while (lead < c->steps.size() && c->steps[lead][0] < 0) ++lead;
    Chorale soprano = *c;
    for (auto& step : soprano.steps) step[1] = step[2] = step[3] = -1;
    const std::vector<int> melody = melody_from_midi(chorale_midi(soprano));
    std::vector<int> expected;
    size_t last = c->steps.size();
    while (last > 0 && c->steps[last - 1][0] < 0) --last;
    for (size_t k = lead; k < last; ++k) expected.push_back(c->steps[k][0]);
    CHECK(melody == expected);
    std::vector<int> highest;
    for (const auto& step : c->steps) highest.push_back(*std::max_element(step.begin(), step.end()));
    CHECK(melody_from_midi(midi) == highest);
    CHECK(n > 0);
  }
  // Notes: a held pitch is one note; channel = voice; 0.125 s steps; velocity 81.
  Chorale c;
  c.steps = {{67, 60, -1, 48}, {67, 62, -1, 48}, {69, 62, 55, -1}};
  const std::vector<Note> notes = chorale_notes(c);
  REQUIRE(notes.size() == 6);
  CHECK(notes[0].pitch == 67);
  CHECK(notes[0].channel == 0);
  CHECK(notes[0].end == 0.25);
  CHECK(notes[0].velocity == 81);
  std::map<int, int> per_channel;
  for (const Note& n : notes) ++per_channel[n.channel];
  CHECK(per_channel == std::map<int, int>{{0, 2}, {1, 2}, {2, 1}, {3, 1}});
  // Trailing rests survive (the track ends at the chorale's end).
  c.steps.push_back({-1, -1, -1, -1});
  CHECK(chorale_from_midi(chorale_midi(c)) == c);
  // A melody at 60 bpm with leading silence: 16ths of 0.25 s, the silence dropped.
  std::vector<Note> slow = {{72, 80, 1.0, 1.5, 0}, {60, 80, 1.0, 2.0, 1}};
  MidiFile m = midi_of(slow, MidiOutOptions{500, 1000000});
  CHECK(melody_from_midi(m) == std::vector<int>{72, 72, 60, 60});
  check_throws_with([] { melody_from_midi(MidiFile{0, 480, {MidiTrack{}}}); }, "no notes");
}
