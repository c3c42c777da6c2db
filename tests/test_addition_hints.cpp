// Decimal addition with index hints (train/data/addition_hints.h): the sums against 128-bit integer
// arithmetic written here, the two layouts token by token on hand-made examples (a carry out of the top
// digit included), batches read back from their tensors (x BOS y EOS, loss on y and EOS only, operand
// lengths and top digits as configured, the markers consecutive from a start that keeps the answer's
// last one below H, every marker used over a few batches), batches as pure functions of (seed, split,
// index), and errors naming the parameter.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "testing.h"
#include "train/data/addition_hints.h"

using namespace relgrad;
using relgrad::testing::bitwise_equal;
using relgrad::testing::check_throws_with;

namespace {

using u128 = unsigned __int128;

// The digits (units first) as an integer.
u128 value_of(const std::vector<int64_t>& digits) {
  u128 v = 0;
  for (size_t k = digits.size(); k-- > 0;) v = v * 10 + static_cast<u128>(digits[k]);
  return v;
}

std::vector<int64_t> row_of(const Tensor& t, int64_t row) { return t.narrow(0, row, 1).contiguous().to_vector<int64_t>(); }

int64_t h(int64_t k) { return kFirstHint + k; }
int64_t d(int64_t v) { return kFirstSymbol + v; }

}  // namespace

TEST_CASE("addition hints: add_reversed equals 128-bit integer addition") {
  Generator g(11);
  for (int n = 0; n < 300; ++n) {
    const int64_t la = 1 + randint(0, 30, {1}, kInt64, &g).item<int64_t>();
    const int64_t lb = 1 + randint(0, 30, {1}, kInt64, &g).item<int64_t>();
    const std::vector<int64_t> a = randint(0, 10, {la}, kInt64, &g).to_vector<int64_t>();
    const std::vector<int64_t> b = randint(0, 10, {lb}, kInt64, &g).to_vector<int64_t>();
    const std::vector<int64_t> sum = add_reversed(a, b);
    CHECK(value_of(sum) == value_of(a) + value_of(b));
    CHECK(sum.size() >= std::max(a.size(), b.size()));
    CHECK(sum.size() <= std::max(a.size(), b.size()) + 1);
    if (sum.size() > std::max(a.size(), b.size())) CHECK(sum.back() == 1);  // only a carry adds a digit
  }
  CHECK(add_reversed({9, 9, 9}, {1}) == std::vector<int64_t>{0, 0, 0, 1});
  check_throws_with([] { add_reversed({1, 10}, {2}); }, "operand a: digit 1 is 10, not 0");
  check_throws_with([] { add_reversed({1}, {}); }, "operand b has no digits");
}

TEST_CASE("addition hints: the two layouts, token by token") {
  // 42 + 39 = 81, units first: a = 2 4, b = 9 3, sum = 1 8; markers from h5.
  AdditionSample s = write_addition(AdditionFormat::Hints, {2, 4}, {9, 3}, 5);
  CHECK(s.input == std::vector<int64_t>{h(5), d(2), h(6), d(4), kAdditionPlus, h(5), d(9), h(6), d(3)});
  CHECK(s.answer == std::vector<int64_t>{h(5), d(1), h(6), d(8)});
  // 95 + 7 = 102: the carry out of the top digit gets the next marker; b is shorter than a.
  s = write_addition(AdditionFormat::Hints, {5, 9}, {7}, 0);
  CHECK(s.input == std::vector<int64_t>{h(0), d(5), h(1), d(9), kAdditionPlus, h(0), d(7)});
  CHECK(s.answer == std::vector<int64_t>{h(0), d(2), h(1), d(0), h(2), d(1)});
  s = write_addition(AdditionFormat::Plain, {5, 9}, {7}, 3);
  CHECK(s.input == std::vector<int64_t>{d(5), d(9), kAdditionPlus, d(7)});
  CHECK(s.answer == std::vector<int64_t>{d(2), d(0), d(1)});
  check_throws_with([] { write_addition(AdditionFormat::Hints, {1}, {2}, -1); }, "hint start must be >= 0");
}

