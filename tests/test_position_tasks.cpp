// CoPE's toy tasks and PoPE's indirect indexing (train/data/position_tasks.h): every row of every
// task, read back from the batch tensors as words, against a reference written here from the tasks'
// plain definitions (an interpreter of the counting programs, a flip-flop register, a filter, a list
// look-up) and against position_task_answers; the drawing probabilities (p_i, the blank share, the
// statement weights 1 : 50 : 7); batches as pure functions of (seed, split, index); errors.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "testing.h"
#include "train/data/position_tasks.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;

namespace {

std::vector<int64_t> row_of(const Tensor& t, int64_t row) {
  return t.narrow(0, row, 1).contiguous().to_vector<int64_t>();
}

// Row `row` of a batch as the whole sequence (the tokens, then the last target) and its scored places.
PositionSample sample_of(const Batch& b, int64_t row) {
  std::vector<int64_t> tok = row_of(b.tokens, row), tgt = row_of(b.targets, row);
  const auto end = std::find(tok.begin(), tok.end(), kPad);  // no task puts PAD inside a row
  const size_t n = static_cast<size_t>(end - tok.begin());
  PositionSample s;
  s.sequence.assign(tok.begin(), end);
  s.sequence.push_back(tgt[n - 1]);
  for (size_t t = 0; t < n; ++t)
    if (tgt[t] != kIgnoreIndex) {
      s.scored.push_back(static_cast<int64_t>(t));
      CHECK(tgt[t] == s.sequence[t + 1]);  // a target is the next token
    }
  for (size_t t = n; t < tgt.size(); ++t) CHECK(tgt[t] == kIgnoreIndex);  // padding is never scored
  return s;
}

std::vector<std::string> words(const Vocab& v, const std::vector<int64_t>& ids) {
  std::vector<std::string> w;
  for (int64_t id : ids) w.push_back(v.name(id));
  return w;
}

// The expected words after the scored places, from the words alone.
std::vector<std::string> reference(PositionTaskKind kind, const std::vector<std::string>& w) {
  std::vector<std::string> y;
  if (kind == PositionTaskKind::FlipFlop) {
    std::string written;
    REQUIRE(w.front() == "w");
    REQUIRE(w[w.size() - 2] == "r");
    for (size_t t = 0; t + 1 < w.size(); t += 2) {
      if (w[t] == "w") written = w[t + 1];
      if (w[t] == "r") y.push_back(written);
    }
    return y;
  }
  if (kind == PositionTaskKind::IndirectIndexing) {  // list ? s k answer
    const size_t n = w.size() - 4;
    REQUIRE(w[n] == "?");
    const int k = std::stoi(w[n + 2]);
    const size_t at = static_cast<size_t>(std::find(w.begin(), w.begin() + static_cast<long>(n), w[n + 1]) - w.begin());
    REQUIRE(at < n);
    REQUIRE(static_cast<int>(at) + k >= 0);
    REQUIRE(static_cast<int>(at) + k < static_cast<int>(n));
    return {w[static_cast<size_t>(static_cast<int>(at) + k)]};
  }
  const size_t bos = static_cast<size_t>(std::find(w.begin(), w.end(), "<bos>") - w.begin());
  REQUIRE(bos < w.size());
  const std::vector<std::string> x(w.begin(), w.begin() + static_cast<long>(bos));
  if (kind == PositionTaskKind::SelectiveCopy) {
    for (const std::string& s : x)
      if (s != "_") y.push_back(s);
  } else if (kind == PositionTaskKind::Counting) {
    std::map<std::string, int> value;
    size_t t = 0;
    while (x[t] != "print") {
      if (x[t] == "pass;") {
        t += 1;
      } else if (x[t + 1] == "++;") {
        REQUIRE(value.count(x[t]));
        ++value[x[t]];
        t += 2;
      } else {
        REQUIRE((x[t + 1] == "=" && x[t + 2] == "0" && x[t + 3] == ";"));
        value[x[t]] = 0;
        t += 4;
      }
    }
    REQUIRE(t + 2 == x.size());
    REQUIRE(value.count(x[t + 1]));
    y.push_back(std::to_string(value[x[t + 1]]));
  }
  y.push_back("<eos>");
  return y;
}

PositionTaskConfig config_of(PositionTaskKind kind) {
  PositionTaskConfig c;
  c.kind = kind;
  c.batch_size = 16;
  c.seed = 11;
  return c;
}

}  // namespace

