// The J.S. Bach chorales (train/music/chorales.h): the shipped file, the parser's refusals, the token
// serialisation, MIDI both ways, and the two datasets with their evaluation batches.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <set>

#include "core/file_io.h"
#include "file_testing.h"
#include "train/music/chorales.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;
using relgrad::testing::TempDir;

namespace {

// The repository's copy (tests/golden is two levels below the repository root).
std::string shipped_path() {
  return std::string(RELGRAD_GOLDEN_DIR) + "/../../data/jsb/Jsb16thSeparated.json";
}

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

const char* kSmall =
    R"({"train": [[[60, 55, 52, 48], [62, 55, 53, 47]]], "valid": [[[-1, -1, -1, -1]]], "test": []})";

}  // namespace

TEST_CASE("chorales: the shipped file") {
  const std::string bytes = read_file(shipped_path(), "test");
  CHECK(bytes.size() == 1666444);
  CHECK(fnv1a64(bytes.data(), bytes.size()) == 0xbedae8707df2b3e0ULL);
  // data/jsb/README.md gives the sha256 of the upstream file; coreutils' sha256sum checks it here.
  if (FILE* p = popen(("sha256sum '" + shipped_path() + "' 2>/dev/null").c_str(), "r")) {
    char digest[65] = {0};
    const size_t got = fread(digest, 1, 64, p);
    pclose(p);
    if (got == 64)
      CHECK(std::string(digest) == "79294cc374f9252e95ef4b703161524c1c53dc1f712c236f00f1c1f5d54af5a7");
    else
      MESSAGE("sha256sum not found: the sha256 of the shipped file is not checked");
  }
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
  check_refused(R"({"train": {}, "valid": [], "test": []})",
                "key 'train' must be an array of chorales, got an object");
  check_refused(R"({"train": [], "valid": [5], "test": []})",
                "valid chorale 0: a chorale must be an array of steps");
  check_refused(R"({"train": [], "valid": [], "test": [[[60,60,60,60]], []]})",
                "test chorale 1: a chorale must have at least one step");
  check_refused(R"({"train": [[[60,60,60,60], "x"]], "valid": [], "test": []})",
                "train chorale 0 step 1: a step must be an array of four integers, got a string");
  check_refused(
      R"({"train": [[[60,60,60,60], [1, 2, 3]]], "valid": [], "test": []})",
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
  check_refused(std::string(static_cast<size_t>(kMaxChoraleFileBytes) + 1, ' '),
                "the text is 67108865 bytes, more than the limit");
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
  const Chorale c =
      chorale_from_tokens({kPad, kBos, 64, 3, 60, kBos, 56, 500, -7, 64, 64, 64, kEos, 64, 64, 64, 64});
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
  // Any file: channels above 3 are not voices; of two notes sounding in one voice the later-started
  // one is heard; a file longer than kMaxChoraleSteps steps is refused.
  const std::vector<Note> mixed = {{60, 80, 0.0, 0.5, 1}, {64, 80, 0.25, 0.375, 1}, {90, 80, 0.0, 1.0, 5}};
  Chorale from_mixed = chorale_from_midi(midi_of(mixed));
  REQUIRE(from_mixed.steps.size() == 8);  // to the end of the longest track: channel 5's note, 1 s
  CHECK(from_mixed.steps[1] == std::array<int, 4>{-1, 60, -1, -1});
  CHECK(from_mixed.steps[2] == std::array<int, 4>{-1, 64, -1, -1});
  CHECK(from_mixed.steps[3] == std::array<int, 4>{-1, 60, -1, -1});
  CHECK(from_mixed.steps[4] == std::array<int, 4>{-1, -1, -1, -1});
  check_throws_with([] { chorale_from_midi(midi_of({{60, 80, 0.0, 20000.0, 0}})); }, "more than 100000 steps");
  // A melody at 60 bpm with leading silence: 16ths of 0.25 s, the silence dropped.
  std::vector<Note> slow = {{72, 80, 1.0, 1.5, 0}, {60, 80, 1.0, 2.0, 1}};
  MidiFile m = midi_of(slow, MidiOutOptions{500, 1000000});
  CHECK(melody_from_midi(m) == std::vector<int>{72, 72, 60, 60});
  check_throws_with([] { melody_from_midi(MidiFile{0, 480, {MidiTrack{}}}); }, "no notes");
}

// ---- datasets ------------------------------------------------------------------------------------

namespace {

std::vector<int64_t> row_of(const Tensor& t, int64_t b) {
  const std::vector<int64_t> all = t.to_vector<int64_t>();
  const int64_t w = t.shape()[1];
  return std::vector<int64_t>(all.begin() + b * w, all.begin() + (b + 1) * w);
}
std::vector<bool> mask_row(const Tensor& t, int64_t b) {
  const std::vector<bool> all = t.to_vector<bool>();
  const int64_t w = t.shape()[1];
  return std::vector<bool>(all.begin() + b * w, all.begin() + (b + 1) * w);
}

// Where `part` (no PAD) sits in some chorale's token sequence at an offset that is a multiple of 4:
// the number of (chorale, offset) places found.
int places_at_multiple_of_4(const std::vector<Chorale>& chorales, const std::vector<int64_t>& part) {
  int found = 0;
  for (const Chorale& c : chorales) {
    const std::vector<int64_t> seq = chorale_tokens(c);
    for (size_t s = 0; s + part.size() <= seq.size(); s += 4)
      if (std::equal(part.begin(), part.end(), seq.begin() + s)) ++found;
  }
  return found;
}

ChoraleDataConfig data_config(int64_t context = 64, uint64_t seed = 7) {
  ChoraleDataConfig c;
  c.path = shipped_path();
  c.seed = seed;
  c.batch_size = 6;
  c.context = context;
  c.harmony_steps = 32;
  return c;
}

bool same_batch(const Batch& a, const Batch& b) {
  auto eq = [](const Tensor& x, const Tensor& y) {
    return x.defined() == y.defined() && (!x.defined() || testing::bitwise_equal(x, y));
  };
  return eq(a.tokens, b.tokens) && eq(a.targets, b.targets) && eq(a.padding_mask, b.padding_mask) &&
         eq(a.src, b.src) && eq(a.tgt_in, b.tgt_in) && eq(a.tgt_out, b.tgt_out) &&
         eq(a.tgt_positions, b.tgt_positions) && a.num_targets == b.num_targets;
}

struct FakeModel : SampleModel {
  std::vector<int64_t> continuation, reply;
  std::vector<int64_t> prompt_seen, source_seen;
  std::vector<int64_t> answer(const std::vector<int64_t>& source, int64_t) override {
    source_seen = source;
    return reply;
  }
  std::vector<int64_t> continue_prompt(const std::vector<int64_t>& prompt, bool) override {
    prompt_seen = prompt;
    std::vector<int64_t> out = prompt;
    out.insert(out.end(), continuation.begin(), continuation.end());
    return out;
  }
};

}  // namespace

TEST_CASE("chorales: decoder-only windows") {
  const ChoraleData data(data_config());
  CHECK(data.vocab().size == 132);
  CHECK(data.batch_size() == 6);
  CHECK(data.checksum() == std::optional<uint64_t>(0xbedae8707df2b3e0ULL));
  CHECK(data.path() == shipped_path());
  // A pure function of (seed, split, index).
  CHECK(same_batch(data.batch(3, Split::Train), ChoraleData(data_config()).batch(3, Split::Train)));
  CHECK(!same_batch(data.batch(3, Split::Train), data.batch(4, Split::Train)));
  CHECK(!same_batch(data.batch(3, Split::Train), data.batch(3, Split::HeldOut)));
  CHECK(!same_batch(data.batch(3, Split::Train), ChoraleData(data_config(64, 8)).batch(3, Split::Train)));
  for (Split split : {Split::Train, Split::HeldOut})
    for (int64_t index : {0, 1, 99}) {
      const Batch b = data.batch(index, split);
      REQUIRE(b.decoder_only());
      CHECK(b.tokens.shape() == Shape{6, 64});
      int64_t targets = 0;
      for (int64_t r = 0; r < 6; ++r) {
        const std::vector<int64_t> tok = row_of(b.tokens, r), tgt = row_of(b.targets, r);
        // context 64 < the shortest chorale: every window is full and sits at 4k of its chorale, and
        // its targets are the next tokens; held-out windows come from the valid chorales.
        std::vector<int64_t> window = tok;
        window.push_back(tgt.back());
        const auto& own = split == Split::Train ? shipped().train : shipped().valid;
        CHECK(places_at_multiple_of_4(own, window) >= 1);
        for (int64_t t = 0; t + 1 < 64; ++t) CHECK(tgt[t] == tok[t + 1]);
        for (bool m : mask_row(b.padding_mask, r)) CHECK(!m);
        targets += 64;
      }
      CHECK(b.num_targets == targets);
    }
  // A context longer than a chorale: padded rows (PAD, -100, mask true) after EOS.
  const ChoraleData wide(data_config(4096));
  const Batch b = wide.batch(0, Split::HeldOut);
  int64_t counted = 0;
  for (int64_t r = 0; r < 6; ++r) {
    const std::vector<int64_t> tok = row_of(b.tokens, r), tgt = row_of(b.targets, r);
    const std::vector<bool> mask = mask_row(b.padding_mask, r);
    const auto eos = std::find(tgt.begin(), tgt.end(), kEos);
    REQUIRE(eos != tgt.end());
    const size_t len = eos - tgt.begin() + 1;  // 4n + 1 targets of a whole chorale
    CHECK(tok[0] == kBos);
    CHECK(len % 4 == 1);
    std::vector<int64_t> whole(tok.begin(), tok.begin() + len);
    whole.push_back(kEos);
    CHECK(places_at_multiple_of_4(shipped().valid, whole) >= 1);
    for (size_t t = len; t < tok.size(); ++t) {
      CHECK(tok[t] == kPad);
      CHECK(tgt[t] == kIgnoreIndex);
      CHECK(mask[t]);
    }
    for (size_t t = 0; t < len; ++t) CHECK(!mask[t]);
    counted += static_cast<int64_t>(len);
  }
  CHECK(b.num_targets == counted);
  // Errors.
  check_throws_with([] { ChoraleData(data_config(66)); }, "multiple of 4");
  ChoraleDataConfig bad = data_config();
  bad.path = "/nonexistent/j.json";
  check_throws_with([&] { ChoraleData d(bad); }, "/nonexistent/j.json");
  check_throws_with([&] { data.batch(-1, Split::Train); }, "batch index");
}

TEST_CASE("chorales: harmonisation windows") {
  const HarmonyData data(data_config());
  CHECK(same_batch(data.batch(2, Split::HeldOut), HarmonyData(data_config()).batch(2, Split::HeldOut)));
  CHECK(!same_batch(data.batch(2, Split::HeldOut), data.batch(2, Split::Train)));
  CHECK(harmony_query_positions(2).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2});
  for (int64_t S : {32, 700}) {
    ChoraleDataConfig cfg = data_config();
    cfg.harmony_steps = S;
    const HarmonyData h(cfg);
    for (Split split : {Split::Train, Split::HeldOut}) {
      const Batch b = h.batch(5, split);
      REQUIRE(!b.decoder_only());
      CHECK(b.src.shape() == Shape{6, S});
      CHECK(b.tgt_in.shape() == Shape{6, 3 * S + 1});
      CHECK(b.tgt_out.shape() == Shape{6, 3 * S + 1});
      std::vector<int64_t> expected_positions;
      for (int64_t i = 0; i < 3 * S + 1; ++i) expected_positions.push_back(i / 3);
      CHECK(b.tgt_positions.to_vector<int64_t>() == expected_positions);
      const auto& own = split == Split::Train ? shipped().train : shipped().valid;
      int64_t targets = 0;
      for (int64_t r = 0; r < 6; ++r) {
        const std::vector<int64_t> src = row_of(b.src, r), in = row_of(b.tgt_in, r),
                                   out = row_of(b.tgt_out, r);
        const std::vector<bool> smask = mask_row(b.src_padding_mask, r),
                                tmask = mask_row(b.tgt_padding_mask, r);
        const int64_t m = std::find(src.begin(), src.end(), kPad) - src.begin();
        CHECK(m >= 1);
        CHECK(in[0] == kBos);
        CHECK(out[3 * m] == kEos);
        std::vector<int64_t> soprano(src.begin(), src.begin() + m), lower(out.begin(), out.begin() + 3 * m);
        for (int64_t i = 0; i < 3 * m; ++i) CHECK(in[i + 1] == out[i]);
        for (int64_t i = 3 * m + 1; i < 3 * S + 1; ++i)
          CHECK((in[i] == kPad && out[i] == kIgnoreIndex && tmask[i]));
        for (int64_t k = 0; k < S; ++k) CHECK(smask[k] == (k >= m));
        // The row is m consecutive steps of one chorale of the split (all of it when S > its length).
        const Chorale part = chorale_from_parts(soprano, lower);
        int found = 0;
        for (const Chorale& c : own)
          for (size_t k0 = 0; k0 + part.steps.size() <= c.steps.size(); ++k0)
            if (std::equal(part.steps.begin(), part.steps.end(), c.steps.begin() + k0)) {
              ++found;
              CHECK((m == S || (k0 == 0 && part.steps.size() == c.steps.size())));
            }
        CHECK(found >= 1);
        targets += 3 * m + 1;
      }
      CHECK(b.num_targets == targets);
    }
  }
  ChoraleDataConfig bad = data_config();
  bad.harmony_steps = 0;
  check_throws_with([&] { HarmonyData h(bad); }, "harmony_steps");
}

