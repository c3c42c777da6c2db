// Decimal addition, reversed, with or without index hints (train/data/addition_hints.h).
#include "train/data/addition_hints.h"

#include <algorithm>
#include <ostream>

#include "core/base/error.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "addition_hints";

void check_digits(const std::vector<int64_t>& x, const char* name) {
  RG_CHECK(!x.empty(), kOp, "operand ", name, " has no digits");
  for (size_t k = 0; k < x.size(); ++k)
    RG_CHECK(x[k] >= 0 && x[k] <= 9, kOp, "operand ", name, ": digit ", k, " is ", x[k], ", not 0 … 9");
}

// Uniform digits, units first; the top digit nonzero unless there is only one.
std::vector<int64_t> draw_number(CounterStream& rng, int64_t digits) {
  std::vector<int64_t> x(static_cast<size_t>(digits));
  for (int64_t k = 0; k < digits; ++k) x[k] = k + 1 == digits && digits > 1 ? 1 + rng.below(9) : rng.below(10);
  return x;
}

}  // namespace

std::vector<int64_t> add_reversed(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  check_digits(a, "a");
  check_digits(b, "b");
  std::vector<int64_t> sum;
  int64_t carry = 0;
  for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
    const int64_t s = (k < a.size() ? a[k] : 0) + (k < b.size() ? b[k] : 0) + carry;
    sum.push_back(s % 10);
    carry = s / 10;
  }
  if (carry) sum.push_back(carry);
  return sum;
}

AdditionSample write_addition(AdditionFormat format, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                              int64_t hint_start) {
  RG_CHECK(hint_start >= 0, kOp, "hint start must be >= 0, got ", hint_start);
  AdditionSample s;
  s.a = a;
  s.b = b;
  s.sum = add_reversed(a, b);
  s.hint_start = hint_start;
  auto write = [&](const std::vector<int64_t>& digits, std::vector<int64_t>& out) {
    for (size_t k = 0; k < digits.size(); ++k) {
      if (format == AdditionFormat::Hints) out.push_back(kFirstHint + hint_start + static_cast<int64_t>(k));
      out.push_back(kFirstSymbol + digits[k]);
    }
  };
  write(a, s.input);
  s.input.push_back(kAdditionPlus);
  write(b, s.input);
  write(s.sum, s.answer);
  return s;
}

AdditionHintsData::AdditionHintsData(const AdditionHintsConfig& c) : config_(c) {
  RG_CHECK(c.min_digits >= 1 && c.max_digits >= c.min_digits, kOp,
           "need 1 <= min_digits <= max_digits, got min_digits ", c.min_digits, ", max_digits ", c.max_digits);
  RG_CHECK(c.max_digits <= 10000, kOp, "max_digits ", c.max_digits, " is beyond 10000");
  RG_CHECK(c.hint_symbols >= c.max_digits + 1 && c.hint_symbols <= 10000, kOp, "hint_symbols ", c.hint_symbols,
           " must be in [max_digits + 1 = ", c.max_digits + 1, ", 10000] (a marker for every digit of the sum)");
  RG_CHECK(c.batch_size >= 1, kOp, "batch_size must be >= 1, got ", c.batch_size);
  vocab_.names = {"<pad>", "<bos>", "<eos>"};
  for (int d = 0; d < 10; ++d) vocab_.names.push_back(std::to_string(d));
  vocab_.names.push_back("+");
  for (int64_t k = 0; k < c.hint_symbols; ++k) vocab_.names.push_back("h" + std::to_string(k));
  vocab_.size = static_cast<int64_t>(vocab_.names.size());
}

int64_t AdditionHintsData::max_sequence_length() const {
  const int64_t n = config_.max_digits, per_digit = config_.format == AdditionFormat::Hints ? 2 : 1;
  return per_digit * (n + n + (n + 1)) + 2;  // a "+" b BOS y EOS, minus the last token
}

AdditionSample AdditionHintsData::sample(int64_t index, int64_t row, Split split) const {
  RG_CHECK(index >= 0 && row >= 0 && row < config_.batch_size, kOp, "sample(", index, ", ", row,
           ") outside batches of ", config_.batch_size, " rows");
  CounterStream rng = row_stream(config_.seed, split, index, static_cast<uint32_t>(row));
  const int64_t la = rng.between(config_.min_digits, config_.max_digits);
  const int64_t lb = rng.between(config_.min_digits, config_.max_digits);
  const std::vector<int64_t> a = draw_number(rng, la), b = draw_number(rng, lb);
  const int64_t start = rng.between(0, config_.hint_symbols - 1 - std::max(la, lb));
  return write_addition(config_.format, a, b, start);
}

Batch AdditionHintsData::batch(int64_t index, Split split) const {
  RG_CHECK(index >= 0, kOp, "batch index must be >= 0, got ", index);
  return prompt_answer_rows(config_.batch_size, [&](int64_t row) {  // x BOS y EOS, the loss on y and EOS
    AdditionSample s = sample(index, row, split);
    return PromptAnswer{std::move(s.input), std::move(s.answer)};
  });
}

void AdditionHintsData::print_samples(SampleModel& model, int64_t count, const std::string&,
                                      std::ostream& out) const {
  const std::string what = std::string("additions (") + kAdditionFormatNames.name(config_.format) + ")";
  print_greedy_samples(model, vocab_, what, std::min(count, config_.batch_size), [&](int64_t row) {
    AdditionSample s = sample(0, row, Split::HeldOut);
    return PromptAnswer{std::move(s.input), std::move(s.answer)};
  }, out);
}

}  // namespace relgrad