TEST_CASE("position tasks: every row's scored tokens are the reference answers") {
  for (const std::string& name : kPositionTaskNames.names()) {
    CAPTURE(name);
    const PositionTaskKind kind = *kPositionTaskNames.find(name);
    PositionTaskConfig c = config_of(kind);
    c.variables = 3;
    const PositionTaskData data(c);
    int64_t rows = 0;
    for (int64_t index = 0; index < 12; ++index) {
      const Batch b = data.batch(index, index % 2 ? Split::HeldOut : Split::Train);
      REQUIRE(b.decoder_only());
      CHECK(b.tokens.size(1) <= data.max_sequence_length());
      for (int64_t row = 0; row < c.batch_size; ++row, ++rows) {
        const PositionSample s = sample_of(b, row);
        const std::vector<std::string> w = words(data.vocab(), s.sequence);
        std::vector<std::string> scored;
        for (int64_t t : s.scored) scored.push_back(w[static_cast<size_t>(t + 1)]);
        CHECK(scored == reference(kind, w));
        CHECK(words(data.vocab(), position_task_answers(kind, s.sequence, s.scored)) == scored);
        const PositionSample direct = data.sample(index, row, index % 2 ? Split::HeldOut : Split::Train);
        CHECK(direct.sequence == s.sequence);
        CHECK(direct.scored == s.scored);
      }
    }
    CHECK(rows == 12 * 16);
  }
}

TEST_CASE("position tasks: each task's layout and drawing probabilities") {
  SUBCASE("selective copy: the digits' count, their share of the places, the blanks") {
    PositionTaskConfig c = config_of(PositionTaskKind::SelectiveCopy);
    c.symbols = 5, c.blanks = 15;
    const PositionTaskData data(c);
    std::vector<int64_t> digit_at(20, 0);
    for (int64_t index = 0; index < 50; ++index)
      for (int64_t row = 0; row < c.batch_size; ++row) {
        const PositionSample s = data.sample(index, row, Split::Train);
        REQUIRE(s.sequence.size() == 20 + 1 + 5 + 1);
        int64_t digits = 0;
        for (size_t t = 0; t < 20; ++t)
          if (s.sequence[t] != kCopyBlank) ++digits, ++digit_at[t];
        CHECK(digits == 5);
      }
    for (int64_t n : digit_at) CHECK(std::abs(static_cast<double>(n) / 800 - 0.25) < 0.07);  // every place alike
  }
  SUBCASE("counting: program lengths, the statement weights, values at most 10") {
    PositionTaskConfig c = config_of(PositionTaskKind::Counting);
    c.min_steps = 20, c.max_steps = 40, c.variables = 2;
    const PositionTaskData data(c);
    const Vocab v = data.vocab();
    std::map<std::string, int64_t> statements;
    std::set<std::string> printed;
    for (int64_t index = 0; index < 40; ++index)
      for (int64_t row = 0; row < c.batch_size; ++row) {
        const std::vector<std::string> w = words(v, data.sample(index, row, Split::Train).sequence);
        int64_t steps = 0;
        bool any_set = false;  // before the first "v = 0 ;" an increment cannot be made, so is drawn again
        for (size_t t = 0; w[t] != "print"; ++steps) {
          const std::string kind = w[t] == "pass;" ? "pass" : w[t + 1] == "++;" ? "increment" : "set";
          CHECK((any_set || kind != "increment"));
          if (any_set) ++statements[kind];
          any_set = any_set || kind == "set";
          t += kind == "pass" ? 1 : kind == "increment" ? 2 : 4;
        }
        CHECK(steps >= 20);
        CHECK(steps <= 40);
        const std::string answer = w[w.size() - 2];
        CHECK(std::stoi(answer) <= 10);
        printed.insert(w[w.size() - 4]);
      }
    // After the first assignment every statement can be made (values stay far below 10 here): the weights.
    const double all = static_cast<double>(statements["pass"] + statements["increment"] + statements["set"]);
    CHECK(std::abs(statements["pass"] / all - 50.0 / 58) < 0.015);
    CHECK(std::abs(statements["increment"] / all - 7.0 / 58) < 0.015);
    CHECK(std::abs(statements["set"] / all - 1.0 / 58) < 0.006);
    CHECK(printed == std::set<std::string>{"a", "b"});  // two variables, both asked about
  }
  SUBCASE("flip-flop: p_i among the middle instructions, the first a write, the last a read") {
    for (double ignore : {0.8, 0.98, 0.1}) {
      CAPTURE(ignore);
      PositionTaskConfig c = config_of(PositionTaskKind::FlipFlop);
      c.length = 40, c.ignore = ignore;
      const PositionTaskData data(c);
      const Vocab v = data.vocab();
      int64_t middle = 0, ignores = 0, writes = 0;
      for (int64_t index = 0; index < 30; ++index)
        for (int64_t row = 0; row < c.batch_size; ++row) {
          const std::vector<std::string> w = words(v, data.sample(index, row, Split::Train).sequence);
          REQUIRE(w.size() == 40);
          CHECK(w.front() == "w");
          CHECK(w[38] == "r");
          for (size_t t = 2; t < 38; t += 2, ++middle) {
            ignores += w[t] == "i";
            writes += w[t] == "w";
          }
        }
      CHECK(std::abs(static_cast<double>(ignores) / middle - ignore) < 0.02);
      CHECK(std::abs(static_cast<double>(writes) / middle - (1 - ignore) / 2) < 0.02);
    }
  }
  SUBCASE("indirect indexing: distinct letters, every length and shift drawn") {
    PositionTaskConfig c = config_of(PositionTaskKind::IndirectIndexing);
    c.min_len = 5, c.max_len = 9, c.max_shift = 4;
    const PositionTaskData data(c);
    const Vocab v = data.vocab();
    std::set<size_t> lengths;
    std::set<std::string> shifts;
    for (int64_t index = 0; index < 20; ++index)
      for (int64_t row = 0; row < c.batch_size; ++row) {
        const std::vector<std::string> w = words(v, data.sample(index, row, Split::Train).sequence);
        const size_t n = w.size() - 4;
        lengths.insert(n);
        shifts.insert(w[n + 2]);
        CHECK(std::set<std::string>(w.begin(), w.begin() + static_cast<long>(n)).size() == n);
      }
    CHECK(lengths == std::set<size_t>{5, 6, 7, 8, 9});
    CHECK(shifts == std::set<std::string>{"-4", "-3", "-2", "-1", "+1", "+2", "+3", "+4"});
  }
}

