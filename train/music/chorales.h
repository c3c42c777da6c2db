// The J.S. Bach chorales on a 16th-note grid (the Jsb16thSeparated set of Coconet, Huang et al. 2017,
// shipped as data/jsb/Jsb16thSeparated.json; data/jsb/README.md says where it came from), and the two
// ways relgrad trains on them:
//   - a decoder-only LM over the Music Transformer's serialisation (Huang et al. 2019, section 4.1):
//     the four voices interleaved per 16th step, soprano, alto, tenor, bass, one token per voice;
//   - harmonisation: an encoder–decoder reads the soprano line (one token per 16th) and writes the
//     alto, tenor and bass (three tokens per 16th, interleaved), so the target is three times the
//     source's length and each target token has its own time step on the source axis.
//
// Token ids (one vocabulary of 132, PAD/BOS/EOS as in train/data/data.h):
//   0 PAD, 1 BOS, 2 EOS, 3 REST (the voice is silent at this step: -1 in the file),
//   4 + p  pitch p = 0..127 (MIDI numbers; names "C4" = 60, "F#3" = 54; the chorales use 36..81).
// Decoder-only sequence of a chorale of n steps: BOS s0 a0 t0 b0 s1 a1 t1 b1 … s(n−1) … b(n−1) EOS,
// 4n + 2 tokens; sequence index 4k + 1 + v holds voice v (0 soprano … 3 bass) of step k.
//
// File format (docs/data-format.md, "Chorales"): one JSON object with exactly the keys "train",
// "valid", "test"; each an array of chorales; a chorale an array of at least one step; a step an
// array of exactly four integers (soprano, alto, tenor, bass), each -1 (rest) or a MIDI pitch 0..127.
// Integral floats (60.0) are accepted, as numpy writes them; anything else is refused.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/data.h"
#include "train/data/dataset.h"
#include "train/music/midi.h"
#include "train/music/music.h"

namespace relgrad {

inline constexpr int kChoraleVoices = 4;              // soprano, alto, tenor, bass
inline constexpr int64_t kChoraleRest = 3;            // token REST
inline constexpr int64_t kChoralePitchBase = 4;       // token of pitch p: 4 + p
inline constexpr int64_t kChoraleVocabSize = 4 + 128; // 132
inline constexpr int kChoraleRestPitch = -1;          // a rest in the file and in Chorale::steps
// The chorales' grid: a 16th note at 120 quarter notes per minute lasts 0.125 s (MIDI and WAV).
inline constexpr double kChoraleStepSeconds = 0.125;
// Bounds the loader enforces before sizing anything by the file (the shipped set: 1.67 MB, 640 steps).
inline constexpr int64_t kMaxChoraleFileBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxChoraleSteps = 100000;

// One chorale: per 16th step the four voices' pitches (soprano first), -1 = rest.
struct Chorale {
  std::vector<std::array<int, kChoraleVoices>> steps;
  bool operator==(const Chorale& o) const { return steps == o.steps; }
};

enum class ChoraleSplit { Train, Valid, Test };
const char* to_string(ChoraleSplit split);  // "train", "valid", "test"

struct ChoraleSet {
  std::vector<Chorale> train, valid, test;
  const std::vector<Chorale>& split(ChoraleSplit s) const;
};

// Parses the JSON text of a chorale file; `origin` names it in errors. Every failure is a
// relgrad::Error "[chorales] <origin>: <what>" naming the position: the JSON byte offset for a syntax
// error, or the split, chorale, step and voice ("test chorale 12 step 40 voice 2 (tenor): 200 is not
// -1 or a pitch 0..127"). Refused: text over kMaxChoraleFileBytes, duplicate or missing or extra
// keys, a chorale with no steps or more than kMaxChoraleSteps, a step that is not four integers.
ChoraleSet parse_chorales(const std::string& json_text, const std::string& origin);
// Reads and parses a file (a regular file of at most kMaxChoraleFileBytes; errors name the path).
ChoraleSet read_chorales(const std::string& path);
// The shipped file, found from the current directory, the executable's directory and the source tree
// (data/jsb/Jsb16thSeparated.json); the error lists where it looked.
std::string default_chorales_path();
// The JSON text of a set, in the file format above (the splits in the order train, valid, test).
std::string chorales_to_json(const ChoraleSet& set);

// ---- tokens --------------------------------------------------------------------------------------
Vocab chorale_vocab();                         // "<pad>", "<bos>", "<eos>", "REST", "C-1" … "G9"
int64_t chorale_token(int pitch);              // -1 → REST, 0..127 → 4 + p (checked)
int chorale_pitch(int64_t token);              // inverse: REST → -1, 4 + p → p; other ids: error
// BOS s0 a0 t0 b0 … EOS (see above).
std::vector<int64_t> chorale_tokens(const Chorale& chorale);
// A continuation's prompt, after training and in `relgrad sample`: a chorale's first 8 steps (fewer
// when it is shorter).
inline constexpr size_t kChoralePromptSteps = 8;
Chorale chorale_opening(const Chorale& chorale);
// Back from a decoder-only sequence as a model may write it: PAD and BOS are skipped, EOS stops,
// ids that are not REST or a pitch are skipped as well; the voices are filled in order, and a last
// incomplete step is dropped. For tokens chorale_tokens wrote, the chorale comes back exactly.
Chorale chorale_from_tokens(const std::vector<int64_t>& tokens);
// Harmonisation: the soprano line (one token per step) and the lower voices (alto, tenor, bass
// per step: 3n tokens), and the chorale they make together (sizes checked: lower = 3 × soprano).
std::vector<int64_t> soprano_tokens(const Chorale& chorale);
std::vector<int64_t> lower_voice_tokens(const Chorale& chorale);
Chorale chorale_from_parts(const std::vector<int64_t>& soprano, const std::vector<int64_t>& lower);

// ---- MIDI ----------------------------------------------------------------------------------------
// Voice v sounds on channel v; a run of equal pitches in one voice is one held note (the grid cannot
// tell a held note from a repeated one: Jsb16thSeparated does not record it); a step lasts
// kChoraleStepSeconds. Velocity 80 (bin value 81, music.h).
std::vector<Note> chorale_notes(const Chorale& chorale);
MidiFile chorale_midi(const Chorale& chorale);
// Back from a file chorale_midi wrote (or any file whose channels 0..3 carry the four voices, one
// note at a time each): per step, the pitch sounding in each voice at the step's midpoint, -1 if
// none (the latest-starting note if a voice has several); steps of kChoraleStepSeconds up to the last
// note's end or the end of the longest track, whichever is later (chorale_midi ends its track at the
// chorale's end, so trailing rests survive). chorale_from_midi(chorale_midi(c)) == c.
Chorale chorale_from_midi(const MidiFile& file);
// A melody to harmonise from any MIDI file: the highest pitch sounding at the midpoint of each 16th
// (the 16th taken from the file's first tempo, 120 bpm without one; tracks merged), -1 where nothing
// sounds; leading silence dropped. Errors: no notes, or more than kMaxChoraleSteps steps.
std::vector<int> melody_from_midi(const MidiFile& file);

// ---- datasets ------------------------------------------------------------------------------------
// Batches for the trainer. Every batch is a pure function of (seed, split, index): Philox with the
// counter words of CounterStream (train/data/data.h) under the stream tag 0x63686F72 ("chor"), one
// private stream per row. Split::Train draws from the train chorales, Split::HeldOut from valid.
struct ChoraleDataConfig {
  std::string path;          // the chorale file; empty = default_chorales_path()
  uint64_t seed = 0;         // window offsets and chorale choice
  int64_t batch_size = 16;
  int64_t context = 256;     // decoder-only: tokens per row (a multiple of 4)
  int64_t harmony_steps = 32; // harmonisation: 16th steps per row (source length)
};

// What both chorale datasets share: the file's chorales (loaded and checked by the constructor),
// its FNV-1a 64 checksum and path, the vocabulary and the configuration.
class ChoraleFileData : public Dataset {
 public:
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return config_.batch_size; }
  std::optional<uint64_t> checksum() const override { return checksum_; }
  std::string path() const override { return path_; }
  const ChoraleSet& chorales() const { return set_; }
  const ChoraleDataConfig& config() const { return config_; }

