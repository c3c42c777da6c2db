// Decimal addition in the reversed format with index hints, after Zhou et al. 2024 ("Transformers Can
// Achieve Length Generalization But Not Robustly", arXiv 2402.09371): a + b with both operands and the
// sum written least significant digit first, and (the hints format) every digit preceded by a marker
// token naming its significance, the same marker for the digits of equal significance in a, b and the
// answer, so that attention can find the digits to add by content instead of by counting.
//
// For operands a, b of la, lb digits (each uniform in [min_digits, max_digits], drawn independently; a
// top digit is nonzero unless the operand has one digit) and the sum c = a + b of lc digits (max(la, lb)
// or one more when the last carry is 1), with digit k of x written x_k (k = 0 the units):
//   hints   x = h(s) a_0 h(s+1) a_1 … h(s+la−1) a_{la−1} + h(s) b_0 … h(s+lb−1) b_{lb−1}
//           y = h(s) c_0 h(s+1) c_1 … h(s+lc−1) c_{lc−1}
//   plain   x = a_0 a_1 … a_{la−1} + b_0 … b_{lb−1}        y = c_0 c_1 … c_{lc−1}
// h(0) … h(H − 1) are H = hint_symbols marker tokens in a fixed order, and each row starts its run of
// markers at its own s, uniform in [0, H − 1 − max(la, lb)] (the answer's last marker is then at most
// h(H − 1)), so that every marker is trained in every role, not only the first few at the first
// digits (docs/addition.md says which published code samples markers this way).
//
// The decoder-only layout of the length tasks (prompt_answer_batch, train/data/data.h): x BOS y EOS, BOS as
// "=", the loss on y and EOS only (x's targets −100). Token ids: PAD 0, BOS 1, EOS 2, digits "0" … "9" at
// 3 … 12, "+" at 13, the markers h(k) at 14 + k (named "h0", "h1", …); one vocabulary for both formats,
// so a model's size does not depend on the format. Batch n of a split is a pure function of (seed,
// split, n), each row from its own counter stream (row_stream, train/data/data.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/name_table.h"
#include "train/data/dataset.h"

namespace relgrad {

enum class AdditionFormat { Hints, Plain };
inline constexpr NameTable<AdditionFormat, 2> kAdditionFormatNames{
    {{AdditionFormat::Hints, "hints"}, {AdditionFormat::Plain, "plain"}}};

inline constexpr int64_t kAdditionPlus = kFirstSymbol + 10;  // "+"
inline constexpr int64_t kFirstHint = kAdditionPlus + 1;     // h(0)

struct AdditionHintsConfig {
  AdditionFormat format = AdditionFormat::Hints;
  int64_t min_digits = 1;  // each operand's digits, uniform in [min_digits, max_digits]
  int64_t max_digits = 8;
  int64_t hint_symbols = 32;  // H >= max_digits + 1 (the answer's digits at most)
  int64_t batch_size = 32;
  uint64_t seed = 0;
};

// One row: the operands' digits (least significant first, values 0 … 9) and the tokens it is written as.
struct AdditionSample {
  std::vector<int64_t> a, b, sum;     // digits, units first
  int64_t hint_start = 0;             // s
  std::vector<int64_t> input, answer;  // token ids of x and y (no BOS / EOS)
};

// The digits of a + b, units first (a, b: digits 0 … 9, units first; checked).
std::vector<int64_t> add_reversed(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// The tokens of x and y for operands a, b (digits, units first), their sum and marker start s.
AdditionSample write_addition(AdditionFormat format, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                              int64_t hint_start);

class AdditionHintsData : public Dataset {
 public:
  explicit AdditionHintsData(const AdditionHintsConfig& config);  // checks the parameters, naming them

  Batch batch(int64_t index, Split split) const override;
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return config_.batch_size; }
  bool rows_are_examples() const override { return true; }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir,
                     std::ostream& out) const override;

  AdditionSample sample(int64_t index, int64_t row, Split split) const;  // row `row` of batch `index`
  const AdditionHintsConfig& config() const { return config_; }
  // The longest decoder-only sequence (tokens) a batch can hold: x BOS y EOS minus the last token.
  int64_t max_sequence_length() const;
  static int64_t vocab_size(int64_t hint_symbols) { return kFirstHint + hint_symbols; }

 private:
  AdditionHintsConfig config_;
  Vocab vocab_;
};

}  // namespace relgrad
