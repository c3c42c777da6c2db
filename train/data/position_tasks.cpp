// CoPE's toy tasks and PoPE's indirect indexing (train/data/position_tasks.h).
#include "train/data/position_tasks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <ostream>

#include "core/base/error.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "position_tasks";

// counting's tokens after the variables a … e (the CoPE authors' words: "=", ";", "pass;", "++;", "print").
constexpr int64_t kCountEquals = kCountVariable + kCountMaxVariables;
constexpr int64_t kCountSemicolon = kCountEquals + 1;
constexpr int64_t kCountPass = kCountEquals + 2;
constexpr int64_t kCountIncrement = kCountEquals + 3;
constexpr int64_t kCountPrint = kCountEquals + 4;
// The generator's weights of "v = 0 ;", "pass;" and "v ++;" (OP_WEIGHTS: SET 1, DUMMY 50, INCREMENT 7).
constexpr int64_t kSetWeight = 1, kPassWeight = 50, kIncrementWeight = 7;
constexpr int kStatementTries = 100, kProgramTries = 1000;  // the generator's retry limits

constexpr int64_t kFlipRead = kFlipWrite + 1, kFlipIgnore = kFlipWrite + 2;
constexpr int64_t kProbabilityScale = 1000000;  // flip_flop draws p_i at this resolution

int64_t shift_token(int64_t k) { return kIndexQuery + 1 + (k < 0 ? k + kIndexMaxShift : k + kIndexMaxShift - 1); }
int64_t shift_of(int64_t token) {
  const int64_t i = token - kIndexQuery - 1;
  return i < kIndexMaxShift ? i - kIndexMaxShift : i - kIndexMaxShift + 1;
}

// The x BOS y EOS layout: the sequence and its scored places (BOS through y's last token).
PositionSample prompt_answer(std::vector<int64_t> x, const std::vector<int64_t>& y) {
  PositionSample s;
  const int64_t n = static_cast<int64_t>(x.size());
  s.sequence = std::move(x);
  s.sequence.push_back(kBos);
  s.sequence.insert(s.sequence.end(), y.begin(), y.end());
  s.sequence.push_back(kEos);
  for (int64_t t = n; t <= n + static_cast<int64_t>(y.size()); ++t) s.scored.push_back(t);
  return s;
}

// The first `count` entries of a uniformly shuffled 0 … n − 1 (a partial Fisher–Yates shuffle).
std::vector<int64_t> draw_distinct(CounterStream& rng, int64_t n, int64_t count) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  for (int64_t i = 0; i < count; ++i)
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(i + rng.below(n - i))]);
  v.resize(static_cast<size_t>(count));
  return v;
}

PositionSample selective_copy(const PositionTaskConfig& c, CounterStream& rng) {
  const int64_t n = c.symbols + c.blanks;
  std::vector<int64_t> x(static_cast<size_t>(n), kCopyBlank), y;
  std::vector<int64_t> places = draw_distinct(rng, n, c.symbols);
  std::sort(places.begin(), places.end());
  for (int64_t p : places) x[static_cast<size_t>(p)] = kFirstSymbol + rng.below(10);
  for (int64_t id : x)
    if (id != kCopyBlank) y.push_back(id);
  return prompt_answer(std::move(x), y);
}

// One statement of the counting program, or false when the drawn one cannot be made (an increment
// with no variable set, or past kCountMaxValue), as the generator's generate_op raises GenerationFail.
bool counting_statement(const PositionTaskConfig& c, CounterStream& rng, std::array<int64_t, kCountMaxVariables>& value,
                        std::vector<int64_t>& set, std::vector<int64_t>& x) {
  const int64_t r = rng.below(kSetWeight + kPassWeight + kIncrementWeight);
  if (r < kSetWeight) {
    const int64_t v = rng.below(c.variables);
    if (std::find(set.begin(), set.end(), v) == set.end()) set.push_back(v);
    value[static_cast<size_t>(v)] = 0;
    x.insert(x.end(), {kCountVariable + v, kCountEquals, kFirstSymbol, kCountSemicolon});
    return true;
  }
  if (r < kSetWeight + kPassWeight) {
    x.push_back(kCountPass);
    return true;
  }
  if (set.empty()) return false;
  const int64_t v = set[static_cast<size_t>(rng.below(static_cast<int64_t>(set.size())))];
  if (value[static_cast<size_t>(v)] + 1 > kCountMaxValue) return false;
  ++value[static_cast<size_t>(v)];
  x.insert(x.end(), {kCountVariable + v, kCountIncrement});
  return true;
}

