// Tasks where a token must be found by what it is and then by where it is, for `relgrad cope-bench`
// (train/instruments/cope_bench.h): the three toy tasks of CoPE (Golovneva et al. 2024, "Contextual
// Position Encoding: Learning to Count What's Important", arXiv 2405.18719, §4) and the indirect
// indexing diagnostic of PoPE (Gopalakrishnan et al. 2025, "Decoupling the 'What' and 'Where' With
// Polar Coordinate Positional Embeddings", arXiv 2509.10534). docs/cope-tasks.md gives the sources.
//
//   selective_copy     x = `symbols` digits 0 … 9 and `blanks` blanks "_", the digits at a uniformly
//                      random set of places; y = the digits in order (Gu & Dao's selective copying, the
//                      CoPE paper's version: the blank count is what its out-of-distribution splits vary).
//   counting           x = a program of n statements, n uniform in [min_steps, max_steps], each drawn
//                      with weights 1 : 50 : 7 from "v = 0 ;" (v uniform among `variables` names a, b,
//                      …), "pass;" and "v ++;" (v uniform among the variables set so far, none past 10;
//                      a statement that cannot be made is drawn again), then "print v" with v uniform
//                      among the variables set; y = v's value, one token 0 … 10. A program in which no
//                      variable is set is drawn again. This is the CoPE authors' generator
//                      (projects/cope/scripts/count_data_gen.py of facebookresearch/RAM) in their
//                      tokenisation: "pass;", "++;" and "print" are one token each.
//   flip_flop          Liu et al. 2023's flip-flop language FFL(p_i): `length` tokens, length / 2
//                      instruction–bit pairs; the first instruction is w (write), the last r (read), the
//                      others i (ignore) with probability `ignore`, else w or r with equal odds; the bit
//                      after w or i is uniform, the bit after r is the last one written. The loss and the
//                      score are on the bits after r, the only tokens the string determines.
//   indirect_indexing  a list of n distinct letters a … z (n uniform in [min_len, max_len]), "?", a letter
//                      s of the list, a shift k ∈ {−max_shift … −1, +1 … +max_shift}, then the answer: the
//                      letter k places after s (before it for k < 0). k is uniform, then s uniform among
//                      the letters that have a letter k places away.
//
// Layout: flip_flop and indirect_indexing are scored in place (tokens = the string but its last token,
// targets = the token after every r, after the shift k; −100 elsewhere); selective_copy and counting
// are the decoder-only layout of the synthetic tasks (train/data/data.h): x BOS y EOS, the loss on y
// and EOS only. Each task has its own vocabulary
// (PAD 0, BOS 1, EOS 2, then its symbols: position_task_vocab). Batch n of a split is a pure function
// of (seed, split, n), every row drawing from its own counter stream (row_stream, train/data/data.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/name_table.h"
#include "train/data/dataset.h"

namespace relgrad {

enum class PositionTaskKind { SelectiveCopy, Counting, FlipFlop, IndirectIndexing };
inline constexpr NameTable<PositionTaskKind, 4> kPositionTaskNames{{{PositionTaskKind::SelectiveCopy, "selective_copy"},
                                                                    {PositionTaskKind::Counting, "counting"},
                                                                    {PositionTaskKind::FlipFlop, "flip_flop"},
                                                                    {PositionTaskKind::IndirectIndexing,
                                                                     "indirect_indexing"}}};

// Token ids past PAD, BOS, EOS (kFirstSymbol = 3): the first of each group, per task.
inline constexpr int64_t kCopyBlank = kFirstSymbol + 10;       // selective_copy: "_" after the digits
inline constexpr int64_t kCountVariable = kFirstSymbol + 11;   // counting: values 0 … 10, then a …
inline constexpr int64_t kCountMaxValue = 10;                  // the generator's MAX_VAL
inline constexpr int64_t kCountMaxVariables = 5;               // a … e
inline constexpr int64_t kFlipWrite = kFirstSymbol + 2;        // flip_flop: bits 0, 1, then w, r, i
inline constexpr int64_t kIndexQuery = kFirstSymbol + 26;      // indirect_indexing: a … z, then "?"
inline constexpr int64_t kIndexMaxShift = 8;                   // shift tokens −8 … −1, +1 … +8 after "?"

struct PositionTaskConfig {
  PositionTaskKind kind = PositionTaskKind::SelectiveCopy;
  int64_t symbols = 8, blanks = 8;  // selective_copy: digits to copy, blanks among them
  int64_t min_steps = 3, max_steps = 32, variables = 3;  // counting: statements, variables (1 … 5)
  int64_t length = 64;  // flip_flop: tokens (even, >= 4)
  double ignore = 0.8;  // flip_flop: p_i, the probability of i among the middle instructions
  int64_t min_len = 8, max_len = 16, max_shift = 4;  // indirect_indexing: list length, |k| (max_len <= 26)
  int64_t batch_size = 32;
  uint64_t seed = 0;
};

// One row: the whole sequence (x BOS y EOS, or the string scored in place) and the positions t whose
// next token sequence[t + 1] is scored.
struct PositionSample {
  std::vector<int64_t> sequence, scored;
};

// The task's vocabulary (names for printing; size = the model's vocab_size).
Vocab position_task_vocab(PositionTaskKind kind);

// The right answer to `sample` worked out from its tokens alone (the tests' reference, independent of
// how the sample was drawn): the token expected after each scored position. Checks the task's layout.
std::vector<int64_t> position_task_answers(PositionTaskKind kind, const std::vector<int64_t>& sequence,
                                           const std::vector<int64_t>& scored);

class PositionTaskData : public Dataset {
 public:
  explicit PositionTaskData(const PositionTaskConfig& config);  // checks the parameters, naming the key

  Batch batch(int64_t index, Split split) const override;
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return config_.batch_size; }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir,
                     std::ostream& out) const override;
  bool rows_are_examples() const override { return true; }

  PositionSample sample(int64_t index, int64_t row, Split split) const;  // row `row` of batch `index`
  // The longest `tokens` row a batch can hold (the sequence but its last token), from the parameters.
  int64_t max_sequence_length() const;
  const PositionTaskConfig& config() const { return config_; }

 private:
  PositionTaskConfig config_;
  Vocab vocab_;
};

}  // namespace relgrad