TEST_CASE("chorales: evaluation batches score every token once") {
  for (int64_t context : {8, 64, 256, 4096}) {
    CAPTURE(context);
    const std::vector<Batch> batches = chorale_eval_batches(shipped(), ChoraleSplit::Valid, context, 5);
    int64_t expected = 0;
    for (const Chorale& c : shipped().valid) expected += 4 * static_cast<int64_t>(c.steps.size()) + 1;
    int64_t counted = 0;
    size_t chorale = 0;
    std::vector<int64_t> scored;  // the targets of the current chorale so far, in order
    int64_t bad_history = 0, misplaced = 0;
    for (const Batch& b : batches) {
      counted += b.num_targets;
      CHECK(b.tokens.shape()[0] <= 5);
      CHECK(b.tokens.shape()[1] <= context);
      for (int64_t r = 0; r < b.tokens.shape()[0]; ++r) {
        REQUIRE(chorale < shipped().valid.size());
        const std::vector<int64_t> seq = chorale_tokens(shipped().valid[chorale]);
        std::vector<int64_t> tok = row_of(b.tokens, r), tgt = row_of(b.targets, r);
        const auto pad = std::find(tok.begin(), tok.end(), kPad);
        tok.erase(pad, tok.end());
        // The window is a run of this chorale at 4k, its targets the next tokens where scored.
        // (Chorales repeat phrases, so the place must fit the targets too.)
        size_t start = seq.size();
        for (size_t s = 0; s + tok.size() < seq.size() && start == seq.size(); s += 4) {
          bool fits = std::equal(tok.begin(), tok.end(), seq.begin() + s);
          for (size_t t = 0; t < tok.size() && fits; ++t)
            fits = tgt[t] == kIgnoreIndex || tgt[t] == seq[s + t + 1];
          if (fits) start = s;
        }
        if (start == seq.size()) {
          ++misplaced;
          continue;
        }
        for (size_t t = 0; t < tok.size(); ++t)
          if (tgt[t] != kIgnoreIndex) {
            if (start > 0 && static_cast<int64_t>(t) < context / 2) ++bad_history;
            scored.push_back(tgt[t]);
          }
        if (scored.size() == seq.size() - 1) {
          CHECK(std::equal(scored.begin(), scored.end(), seq.begin() + 1));
          scored.clear();
          ++chorale;
        }
      }
    }
    CHECK(misplaced == 0);
    CHECK(bad_history == 0);
    CHECK(chorale == shipped().valid.size());
    CHECK(counted == expected);
  }
  check_throws_with([] { chorale_eval_batches(shipped(), ChoraleSplit::Test, 6, 4); }, "multiple of 4");

  const std::vector<Batch> hb = harmony_eval_batches(shipped(), ChoraleSplit::Test, 8);
  CHECK(hb.size() == 10);  // 77 chorales in rows of 8
  int64_t counted = 0, expected = 0;
  size_t chorale = 0;
  for (const Batch& b : hb) {
    counted += b.num_targets;
    const int64_t width = b.src.shape()[1];
    CHECK(b.tgt_in.shape()[1] == 3 * width + 1);
    CHECK(b.tgt_positions.shape() == Shape{3 * width + 1});
    CHECK(b.tgt_positions.to_vector<int64_t>()[3 * width] == width);
    for (int64_t r = 0; r < b.src.shape()[0]; ++r, ++chorale) {
      const Chorale& c = shipped().test[chorale];
      std::vector<int64_t> src = row_of(b.src, r);
      src.resize(c.steps.size());
      CHECK(src == soprano_tokens(c));
      std::vector<int64_t> out = row_of(b.tgt_out, r);
      const std::vector<int64_t> lower = lower_voice_tokens(c);
      CHECK(std::equal(lower.begin(), lower.end(), out.begin()));
      CHECK(out[lower.size()] == kEos);
      expected += 3 * static_cast<int64_t>(c.steps.size()) + 1;
    }
  }
  CHECK(chorale == shipped().test.size());
  CHECK(counted == expected);
}

