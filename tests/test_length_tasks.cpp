// The length-generalisation tasks (train/data/length_tasks.h): every task's answers, read back from
// the batch tensors, against a brute-force reference written here independently of the library's
// (integer addition, counting, xor folds); the decoder-only layout; batches as pure functions of
// (seed, split, index); lengths within the configured range; errors; the greedy samples printed after
// training (print_greedy_samples, train/data/dataset.h, which every prompt–answer source prints with).
#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "testing.h"
#include "train/data/length_tasks.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;

namespace {

int64_t digit(int64_t id) { return id - kFirstSymbol; }

// The brute-force answer for `input`, from the task's plain definition.
std::vector<int64_t> reference(LengthTaskKind kind, const std::vector<int64_t>& x) {
  const size_t n = x.size();
  std::vector<int64_t> y;
  if (kind == LengthTaskKind::Copy) {
    for (size_t t = 0; t < n; ++t) y.push_back(x[t]);
  } else if (kind == LengthTaskKind::Reverse) {
    for (size_t t = 0; t < n; ++t) y.push_back(x[n - 1 - t]);
  } else if (kind == LengthTaskKind::Sorting) {
    std::map<int64_t, int64_t> count;  // counting sort
    for (int64_t id : x) ++count[id];
    for (const auto& [id, c] : count) y.insert(y.end(), static_cast<size_t>(c), id);
  } else if (kind == LengthTaskKind::Parity) {
    int64_t p = 0;
    for (int64_t id : x) p ^= digit(id);
    y.push_back(kFirstSymbol + p);
  } else {  // addition: a + b as integers (inputs here stay below 62 bits)
    const size_t plus = static_cast<size_t>(std::find(x.begin(), x.end(), kLengthPlus) - x.begin());
    uint64_t a = 0, b = 0;
    for (size_t t = 0; t < plus; ++t) a |= static_cast<uint64_t>(digit(x[t])) << t;
    for (size_t t = plus + 1; t < n; ++t) b |= static_cast<uint64_t>(digit(x[t])) << (t - plus - 1);
    const uint64_t sum = a + b;
    for (size_t t = 0; t <= plus; ++t) y.push_back(kFirstSymbol + static_cast<int64_t>((sum >> t) & 1));
  }
  return y;
}

std::vector<int64_t> row_of(const Tensor& t, int64_t row) {
  return t.narrow(0, row, 1).contiguous().to_vector<int64_t>();
}

}  // namespace

TEST_CASE("length tasks: every task's batches hold x BOS y EOS with y the brute-force answer") {
  for (const std::string& name : length_task_names()) {
    CAPTURE(name);
    LengthTaskConfig c;
    c.kind = length_task_from_string(name);
    c.min_len = 1;
    c.max_len = 24;
    c.batch_size = 16;
    c.seed = 7;
    const LengthTaskData data(c);
    std::map<int64_t, int64_t> lengths_seen;
    int64_t checked = 0;
    for (int64_t index = 0; index < 20; ++index) {
      const Batch b = data.batch(index, index % 2 ? Split::HeldOut : Split::Train);
      REQUIRE(b.decoder_only());
      CHECK(b.tokens.size(1) <= data.max_sequence_length());
      for (int64_t row = 0; row < c.batch_size; ++row) {
        const std::vector<int64_t> tok = row_of(b.tokens, row), tgt = row_of(b.targets, row);
        const size_t bos = static_cast<size_t>(std::find(tok.begin(), tok.end(), kBos) - tok.begin());
        REQUIRE(bos < tok.size());
        const std::vector<int64_t> x(tok.begin(), tok.begin() + static_cast<long>(bos));
        const int64_t n = static_cast<int64_t>(x.size());
        ++lengths_seen[n];
        CHECK(n >= LengthTaskData::effective_length(c.kind, c.min_len));
        CHECK(n <= c.max_len);
        const std::vector<int64_t> y = reference(c.kind, x);
        CHECK(static_cast<int64_t>(y.size()) == LengthTaskData::answer_length(c.kind, n));
        // targets: -100 over the prompt (x[1..], BOS), then y and EOS, then padding (-100)
        for (size_t t = 0; t < bos; ++t) CHECK(tgt[t] == kIgnoreIndex);
        for (size_t t = 0; t < y.size(); ++t) CHECK(tgt[bos + t] == y[t]);
        CHECK(tgt[bos + y.size()] == kEos);
        for (size_t t = bos + y.size() + 1; t < tgt.size(); ++t) CHECK(tgt[t] == kIgnoreIndex);
        // tokens: the answer follows BOS (teacher forcing), then padding
        for (size_t t = 0; t < y.size(); ++t) CHECK(tok[bos + 1 + t] == y[t]);
        for (size_t t = bos + 1 + y.size(); t < tok.size(); ++t) CHECK(tok[t] == kPad);
        ++checked;
      }
    }
    CHECK(checked == 320);
    CHECK(lengths_seen.size() >= 15);  // lengths spread over the range
  }
}