PositionSample counting(const PositionTaskConfig& c, CounterStream& rng) {
  for (int program = 0; program < kProgramTries; ++program) {
    const int64_t steps = rng.between(c.min_steps, c.max_steps);
    std::array<int64_t, kCountMaxVariables> value{};
    std::vector<int64_t> set, x;  // set: the variables assigned so far, in order of first assignment
    for (int64_t s = 0; s < steps; ++s) {
      int tries = 0;
      while (!counting_statement(c, rng, value, set, x))
        RG_CHECK(++tries < kStatementTries, kOp, "counting: no statement could be made in ", kStatementTries, " draws");
    }
    if (set.empty()) continue;  // nothing to print: the generator draws the whole program again
    const int64_t v = set[static_cast<size_t>(rng.below(static_cast<int64_t>(set.size())))];
    x.insert(x.end(), {kCountPrint, kCountVariable + v});
    return prompt_answer(std::move(x), {kFirstSymbol + value[static_cast<size_t>(v)]});
  }
  RG_CHECK(false, kOp, "counting: no program with a variable set in ", kProgramTries, " draws (max_steps ",
           c.max_steps, ")");
  return {};
}

PositionSample flip_flop(const PositionTaskConfig& c, CounterStream& rng) {
  PositionSample s;
  const int64_t pairs = c.length / 2;
  const int64_t ignore = std::llround(c.ignore * kProbabilityScale);
  int64_t written = 0;
  for (int64_t p = 0; p < pairs; ++p) {
    int64_t op = kFlipIgnore;
    if (p == 0)
      op = kFlipWrite;
    else if (p == pairs - 1)
      op = kFlipRead;
    else if (rng.below(kProbabilityScale) >= ignore)
      op = rng.below(2) == 0 ? kFlipWrite : kFlipRead;
    const int64_t bit = op == kFlipRead ? written : rng.below(2);
    if (op == kFlipWrite) written = bit;
    if (op == kFlipRead) s.scored.push_back(static_cast<int64_t>(s.sequence.size()));
    s.sequence.insert(s.sequence.end(), {op, kFirstSymbol + bit});
  }
  return s;
}

PositionSample indirect_indexing(const PositionTaskConfig& c, CounterStream& rng) {
  const int64_t n = rng.between(c.min_len, c.max_len);
  const std::vector<int64_t> letters = draw_distinct(rng, 26, n);
  const int64_t m = rng.between(1, c.max_shift);
  const int64_t k = rng.below(2) == 0 ? -m : m;
  const int64_t p = k > 0 ? rng.between(0, n - 1 - k) : rng.between(-k, n - 1);
  PositionSample s;
  for (int64_t l : letters) s.sequence.push_back(kFirstSymbol + l);
  s.sequence.insert(s.sequence.end(), {kIndexQuery, kFirstSymbol + letters[static_cast<size_t>(p)], shift_token(k),
                                       kFirstSymbol + letters[static_cast<size_t>(p + k)]});
  s.scored.push_back(n + 2);  // the shift k: the letter comes next
  return s;
}

// ---- the reference answers, from the tokens alone -------------------------------------------------

// The prompt of an x BOS y EOS sequence (checked: scored is BOS … the token before EOS).
std::vector<int64_t> prompt_of(PositionTaskKind kind, const std::vector<int64_t>& seq,
                               const std::vector<int64_t>& scored) {
  const auto bos = std::find(seq.begin(), seq.end(), kBos);
  RG_CHECK(bos != seq.end() && seq.back() == kEos, kOp, kPositionTaskNames.name(kind),
           ": a sequence must be x BOS y EOS");
  const int64_t n = bos - seq.begin(), len = static_cast<int64_t>(seq.size());
  RG_CHECK(static_cast<int64_t>(scored.size()) == len - 1 - n && scored.front() == n && scored.back() == len - 2,
           kOp, kPositionTaskNames.name(kind), ": the scored places must be BOS … the token before EOS");
  return std::vector<int64_t>(seq.begin(), bos);
}