TEST_CASE("addition hints: batches hold x BOS y EOS with y the sum, within the configured digits and markers") {
  for (AdditionFormat format : {AdditionFormat::Hints, AdditionFormat::Plain}) {
    CAPTURE(kAdditionFormatNames.name(format));
    AdditionHintsConfig c;
    c.format = format;
    c.min_digits = 3;
    c.max_digits = 9;
    c.hint_symbols = 14;
    c.batch_size = 16;
    c.seed = 7;
    const AdditionHintsData data(c);
    CHECK(data.vocab().size == kFirstHint + 14);
    CHECK(data.vocab().name(h(13)) == "h13");
    std::set<int64_t> markers, lengths;
    for (int64_t index = 0; index < 12; ++index) {
      const Batch batch = data.batch(index, Split::Train);
      CHECK(batch.tokens.size(1) <= data.max_sequence_length());
      for (int64_t row = 0; row < c.batch_size; ++row) {
        const AdditionSample s = data.sample(index, row, Split::Train);
        for (const auto* x : {&s.a, &s.b}) {
          CHECK(static_cast<int64_t>(x->size()) >= 3);
          CHECK(static_cast<int64_t>(x->size()) <= 9);
          CHECK(x->back() != 0);  // the top digit of a number of several digits
          lengths.insert(static_cast<int64_t>(x->size()));
        }
        CHECK(value_of(s.sum) == value_of(s.a) + value_of(s.b));
        CHECK(s.hint_start >= 0);
        CHECK(s.hint_start + static_cast<int64_t>(s.sum.size()) <= c.hint_symbols);
        CHECK(s.answer == write_addition(format, s.a, s.b, s.hint_start).answer);
        for (int64_t id : s.input)
          if (id >= kFirstHint) markers.insert(id - kFirstHint);
        // The row of the batch: x BOS y EOS shifted by one, the loss on y and EOS only.
        std::vector<int64_t> seq = s.input;
        seq.push_back(kBos);
        seq.insert(seq.end(), s.answer.begin(), s.answer.end());
        seq.push_back(kEos);
        const std::vector<int64_t> tokens = row_of(batch.tokens, row), targets = row_of(batch.targets, row);
        const size_t n = seq.size() - 1;
        CHECK(std::vector<int64_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n)) ==
              std::vector<int64_t>(seq.begin(), seq.end() - 1));
        for (size_t t = 0; t < n; ++t) CHECK(targets[t] == (t + 1 <= s.input.size() ? kIgnoreIndex : seq[t + 1]));
        for (size_t t = n; t < targets.size(); ++t) CHECK(targets[t] == kIgnoreIndex);  // padding
      }
    }
    CHECK(lengths == std::set<int64_t>{3, 4, 5, 6, 7, 8, 9});
    if (format == AdditionFormat::Hints)
      CHECK(markers.size() == 13);  // h0 … h12 before a digit of an operand (h13 only in a 10-digit sum)
    else
      CHECK(markers.empty());
    // A pure function of (seed, split, index); the held-out stream differs.
    CHECK(bitwise_equal(data.batch(3, Split::Train).tokens, data.batch(3, Split::Train).tokens));
    const Tensor train = data.batch(3, Split::Train).tokens, held_out = data.batch(3, Split::HeldOut).tokens;
    const bool same = train.shape() == held_out.shape() && bitwise_equal(train, held_out);
    CHECK_FALSE(same);
  }
}

TEST_CASE("addition hints: the longest sequence and the configuration's errors") {
  AdditionHintsConfig c;
  c.min_digits = c.max_digits = 20;
  c.hint_symbols = 21;
  CHECK(AdditionHintsData(c).max_sequence_length() == 6 * 20 + 4);
  c.format = AdditionFormat::Plain;
  CHECK(AdditionHintsData(c).max_sequence_length() == 3 * 20 + 3);
  c = AdditionHintsConfig();
  c.min_digits = 0;
  check_throws_with([&] { AdditionHintsData x(c); }, "need 1 <= min_digits <= max_digits, got min_digits 0");
  c = AdditionHintsConfig();
  c.hint_symbols = 8;  // max_digits 8 needs 9
  check_throws_with([&] { AdditionHintsData x(c); }, "hint_symbols 8 must be in [max_digits + 1 = 9");
  c = AdditionHintsConfig();
  c.batch_size = 0;
  check_throws_with([&] { AdditionHintsData x(c); }, "batch_size must be >= 1, got 0");
}