TEST_CASE("position tasks: batches are pure functions of (seed, split, index)") {
  for (const std::string& name : kPositionTaskNames.names()) {
    CAPTURE(name);
    PositionTaskConfig c = config_of(*kPositionTaskNames.find(name));
    const PositionTaskData data(c);
    const auto same = [](const Batch& a, const Batch& b) {
      return a.tokens.shape() == b.tokens.shape() && a.tokens.to_vector<int64_t>() == b.tokens.to_vector<int64_t>() &&
             a.targets.to_vector<int64_t>() == b.targets.to_vector<int64_t>();
    };
    CHECK(same(data.batch(3, Split::Train), data.batch(3, Split::Train)));
    CHECK_FALSE(same(data.batch(3, Split::Train), data.batch(3, Split::HeldOut)));
    CHECK_FALSE(same(data.batch(3, Split::Train), data.batch(4, Split::Train)));
    c.seed = 12;
    CHECK_FALSE(same(data.batch(3, Split::Train), PositionTaskData(c).batch(3, Split::Train)));
  }
}

TEST_CASE("position tasks: bad parameters and malformed sequences are errors naming them") {
  PositionTaskConfig c = config_of(PositionTaskKind::SelectiveCopy);
  c.symbols = 0;
  check_throws_with([&] { PositionTaskData{c}; }, "selective_copy: need symbols >= 1, blanks >= 0");
  c = config_of(PositionTaskKind::Counting);
  c.variables = 6;
  check_throws_with([&] { PositionTaskData{c}; }, "counting: variables must be in 1 … 5, got 6");
  c.variables = 1, c.min_steps = 9, c.max_steps = 8;
  check_throws_with([&] { PositionTaskData{c}; }, "need 1 <= min_steps <= max_steps");
  c = config_of(PositionTaskKind::FlipFlop);
  c.length = 7;
  check_throws_with([&] { PositionTaskData{c}; }, "flip_flop: length must be even and in 4 … 100000, got 7");
  c.length = 8, c.ignore = 1.5;
  check_throws_with([&] { PositionTaskData{c}; }, "flip_flop: ignore must be a probability, got 1.5");
  c = config_of(PositionTaskKind::IndirectIndexing);
  c.min_len = 4, c.max_shift = 4;
  check_throws_with([&] { PositionTaskData{c}; }, "need max_shift < min_len <= max_len <= 26, got min_len 4");
  c.max_shift = 9;
  check_throws_with([&] { PositionTaskData{c}; }, "indirect_indexing: max_shift must be in 1 … 8, got 9");
  c = config_of(PositionTaskKind::FlipFlop);
  check_throws_with([&] { PositionTaskData(c).batch(-1, Split::Train); }, "batch index must be >= 0, got -1");

  // The reference answers check the layout: a read before any write, scored places that are not the reads,
  // an increment of a variable never set, a source letter missing from the list.
  const int64_t w = kFlipWrite, r = kFlipWrite + 1, zero = kFirstSymbol;
  check_throws_with([&] { position_task_answers(PositionTaskKind::FlipFlop, {r, zero, r, zero}, {0, 2}); },
                    "a read at 0 before any write");
  check_throws_with([&] { position_task_answers(PositionTaskKind::FlipFlop, {w, zero, r, zero}, {0}); },
                    "the scored places must be the reads");
  const int64_t a = kCountVariable, inc = kCountVariable + kCountMaxVariables + 3,
                print = kCountVariable + kCountMaxVariables + 4;
  check_throws_with(
      [&] { position_task_answers(PositionTaskKind::Counting, {a, inc, print, a, kBos, zero, kEos}, {4, 5}); },
      "counting: unexpected token");
  const int64_t b = kFirstSymbol + 1, cc = kFirstSymbol + 2, plus1 = kIndexQuery + 1 + kIndexMaxShift;
  check_throws_with([&] {
    position_task_answers(PositionTaskKind::IndirectIndexing, {a, b, kIndexQuery, cc, plus1, b}, {4});
  },
                    "the source letter is not in the list");
  check_throws_with([&] {
    position_task_answers(PositionTaskKind::IndirectIndexing, {a, b, kIndexQuery, a, plus1, b}, {3});
  },
                    "indirect_indexing: the scored place must be the shift");
}