TEST_CASE("chorales: samples") {
  TempDir dir;
  std::ostringstream out;
  FakeModel model;
  const Chorale& first = shipped().valid[0];
  // The LM continues the first 8 steps (BOS and 32 tokens); the sample is written as MIDI.
  model.continuation = {chorale_token(60), chorale_token(55), chorale_token(52), chorale_token(48), 64, kEos};
  ChoraleData(data_config()).print_samples(model, 1, dir.path.string(), out);
  std::vector<int64_t> prompt = chorale_tokens(first);
  prompt.resize(33);
  CHECK(model.prompt_seen == prompt);
  Chorale expected;
  expected.steps.assign(first.steps.begin(), first.steps.begin() + 8);
  expected.steps.push_back({60, 55, 52, 48});
  CHECK(chorale_from_midi(read_midi(dir.file("sample.mid"))) == expected);
  CHECK(out.str().find("to 9 steps") != std::string::npos);

  // Harmonisation: the reply becomes the lower voices; a short one is filled with rests.
  const HarmonyData h(data_config());
  model.reply = lower_voice_tokens(first);
  model.reply.push_back(kEos);
  h.print_samples(model, 1, dir.path.string(), out);
  CHECK(model.source_seen == soprano_tokens(first));
  CHECK(chorale_from_midi(read_midi(dir.file("harmony.mid"))) == first);
  model.reply = {chorale_token(60), kBos};
  std::ostringstream short_out;
  h.print_samples(model, 1, dir.path.string(), short_out);
  CHECK(short_out.str().find("filled with rests") != std::string::npos);
  CHECK(short_out.str().find("1 tokens that are no voice") != std::string::npos);
  const Chorale got = chorale_from_midi(read_midi(dir.file("harmony.mid")));
  REQUIRE(got.steps.size() == first.steps.size());
  CHECK(got.steps[0] == std::array<int, 4>{first.steps[0][0], 60, -1, -1});
}