void check_token(bool ok, PositionTaskKind kind, int64_t t, int64_t id) {
  RG_CHECK(ok, kOp, kPositionTaskNames.name(kind), ": unexpected token ", id, " at ", t);
}

}  // namespace

Vocab position_task_vocab(PositionTaskKind kind) {
  Vocab v;
  v.names = {"<pad>", "<bos>", "<eos>"};
  const auto add = [&](const std::string& name) { v.names.push_back(name); };
  switch (kind) {
    case PositionTaskKind::SelectiveCopy:
      for (int d = 0; d < 10; ++d) add(std::to_string(d));
      add("_");
      break;
    case PositionTaskKind::Counting:
      for (int d = 0; d <= kCountMaxValue; ++d) add(std::to_string(d));
      for (int64_t i = 0; i < kCountMaxVariables; ++i) add(std::string(1, static_cast<char>('a' + i)));
      for (const char* w : {"=", ";", "pass;", "++;", "print"}) add(w);
      break;
    case PositionTaskKind::FlipFlop:
      for (const char* w : {"0", "1", "w", "r", "i"}) add(w);
      break;
    case PositionTaskKind::IndirectIndexing:
      for (int i = 0; i < 26; ++i) add(std::string(1, static_cast<char>('a' + i)));
      add("?");
      for (int64_t k = -kIndexMaxShift; k <= kIndexMaxShift; ++k)
        if (k != 0) add((k > 0 ? "+" : "") + std::to_string(k));
      break;
  }
  v.size = static_cast<int64_t>(v.names.size());
  return v;
}

