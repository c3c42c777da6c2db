// Algorithmic tasks for length generalisation (train/instruments/length_bench.h): train on short
// inputs, test on longer ones. The task definitions follow Delétang et al. 2023 ("Neural Networks and
// the Chomsky Hierarchy": reverse_string, binary_addition, bucket_sort, parity_check) and Kazemnejad et
// al. 2023 (copy, reverse, addition, sorting, in a decoder-only layout). For an input x of length n:
//   copy      y = x                       (symbols 0 … 9)
//   reverse   y[t] = x[n − 1 − t]         (symbols 0 … 9)
//   sorting   y = x sorted ascending      (symbols 0 … 9)
//   parity    y = (number of 1s in x) mod 2, one token   (x over {0, 1})
//   addition  x = a + b, a of ⌈(n − 1)/2⌉ bits, b of ⌊(n − 1)/2⌋ bits, both least significant bit
//             first (a top bit may be 0); y = a + b in len(a) + 1 bits, least significant first. The
//             fixed answer length (the carry bit always written) keeps the answer's end predictable.
//             n >= 3 (a smaller length is drawn as 3).
// The decoder-only layout of the synthetic tasks (prompt_answer_batch, train/data/data.h): x BOS y EOS, BOS as
// the separator; tokens = all but the last, targets = all but the first with the prompt's targets
// -100, so the loss is on y and EOS only. Token ids as there: PAD 0, BOS 1, EOS 2, the digits "0" …
// "9" at 3 … 12, "+" at 13 (one vocabulary for every task, size 14).
//
// Batch n of a split is a pure function of (seed, split, n): every row draws its length n uniform in
// [min_len, max_len] and its symbols from its own counter stream (row_stream, train/data/data.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/data/dataset.h"

namespace relgrad {

enum class LengthTaskKind { Copy, Reverse, Sorting, Parity, Addition };
const char* to_string(LengthTaskKind kind);
LengthTaskKind length_task_from_string(const std::string& name);  // error lists the valid names
const std::vector<std::string>& length_task_names();              // copy, reverse, addition, sorting, parity

inline constexpr int64_t kLengthPlus = kFirstSymbol + 10;  // "+" (addition)
inline constexpr int64_t kLengthVocabSize = kLengthPlus + 1;

struct LengthTaskConfig {
  LengthTaskKind kind = LengthTaskKind::Copy;
  int64_t min_len = 1;  // input length n, uniform in [min_len, max_len] per row
  int64_t max_len = 8;
  int64_t batch_size = 32;
  uint64_t seed = 0;
};

// One input and its answer (no BOS / EOS), ids as above.
struct LengthSample {
  std::vector<int64_t> input, answer;
};

// The answer to `input` under `kind` (checked: symbols of the task's alphabet, addition's layout).
std::vector<int64_t> length_task_answer(LengthTaskKind kind, const std::vector<int64_t>& input);

class LengthTaskData : public Dataset {
 public:
  explicit LengthTaskData(const LengthTaskConfig& config);  // checks the parameters

  Batch batch(int64_t index, Split split) const override;
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return config_.batch_size; }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir,
                     std::ostream& out) const override;

  // Row `row` of batch `index` of `split`.
  LengthSample sample(int64_t index, int64_t row, Split split) const;
  const LengthTaskConfig& config() const { return config_; }
  // The longest decoder-only sequence (tokens) a batch can hold: max_len + 1 + the longest answer.
  int64_t max_sequence_length() const;
  // The answer length for input length n (the answer of parity is 1 token, of addition ⌈(n−1)/2⌉ + 1).
  static int64_t answer_length(LengthTaskKind kind, int64_t n);
  // The input length a row of length n really gets (addition: at least 3).
  static int64_t effective_length(LengthTaskKind kind, int64_t n);

 private:
  LengthTaskConfig config_;
  Vocab vocab_;
};

}  // namespace relgrad
