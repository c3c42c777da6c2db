// The length-generalisation tasks (train/data/length_tasks.h).
#include "train/data/length_tasks.h"

#include <algorithm>
#include <ostream>

#include "core/base/error.h"

namespace relgrad {

namespace {

constexpr const char* kOp = "length_tasks";

struct TaskName {
  LengthTaskKind kind;
  const char* name;
};
constexpr TaskName kTaskNames[] = {{LengthTaskKind::Copy, "copy"},
                                   {LengthTaskKind::Reverse, "reverse"},
                                   {LengthTaskKind::Addition, "addition"},
                                   {LengthTaskKind::Sorting, "sorting"},
                                   {LengthTaskKind::Parity, "parity"}};

bool binary_task(LengthTaskKind kind) {
  return kind == LengthTaskKind::Parity || kind == LengthTaskKind::Addition;
}

int64_t bit(int64_t id) { return id - kFirstSymbol; }

}  // namespace

const char* to_string(LengthTaskKind kind) {
  for (const TaskName& t : kTaskNames)
    if (t.kind == kind) return t.name;
  return "?";
}

const std::vector<std::string>& length_task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const TaskName& t : kTaskNames) n.push_back(t.name);
    return n;
  }();
  return names;
}

LengthTaskKind length_task_from_string(const std::string& name) {
  for (const TaskName& t : kTaskNames)
    if (name == t.name) return t.kind;
  RG_CHECK(false, kOp, "unknown task '", name, "' (expected copy, reverse, addition, sorting or parity)");
  return LengthTaskKind::Copy;
}

int64_t LengthTaskData::effective_length(LengthTaskKind kind, int64_t n) {
  return kind == LengthTaskKind::Addition ? std::max<int64_t>(n, 3) : n;
}

int64_t LengthTaskData::answer_length(LengthTaskKind kind, int64_t n) {
  switch (kind) {
    case LengthTaskKind::Parity:
      return 1;
    case LengthTaskKind::Addition:
      return effective_length(kind, n) / 2 + 1;  // ⌈(n−1)/2⌉ = ⌊n/2⌋, + 1
    default:
      return n;
  }
}

std::vector<int64_t> length_task_answer(LengthTaskKind kind, const std::vector<int64_t>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t top = kFirstSymbol + (binary_task(kind) ? 2 : 10);
  for (int64_t t = 0; t < n; ++t) {
    if (kind == LengthTaskKind::Addition && x[t] == kLengthPlus) continue;
    RG_CHECK(x[t] >= kFirstSymbol && x[t] < top, kOp, to_string(kind), ": input token ", t, " is id ", x[t],
             ", outside the task's symbols ", kFirstSymbol, " … ", top - 1);
  }
  switch (kind) {
    case LengthTaskKind::Copy:
      return x;
    case LengthTaskKind::Reverse:
      return std::vector<int64_t>(x.rbegin(), x.rend());
    case LengthTaskKind::Sorting: {
      std::vector<int64_t> y = x;
      std::sort(y.begin(), y.end());
      return y;
    }
    case LengthTaskKind::Parity: {
      int64_t ones = 0;
      for (int64_t id : x) ones += bit(id);
      return {kFirstSymbol + ones % 2};
    }
    case LengthTaskKind::Addition: {
      const int64_t len_a = n / 2;  // ⌈(n−1)/2⌉
      RG_CHECK(n >= 3 && x[len_a] == kLengthPlus && std::count(x.begin(), x.end(), kLengthPlus) == 1, kOp,
               "addition: input of length ", n, " must be a (", len_a, " bits) + b (", n - 1 - len_a,
               " bits)");
      std::vector<int64_t> y;
      int64_t carry = 0;
      for (int64_t t = 0; t <= len_a; ++t) {  // bit t of a + b, least significant first
        const int64_t a = t < len_a ? bit(x[t]) : 0;
        const int64_t b = t < n - 1 - len_a ? bit(x[len_a + 1 + t]) : 0;
        const int64_t sum = a + b + carry;
        y.push_back(kFirstSymbol + sum % 2);
        carry = sum / 2;
      }
      return y;
    }
  }
  return {};
}

LengthTaskData::LengthTaskData(const LengthTaskConfig& c) : config_(c) {
  RG_CHECK(c.min_len >= 1 && c.max_len >= c.min_len, kOp, "need 1 <= min_len <= max_len, got min_len ",
           c.min_len, ", max_len ", c.max_len);
  RG_CHECK(c.max_len <= 100000, kOp, "max_len ", c.max_len, " is beyond 100000");
  RG_CHECK(c.batch_size >= 1, kOp, "batch_size must be >= 1, got ", c.batch_size);
  vocab_.names = {"<pad>", "<bos>", "<eos>"};
  for (int s = 0; s < 10; ++s) vocab_.names.push_back(std::to_string(s));
  vocab_.names.push_back("+");
  vocab_.size = static_cast<int64_t>(vocab_.names.size());
}

int64_t LengthTaskData::max_sequence_length() const {
  const int64_t n = effective_length(config_.kind, config_.max_len);
  return n + 1 + answer_length(config_.kind, config_.max_len);  // x BOS y EOS minus the last token
}

LengthSample LengthTaskData::sample(int64_t index, int64_t row, Split split) const {
  RG_CHECK(index >= 0 && row >= 0 && row < config_.batch_size, kOp, "sample(", index, ", ", row,
           ") outside batches of ", config_.batch_size, " rows");
  CounterStream rng = row_stream(config_.seed, split, index, static_cast<uint32_t>(row));
  const LengthTaskKind kind = config_.kind;
  const int64_t n = effective_length(kind, rng.between(config_.min_len, config_.max_len));
  const int64_t symbols = binary_task(kind) ? 2 : 10;
  LengthSample s;
  for (int64_t t = 0; t < n; ++t) s.input.push_back(kFirstSymbol + rng.below(symbols));
  if (kind == LengthTaskKind::Addition)
    s.input[static_cast<size_t>(n / 2)] = kLengthPlus;  // a is ⌈(n−1)/2⌉ bits
  s.answer = length_task_answer(kind, s.input);
  return s;
}

Batch LengthTaskData::batch(int64_t index, Split split) const {
  RG_CHECK(index >= 0, kOp, "batch index must be >= 0, got ", index);
  return prompt_answer_rows(config_.batch_size, [&](int64_t row) {  // x BOS y EOS, the loss on y and EOS
    LengthSample s = sample(index, row, split);
    return PromptAnswer{std::move(s.input), std::move(s.answer)};
  });
}

void LengthTaskData::print_samples(SampleModel& model, int64_t count, const std::string&,
                                   std::ostream& out) const {
  const std::string what = std::string(to_string(config_.kind)) + " inputs";
  print_greedy_samples(model, vocab_, what, std::min(count, config_.batch_size), [&](int64_t row) {
    LengthSample s = sample(0, row, Split::HeldOut);
    return PromptAnswer{std::move(s.input), std::move(s.answer)};
  }, out);
}

}  // namespace relgrad