std::vector<int64_t> position_task_answers(PositionTaskKind kind, const std::vector<int64_t>& seq,
                                           const std::vector<int64_t>& scored) {
  const int64_t top = position_task_vocab(kind).size;
  for (size_t t = 0; t < seq.size(); ++t)
    check_token(seq[t] > kPad && seq[t] < top, kind, static_cast<int64_t>(t), seq[t]);
  RG_CHECK(!scored.empty(), kOp, kPositionTaskNames.name(kind), ": nothing is scored");
  std::vector<int64_t> answers;
  if (kind == PositionTaskKind::FlipFlop) {
    RG_CHECK(seq.size() % 2 == 0, kOp, "flip_flop: odd length ", seq.size());
    int64_t written = -1;
    std::vector<int64_t> reads;
    for (size_t t = 0; t < seq.size(); t += 2) {
      const bool instruction = seq[t] >= kFlipWrite && seq[t] <= kFlipIgnore, bit = seq[t + 1] < kFlipWrite;
      check_token(instruction && bit && seq[t + 1] >= kFirstSymbol, kind, static_cast<int64_t>(t), seq[t]);
      if (seq[t] == kFlipWrite) written = seq[t + 1];
      if (seq[t] == kFlipRead) {
        RG_CHECK(written >= 0, kOp, "flip_flop: a read at ", t, " before any write");
        reads.push_back(static_cast<int64_t>(t));
        answers.push_back(written);
      }
    }
    RG_CHECK(reads == scored, kOp, "flip_flop: the scored places must be the reads");
    return answers;
  }
  if (kind == PositionTaskKind::IndirectIndexing) {  // list ? s k answer
    const auto query = std::find(seq.begin(), seq.end(), kIndexQuery);
    const int64_t n = query - seq.begin();
    check_token(seq.end() - query == 4 && seq[static_cast<size_t>(n + 2)] > kIndexQuery, kind, n,
                query != seq.end() ? *query : -1);
    RG_CHECK(scored == std::vector<int64_t>{n + 2}, kOp, "indirect_indexing: the scored place must be the shift");
    const std::vector<int64_t> list(seq.begin(), query);
    const auto source = std::find(list.begin(), list.end(), seq[static_cast<size_t>(n + 1)]);
    const int64_t at = (source - list.begin()) + shift_of(seq[static_cast<size_t>(n + 2)]);
    RG_CHECK(source != list.end() && at >= 0 && at < n, kOp,
             "indirect_indexing: the source letter is not in the list, or the shift leaves it");
    return {list[static_cast<size_t>(at)]};
  }
  const std::vector<int64_t> x = prompt_of(kind, seq, scored);
  switch (kind) {
    case PositionTaskKind::SelectiveCopy:
      for (size_t t = 0; t < x.size(); ++t) {
        check_token(x[t] >= kFirstSymbol, kind, static_cast<int64_t>(t), x[t]);
        if (x[t] != kCopyBlank) answers.push_back(x[t]);
      }
      break;
    case PositionTaskKind::Counting: {
      std::array<int64_t, kCountMaxVariables> value;
      value.fill(-1);  // not set
      size_t t = 0;
      const auto variable = [&](size_t at) {
        check_token(at < x.size() && x[at] >= kCountVariable && x[at] < kCountEquals, kind, static_cast<int64_t>(at),
                    at < x.size() ? x[at] : -1);
        return static_cast<size_t>(x[at] - kCountVariable);
      };
      while (t < x.size() && x[t] != kCountPrint) {
        if (x[t] == kCountPass) {
          ++t;
          continue;
        }
        const size_t v = variable(t);
        if (t + 1 < x.size() && x[t + 1] == kCountIncrement) {
          check_token(value[v] >= 0, kind, static_cast<int64_t>(t), x[t]);
          ++value[v];
          t += 2;
        } else {
          check_token(t + 3 < x.size() && x[t + 1] == kCountEquals && x[t + 2] == kFirstSymbol &&
                          x[t + 3] == kCountSemicolon,
                      kind, static_cast<int64_t>(t + 1), t + 1 < x.size() ? x[t + 1] : -1);
          value[v] = 0;
          t += 4;
        }
      }
      check_token(t + 2 == x.size(), kind, static_cast<int64_t>(t), t < x.size() ? x[t] : -1);
      const int64_t answer = value[variable(t + 1)];
      check_token(answer >= 0, kind, static_cast<int64_t>(t + 1), x[t + 1]);
      answers.push_back(kFirstSymbol + answer);
      break;
    }
    case PositionTaskKind::FlipFlop:
    case PositionTaskKind::IndirectIndexing:
      break;
  }
  answers.push_back(kEos);
  return answers;
}

PositionTaskData::PositionTaskData(const PositionTaskConfig& c) : config_(c), vocab_(position_task_vocab(c.kind)) {
  const char* task = kPositionTaskNames.name(c.kind);
  RG_CHECK(c.batch_size >= 1, kOp, task, ": batch_size must be >= 1, got ", c.batch_size);
  switch (c.kind) {
    case PositionTaskKind::SelectiveCopy:
      RG_CHECK(c.symbols >= 1 && c.blanks >= 0 && c.symbols + c.blanks <= 100000, kOp,
               "selective_copy: need symbols >= 1, blanks >= 0, symbols + blanks <= 100000, got symbols ",
               c.symbols, ", blanks ", c.blanks);
      break;
    case PositionTaskKind::Counting:
      RG_CHECK(c.min_steps >= 1 && c.max_steps >= c.min_steps && c.max_steps <= 100000, kOp,
               "counting: need 1 <= min_steps <= max_steps <= 100000, got min_steps ", c.min_steps, ", max_steps ",
               c.max_steps);
      RG_CHECK(c.variables >= 1 && c.variables <= kCountMaxVariables, kOp, "counting: variables must be in 1 … ",
               kCountMaxVariables, ", got ", c.variables);
      break;
    case PositionTaskKind::FlipFlop:
      RG_CHECK(c.length >= 4 && c.length % 2 == 0 && c.length <= 100000, kOp,
               "flip_flop: length must be even and in 4 … 100000, got ", c.length);
      RG_CHECK(c.ignore >= 0 && c.ignore <= 1, kOp, "flip_flop: ignore must be a probability, got ", c.ignore);
      break;
    case PositionTaskKind::IndirectIndexing:
      RG_CHECK(c.max_shift >= 1 && c.max_shift <= kIndexMaxShift, kOp, "indirect_indexing: max_shift must be in 1 … ",
               kIndexMaxShift, ", got ", c.max_shift);
      RG_CHECK(c.min_len > c.max_shift && c.max_len >= c.min_len && c.max_len <= 26, kOp,
               "indirect_indexing: need max_shift < min_len <= max_len <= 26, got min_len ", c.min_len, ", max_len ",
               c.max_len, ", max_shift ", c.max_shift);
      break;
  }
}