 protected:
  ChoraleFileData(const ChoraleDataConfig& config, const char* who);  // `who` names the dataset in errors
  ChoraleDataConfig config_;
  ChoraleSet set_;
  Vocab vocab_;
  uint64_t checksum_ = 0;
  std::string path_;
};

// Decoder-only windows: a row picks a chorale with probability ∝ its length and a start step k, and
// holds the context + 1 tokens of chorale_tokens from index 4k (BOS when k = 0, else the bass of step
// k − 1): position j of every window holds voice (j − 1) mod 4, so windows agree with whole pieces on
// which voice each position is. A window running past EOS is padded (PAD, targets −100, mask true).
class ChoraleData : public ChoraleFileData {
 public:
  explicit ChoraleData(const ChoraleDataConfig& config);
  Batch batch(int64_t index, Split split) const override;
  // A continuation of the first valid chorale's first 8 steps, printed as note names and written to
  // out_dir/sample.mid.
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override;
};

// Harmonisation windows: a row picks a chorale (∝ length) and harmony_steps consecutive steps
// (the whole chorale when shorter, padded): src = soprano tokens (B, S), tgt_in = BOS + lower voices
// (B, 3S + 1), tgt_out = lower voices + EOS, and tgt_positions (3S + 1): the source step each target
// query predicts, ⌊i / 3⌋ (the EOS query sits at S, one step past the melody) for
// model.cross_alignment = "explicit".
class HarmonyData : public ChoraleFileData {
 public:
  explicit HarmonyData(const ChoraleDataConfig& config);
  Batch batch(int64_t index, Split split) const override;
  // The first valid chorale's soprano harmonised greedily, printed and written to out_dir/harmony.mid.
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override;
};

// The explicit cross-attention positions of a harmonisation target of `steps` source steps:
// int64 (3·steps + 1), entry i = ⌊i / 3⌋.
Tensor harmony_query_positions(int64_t steps);

// Deterministic evaluation batches over whole chorales of a split, for note-wise NLL: every token of
// chorale_tokens after BOS (EOS included) is a target exactly once; a chorale longer than `context`
// is cut into windows starting at multiples of 4 tokens, each scoring only the tokens not scored by
// the window before, so each scored token sees at least context / 2 tokens of history (all of it
// near the start). Rows of at most `batch_size`, PAD / −100 / mask on the right. `context`: a multiple
// of 4, at least 8; windows advance by context / 2 rounded down to a multiple of 4.
std::vector<Batch> chorale_eval_batches(const ChoraleSet& set, ChoraleSplit split, int64_t context, int64_t batch_size);
// The same for harmonisation: each chorale whole (source its soprano line, target its lower voices),
// one row per chorale, batched and padded; tgt_positions ⌊i / 3⌋ as in HarmonyData (the same for every
// row: a shorter row's EOS query sits one step past its melody, as in training).
std::vector<Batch> harmony_eval_batches(const ChoraleSet& set, ChoraleSplit split, int64_t batch_size);

}  // namespace relgrad