TEST_CASE("length tasks: answers on hand-made inputs") {
  const auto ids = [](const std::string& s) {
    std::vector<int64_t> v;
    for (char ch : s) v.push_back(ch == '+' ? kLengthPlus : kFirstSymbol + (ch - '0'));
    return v;
  };
  CHECK(length_task_answer(LengthTaskKind::Copy, ids("3141")) == ids("3141"));
  CHECK(length_task_answer(LengthTaskKind::Reverse, ids("3141")) == ids("1413"));
  CHECK(length_task_answer(LengthTaskKind::Sorting, ids("3141")) == ids("1134"));
  CHECK(length_task_answer(LengthTaskKind::Parity, ids("1101")) == ids("1"));
  CHECK(length_task_answer(LengthTaskKind::Parity, ids("1001")) == ids("0"));
  // 3 + 1 (LSB first: 11 + 1) = 4 = 001
  CHECK(length_task_answer(LengthTaskKind::Addition, ids("11+1")) == ids("001"));
  // 7 + 7 = 14: 111 + 111 → 0111
  CHECK(length_task_answer(LengthTaskKind::Addition, ids("111+111")) == ids("0111"));
  for (int64_t n = 1; n <= 40; ++n) {
    CHECK(LengthTaskData::answer_length(LengthTaskKind::Addition, n) ==
          (LengthTaskData::effective_length(LengthTaskKind::Addition, n) + 1 - 1) / 2 + 1);  // ⌈(n−1)/2⌉ + 1
  }
}

TEST_CASE("length tasks: a batch is a pure function of (seed, split, index)") {
  LengthTaskConfig c;
  c.kind = LengthTaskKind::Sorting;
  c.max_len = 12;
  c.seed = 3;
  const LengthTaskData a(c), b(c);
  const Batch late = a.batch(9, Split::Train);
  const Batch early = a.batch(2, Split::Train);
  CHECK(relgrad::testing::bitwise_equal(b.batch(9, Split::Train).tokens, late.tokens));
  CHECK(relgrad::testing::bitwise_equal(b.batch(2, Split::Train).targets, early.targets));
  CHECK_FALSE(relgrad::testing::bitwise_equal(a.batch(9, Split::HeldOut).tokens, late.tokens));
  c.seed = 4;
  CHECK_FALSE(relgrad::testing::bitwise_equal(LengthTaskData(c).batch(9, Split::Train).tokens, late.tokens));
  // A bucket of longer lengths only: every row's input length lies in it.
  c.min_len = 17;
  c.max_len = 20;
  const LengthTaskData bucket(c);
  for (int64_t row = 0; row < c.batch_size; ++row) {
    const int64_t n = static_cast<int64_t>(bucket.sample(0, row, Split::HeldOut).input.size());
    CHECK(n >= 17);
    CHECK(n <= 20);
  }
}

TEST_CASE("length tasks: bad names, lengths and inputs are errors") {
  check_throws_with([] { length_task_from_string("multiply"); }, "unknown task 'multiply'");
  LengthTaskConfig c;
  c.min_len = 5;
  c.max_len = 4;
  check_throws_with([&] { LengthTaskData d(c); }, "min_len <= max_len");
  c.min_len = 0;
  check_throws_with([&] { LengthTaskData d(c); }, "min_len <= max_len");
  c.min_len = 1;
  c.max_len = 4;
  c.batch_size = 0;
  check_throws_with([&] { LengthTaskData d(c); }, "batch_size");
  check_throws_with([] { length_task_answer(LengthTaskKind::Parity, {kFirstSymbol + 2}); },
                    "outside the task's symbols");
  check_throws_with(
      [] {
        length_task_answer(LengthTaskKind::Addition, {kFirstSymbol, kFirstSymbol});
      },
      "addition");
}