PositionSample PositionTaskData::sample(int64_t index, int64_t row, Split split) const {
  RG_CHECK(index >= 0 && row >= 0 && row < config_.batch_size, kOp, "sample(", index, ", ", row,
           ") outside batches of ", config_.batch_size, " rows");
  CounterStream rng = row_stream(config_.seed, split, index, static_cast<uint32_t>(row));
  switch (config_.kind) {
    case PositionTaskKind::SelectiveCopy:
      return selective_copy(config_, rng);
    case PositionTaskKind::Counting:
      return counting(config_, rng);
    case PositionTaskKind::FlipFlop:
      return flip_flop(config_, rng);
    case PositionTaskKind::IndirectIndexing:
      return indirect_indexing(config_, rng);
  }
  return {};
}

int64_t PositionTaskData::max_sequence_length() const {
  const PositionTaskConfig& c = config_;
  switch (c.kind) {
    case PositionTaskKind::SelectiveCopy:
      return 2 * c.symbols + c.blanks + 1;  // x, BOS, y
    case PositionTaskKind::Counting:
      return 4 * c.max_steps + 4;  // at most four tokens a statement, "print v", BOS, the value
    case PositionTaskKind::FlipFlop:
      return c.length - 1;
    case PositionTaskKind::IndirectIndexing:
      return c.max_len + 3;  // the list, "?", s, k (the letter is only a target)
  }
  return 0;
}

Batch PositionTaskData::batch(int64_t index, Split split) const {
  RG_CHECK(index >= 0, kOp, "batch index must be >= 0, got ", index);
  std::vector<std::vector<int64_t>> tokens, targets;
  for (int64_t row = 0; row < config_.batch_size; ++row) {
    const PositionSample s = sample(index, row, split);
    std::vector<int64_t> in(s.sequence.begin(), s.sequence.end() - 1), out(in.size(), kIgnoreIndex);
    for (int64_t t : s.scored) out[static_cast<size_t>(t)] = s.sequence[static_cast<size_t>(t + 1)];
    tokens.push_back(std::move(in));
    targets.push_back(std::move(out));
  }
  return decoder_only_batch(tokens, targets);
}

void PositionTaskData::print_samples(SampleModel& model, int64_t count, const std::string&, std::ostream& out) const {
  const int64_t n = std::min(count, config_.batch_size);
  const char* task = kPositionTaskNames.name(config_.kind);
  if (config_.kind == PositionTaskKind::FlipFlop || config_.kind == PositionTaskKind::IndirectIndexing) {
    // scored in place (at the reads, at the shifts), not a prompt and an answer: shown, not sampled
    out << "held-out " << task << " strings (scored teacher-forced in place, not sampled):\n";
    for (int64_t row = 0; row < n; ++row)
      out << "  " << vocab_.decode(sample(0, row, Split::HeldOut).sequence, "") << "\n";
    return;
  }
  print_greedy_samples(model, vocab_, std::string(task) + " inputs", n, [&](int64_t row) {
    // x BOS y EOS, the BOS at the first scored position
    const PositionSample s = sample(0, row, Split::HeldOut);
    const int64_t prompt = s.scored.front();
    return PromptAnswer{std::vector<int64_t>(s.sequence.begin(), s.sequence.begin() + prompt),
                          std::vector<int64_t>(s.sequence.begin() + prompt + 1, s.sequence.end() - 1)};
  }, out);
}

}  // namespace relgrad