// The layout the length tasks, addition with hints and the synthetic tasks share (train/data/data.h),
// on hand-made rows of unequal lengths: x BOS y EOS, the prompt's targets -100, PAD and -100 after.
TEST_CASE("length tasks: prompt_answer_batch writes x BOS y EOS with the loss on y and EOS") {
  const int64_t a = kFirstSymbol, b = kFirstSymbol + 1, c = kFirstSymbol + 2, I = kIgnoreIndex;
  const Batch batch = prompt_answer_batch({{a, b}, {c}}, {{c}, {a, b, c}});
  REQUIRE(batch.tokens.size(0) == 2);
  REQUIRE(batch.tokens.size(1) == 5);
  CHECK(row_of(batch.tokens, 0) == std::vector<int64_t>{a, b, kBos, c, kPad});
  CHECK(row_of(batch.tokens, 1) == std::vector<int64_t>{c, kBos, a, b, c});
  CHECK(row_of(batch.targets, 0) == std::vector<int64_t>{I, I, c, kEos, I});
  CHECK(row_of(batch.targets, 1) == std::vector<int64_t>{I, a, b, c, kEos});
  CHECK(row_of(batch.padding_mask.to(kInt64), 0) == std::vector<int64_t>{0, 0, 0, 0, 1});
  CHECK(row_of(batch.padding_mask.to(kInt64), 1) == std::vector<int64_t>{0, 0, 0, 0, 0});
  CHECK(batch.num_targets == 6);
  check_throws_with([] { prompt_answer_batch({{kFirstSymbol}}, {}); }, "1 prompts and 0 answers");
}

namespace {

// A model whose greedy answers are scripted, one per call, recording what each call asked for.
struct ScriptedModel : SampleModel {
  std::vector<std::vector<int64_t>> answers, sources;
  std::vector<int64_t> max_new;
  std::vector<int64_t> answer(const std::vector<int64_t>& source, int64_t max_new_tokens) override {
    sources.push_back(source);
    max_new.push_back(max_new_tokens);
    return answers.at(sources.size() - 1);
  }
  std::vector<int64_t> continue_prompt(const std::vector<int64_t>&, bool) override {
    throw std::logic_error("not a language model");
  }
};

}  // namespace

TEST_CASE("length tasks: print_greedy_samples prints input, target, answer and the exact count") {
  const LengthTaskData data{LengthTaskConfig{}};  // kept: its vocabulary is borrowed below
  const Vocab& vocab = data.vocab();                // digit d at kFirstSymbol + d
  const std::vector<PromptAnswer> examples{{{3, 4}, {4, 3}}, {{5}, {5}}, {{6, 7}, {8}}};
  ScriptedModel model;
  // right with its EOS (dropped), wrong without one, and the wanted answer with a token after it
  model.answers = {{4, 3, kEos}, {6}, {8, 9}};
  std::ostringstream out;
  print_greedy_samples(model, vocab, "things", 3, [&](int64_t row) { return examples.at(row); }, out);
  CHECK(out.str() ==
        "greedy samples on held-out things:\n"
        "  input  0 1\n  target 1 0\n  model  1 0   (exact)\n"
        "  input  2\n  target 2\n  model  3   (differs)\n"
        "  input  3 4\n  target 5\n  model  5 6   (differs)\n"
        "1/3 exact\n");
  CHECK(model.sources == std::vector<std::vector<int64_t>>{{3, 4}, {5}, {6, 7}});
  CHECK(model.max_new == std::vector<int64_t>{3, 2, 2});  // the target and its EOS
}

TEST_CASE("length tasks: the samples after training are the held-out rows, the right answers exact") {
  for (const std::string& name : length_task_names()) {
    CAPTURE(name);
    LengthTaskConfig c;
    c.kind = length_task_from_string(name), c.batch_size = 4;
    const LengthTaskData data(c);
    ScriptedModel model;  // right on even rows, its answer reversed and one token longer on odd ones
    for (int64_t row = 0; row < 4; ++row) {
      std::vector<int64_t> y = reference(c.kind, data.sample(0, row, Split::HeldOut).input);
      if (row % 2) std::reverse(y.begin(), y.end()), y.push_back(kFirstSymbol);
      model.answers.push_back(y);
    }
    std::ostringstream out;
    data.print_samples(model, 10, "", out);  // at most the batch's rows
    std::vector<std::string> lines;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    REQUIRE(lines.size() == 1 + 3 * 4 + 1);
    CHECK(lines.front() == "greedy samples on held-out " + name + " inputs:");
    for (int64_t row = 0; row < 4; ++row) {
      const LengthSample s = data.sample(0, row, Split::HeldOut);
      CHECK(lines[1 + 3 * row] == "  input  " + data.vocab().decode(s.input));
      CHECK(lines[2 + 3 * row] == "  target " + data.vocab().decode(s.answer));
      CHECK(lines[3 + 3 * row].find(row % 2 ? "(differs)" : "(exact)") != std::string::npos);
    }
    CHECK(lines.back() == "2/4 exact");
    CHECK(model.sources.size() == 4);
  }
}
