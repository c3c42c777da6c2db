// Batches, vocabularies and the synthetic tasks (text and token files: train/data/text.cpp). See data.h
// for the token conventions and the counter scheme.
#include "train/data/data.h"

#include <algorithm>

#include "core/base/error.h"

namespace relgrad {

namespace {

// Right-pads rows to the longest with `fill`; returns the (B, L) values and sets `length` to L.
std::vector<int64_t> pad_rows(const std::vector<std::vector<int64_t>>& rows, int64_t fill, int64_t& length) {
  length = 0;
  for (const auto& r : rows) length = std::max(length, static_cast<int64_t>(r.size()));
  std::vector<int64_t> out(rows.size() * length, fill);
  for (size_t b = 0; b < rows.size(); ++b) std::copy(rows[b].begin(), rows[b].end(), out.begin() + b * length);
  return out;
}

// (B, L) bool, true at the positions past each row's length.
Tensor padding_mask_for(const std::vector<std::vector<int64_t>>& rows, int64_t length) {
  std::vector<bool> mask(rows.size() * length, false);
  for (size_t b = 0; b < rows.size(); ++b)
    for (int64_t t = static_cast<int64_t>(rows[b].size()); t < length; ++t) mask[b * length + t] = true;
  return from_vector<bool>(mask, {static_cast<int64_t>(rows.size()), length}, kBool);
}

Tensor int_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  return from_vector<int64_t>(values, {rows, cols}, kInt64);
}

}  // namespace

int64_t count_targets(const std::vector<int64_t>& targets) {
  return std::count_if(targets.begin(), targets.end(), [](int64_t t) { return t != kIgnoreIndex; });
}

// ---- streams and batches --------------------------------------------------------------------------

int64_t CounterStream::below(int64_t n) {
  if (used_ == 4) {
    block_ = philox::philox4x32(counter_, static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32));
    ++counter_.x[0];
    used_ = 0;
  }
  double u = philox::uniform(block_.x[used_], block_.x[used_ + 1]);
  used_ += 2;
  int64_t v = static_cast<int64_t>(u * static_cast<double>(n));
  return std::min(v, n - 1);  // u < 1, but u * n may round up to n
}

CounterStream experiment_row_stream(uint64_t seed, uint32_t stream, Split split, int64_t index, int64_t row) {
  uint32_t top = stream & 0x7fffffffu;
  if (split == Split::HeldOut) top |= 0x80000000u;
  return CounterStream(seed, static_cast<uint32_t>(row), static_cast<uint32_t>(index), top);
}

CounterStream row_stream(uint64_t seed, Split split, int64_t index, uint32_t row) {
  uint64_t word = static_cast<uint64_t>(index);  // index >= 0, so bit 63 is free for the split
  if (split == Split::HeldOut) word |= uint64_t{1} << 63;
  return CounterStream(seed, row, static_cast<uint32_t>(word), static_cast<uint32_t>(word >> 32));
}

Batch Batch::to(Device device) const {
  Batch b = *this;
  for (Tensor* t : {&b.src, &b.tgt_in, &b.tgt_out, &b.src_padding_mask, &b.tgt_padding_mask, &b.tgt_positions,
                    &b.tokens, &b.targets, &b.padding_mask})
    if (t->defined()) *t = t->to(device);
  return b;
}

Batch encoder_decoder_batch(const std::vector<std::vector<int64_t>>& src, const std::vector<std::vector<int64_t>>& tgt_in,
                            const std::vector<std::vector<int64_t>>& tgt_out) {
  const int64_t B = static_cast<int64_t>(src.size());
  int64_t t1 = 0, t2 = 0, t2_out = 0;
  Batch batch;
  std::vector<int64_t> padded_src = pad_rows(src, kPad, t1);  // sets t1 (read after, not alongside)
  std::vector<int64_t> padded_in = pad_rows(tgt_in, kPad, t2);
  std::vector<int64_t> out = pad_rows(tgt_out, kIgnoreIndex, t2_out);
  RG_CHECK(t2 == t2_out && tgt_in.size() == src.size() && tgt_out.size() == src.size(), "Batch",
           "tgt_in and tgt_out rows must pair up with equal lengths");
  batch.src = int_tensor(padded_src, B, t1);
  batch.src_padding_mask = padding_mask_for(src, t1);
  batch.tgt_in = int_tensor(padded_in, B, t2);
  batch.num_targets = count_targets(out);
  batch.tgt_out = int_tensor(out, B, t2);
  batch.tgt_padding_mask = padding_mask_for(tgt_in, t2);
  return batch;
}

Batch decoder_only_batch(const std::vector<std::vector<int64_t>>& tokens, const std::vector<std::vector<int64_t>>& targets) {
  const int64_t B = static_cast<int64_t>(tokens.size());
  int64_t T = 0, T_out = 0;
  std::vector<int64_t> padded = pad_rows(tokens, kPad, T);
  std::vector<int64_t> out = pad_rows(targets, kIgnoreIndex, T_out);
  RG_CHECK(T == T_out && targets.size() == tokens.size(), "Batch", "tokens and targets rows must pair up with equal lengths");
  Batch batch;
  batch.tokens = int_tensor(padded, B, T);
  batch.num_targets = count_targets(out);
  batch.targets = int_tensor(out, B, T);
  batch.padding_mask = padding_mask_for(tokens, T);
  return batch;
}

Batch window_rows(int64_t rows, int64_t context, const std::function<std::vector<int64_t>(int64_t row)>& window) {
  std::vector<int64_t> tokens(rows * context, kPad), targets(rows * context, kIgnoreIndex);
  std::vector<bool> mask(rows * context, true);
  int64_t num_targets = 0;
  for (int64_t b = 0; b < rows; ++b) {
    const std::vector<int64_t> w = window(b);
    for (int64_t t = 0; t + 1 < static_cast<int64_t>(w.size()) && t < context; ++t, ++num_targets) {
      tokens[b * context + t] = w[t];
      targets[b * context + t] = w[t + 1];
      mask[b * context + t] = false;
    }
  }
  Batch batch;
  batch.tokens = int_tensor(tokens, rows, context);
  batch.targets = int_tensor(targets, rows, context);
  batch.padding_mask = from_vector<bool>(mask, {rows, context}, kBool);
  batch.num_targets = num_targets;
  return batch;
}

Batch prompt_answer_batch(const std::vector<std::vector<int64_t>>& prompts,
                          const std::vector<std::vector<int64_t>>& answers) {
  RG_CHECK(prompts.size() == answers.size(), "Batch", "prompts and answers must pair up, got ", prompts.size(),
           " prompts and ", answers.size(), " answers");
  std::vector<std::vector<int64_t>> tokens, targets;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const std::vector<int64_t>& x = prompts[b];
    std::vector<int64_t> seq = x;  // x BOS y EOS
    seq.push_back(kBos);
    seq.insert(seq.end(), answers[b].begin(), answers[b].end());
    seq.push_back(kEos);
    tokens.emplace_back(seq.begin(), seq.end() - 1);
    std::vector<int64_t> target(seq.begin() + 1, seq.end());
    std::fill(target.begin(), target.begin() + x.size(), kIgnoreIndex);  // x[1..] and BOS
    targets.push_back(std::move(target));
  }
  return decoder_only_batch(tokens, targets);
}

// ---- Vocab --------------------------------------------------------------------------------------

const std::string& Vocab::name(int64_t id) const {
  RG_CHECK(id >= 0 && id < size && static_cast<int64_t>(names.size()) == size, "Vocab",
           "token id ", id, " is outside the vocabulary of ", size);
  return names[id];
}

std::string Vocab::decode(const std::vector<int64_t>& ids, const std::string& sep) const {
  std::string out;
  bool first = true;
  for (int64_t id : ids) {
    if (id == kIgnoreIndex || id == pad) continue;
    if (!first) out += sep;
    out += name(id);
    first = false;
  }
  return out;
}

// ---- names --------------------------------------------------------------------------------------

const char* to_string(TaskKind kind) { return kTaskKindNames.name(kind); }
const char* to_string(Layout layout) { return kLayoutNames.name(layout); }

TaskKind task_kind_from_string(const std::string& name) { return kTaskKindNames.parse(name, "SyntheticTask", "task"); }

Layout layout_from_string(const std::string& name) { return kLayoutNames.parse(name, "SyntheticTask", "layout"); }

// ---- the verification experiments' tasks ----------------------------------------------------------
// periodic_lm, sync and stretch (data.h), drawn exactly as train/instruments/experiments.cpp draws D2's
// and D6's batches: the same stream numbers, the same order of draws.
namespace {

int64_t mirror(int64_t token, int64_t symbols) {
  return token == kEos ? kEos : kFirstSymbol + (symbols - 1 - (token - kFirstSymbol));
}

// A periodic_lm sample: source = the whole sequence s[0 .. max_len), target unused.
SyntheticTask::Sample experiment_sample(const TaskConfig& c, int64_t index, int64_t row, Split split) {
  SyntheticTask::Sample s;
  if (c.kind == TaskKind::PeriodicLm) {
    CounterStream rng = experiment_row_stream(c.seed, 2, split, index, row);
    std::vector<int64_t> pattern(static_cast<size_t>(c.period));
    for (auto& p : pattern) p = kFirstSymbol + rng.below(c.num_symbols);
    for (int64_t i = 0; i < c.max_len; ++i) s.source.push_back(pattern[static_cast<size_t>(i % c.period)]);
    s.target = s.source;
    return s;
  }
  const bool sync = c.kind == TaskKind::Sync;
  CounterStream rng = experiment_row_stream(c.seed, sync ? 6 : 7, split, index, row);
  const int64_t n = rng.between(c.min_len, c.max_len);
  for (int64_t i = 0; i < n + (sync ? c.lag : 0); ++i)
    s.source.push_back(kFirstSymbol + rng.below(c.num_symbols));
  s.source.push_back(kEos);
  if (sync) {
    for (int64_t i = 0; i < n; ++i)
      s.target.push_back(mirror(s.source[static_cast<size_t>(i + c.lag)], c.num_symbols));
  } else {
    for (int64_t i = 0; i < n; ++i)
      s.target.insert(s.target.end(), 2, mirror(s.source[static_cast<size_t>(i)], c.num_symbols));
    s.target.push_back(kEos);  // EOS twice in all: this one, and the one every target ends with
  }
  return s;
}

// tokens = BOS s[0] … s[L−2], targets[i] = s[i] for i >= period (-100 before).
Batch periodic_lm_batch(const std::vector<SyntheticTask::Sample>& samples, int64_t period) {
  std::vector<std::vector<int64_t>> tokens, targets;
  for (const SyntheticTask::Sample& s : samples) {
    const int64_t L = static_cast<int64_t>(s.source.size());
    std::vector<int64_t> x{kBos}, y;
    for (int64_t i = 0; i < L; ++i) {
      if (i + 1 < L) x.push_back(s.source[static_cast<size_t>(i)]);
      y.push_back(i >= period ? s.source[static_cast<size_t>(i)] : kIgnoreIndex);
    }
    tokens.push_back(std::move(x));
    targets.push_back(std::move(y));
  }
  return decoder_only_batch(tokens, targets);
}

}  // namespace

// ---- SyntheticTask ------------------------------------------------------------------------------

SyntheticTask::SyntheticTask(const TaskConfig& config) : config_(config) {
  const TaskConfig& c = config_;
  const char* task = to_string(c.kind);
  RG_CHECK(c.num_symbols >= 2, "SyntheticTask", task, ": num_symbols must be at least 2, got ", c.num_symbols);
  RG_CHECK(c.min_len >= 1 && c.min_len <= c.max_len, "SyntheticTask", task,
           ": need 1 <= min_len <= max_len, got min_len ", c.min_len, " and max_len ", c.max_len);
  RG_CHECK(c.batch_size >= 1, "SyntheticTask", task, ": batch_size must be positive, got ", c.batch_size);
  if (c.kind == TaskKind::Shift)
    RG_CHECK(c.lag >= 1 && c.lag < c.min_len, "SyntheticTask", "shift: need 1 <= lag < min_len (so every ",
             "target copies at least one symbol), got lag ", c.lag, " and min_len ", c.min_len);
  if (c.kind == TaskKind::Periodic)
    RG_CHECK(c.period >= 2 && c.period <= c.min_len, "SyntheticTask", "periodic: need 2 <= period <= min_len ",
             "(so every source shows a whole period), got period ", c.period, " and min_len ", c.min_len);
  if (c.kind == TaskKind::PeriodicLm) {
    RG_CHECK(c.layout == Layout::DecoderOnly, "SyntheticTask", "periodic_lm is a decoder-only task ",
             "(model.type = \"decoder-only\")");
    RG_CHECK(c.period >= 1 && c.period < c.max_len, "SyntheticTask",
             "periodic_lm: need 1 <= period < max_len (so some targets repeat the pattern), got period ",
             c.period, " and max_len ", c.max_len);
  }
  if (c.kind == TaskKind::Sync || c.kind == TaskKind::Stretch)
    RG_CHECK(c.layout == Layout::EncoderDecoder, "SyntheticTask", task, " is an encoder-decoder task ",
             "(model.type = \"encoder-decoder\")");
  if (c.kind == TaskKind::Sync)
    RG_CHECK(c.lag >= 0 && c.lag <= kMaxSyncLag, "SyntheticTask", "sync: need 0 <= lag <= ", kMaxSyncLag,
             ", got ", c.lag);

  vocab_.names = {"<pad>", "<bos>", "<eos>"};
  for (int64_t s = 0; s < c.num_symbols; ++s) vocab_.names.push_back(std::to_string(s));
  if (c.kind == TaskKind::Shift) vocab_.names.push_back("_");
  vocab_.size = static_cast<int64_t>(vocab_.names.size());
}

int64_t SyntheticTask::synthetic_max_sequence_length(const TaskConfig& c) {
  switch (c.kind) {
    case TaskKind::PeriodicLm: return c.max_len;
    case TaskKind::Sync: return c.max_len + std::max<int64_t>(c.lag, 0) + 1;
    case TaskKind::Stretch: return 2 * c.max_len + 2;
    default: return c.layout == Layout::EncoderDecoder ? c.max_len + 1 : 2 * c.max_len + 1;
  }
}

SyntheticTask::Sample SyntheticTask::sample(int64_t index, int64_t row, Split split) const {
  const TaskConfig& c = config_;
  RG_CHECK(index >= 0, "SyntheticTask", "batch index must be >= 0, got ", index);
  RG_CHECK(row >= 0 && row < c.batch_size, "SyntheticTask", "row ", row, " is outside a batch of ", c.batch_size);
  if (c.kind == TaskKind::PeriodicLm || c.kind == TaskKind::Sync || c.kind == TaskKind::Stretch)
    return experiment_sample(c, index, row, split);
  CounterStream rng = row_stream(c.seed, split, index, static_cast<uint32_t>(row));
  const int64_t n = rng.between(c.min_len, c.max_len);
  Sample s;
  s.source.resize(n);
  if (c.kind == TaskKind::Periodic) {
    std::vector<int64_t> pattern(c.period);
    for (auto& p : pattern) p = kFirstSymbol + rng.below(c.num_symbols);
    for (int64_t t = 0; t < n; ++t) s.source[t] = pattern[t % c.period];
  } else {
    for (auto& x : s.source) x = kFirstSymbol + rng.below(c.num_symbols);
  }

  const auto& x = s.source;
  std::vector<int64_t>& y = s.target;
  switch (c.kind) {
    case TaskKind::Copy: y = x; break;
    case TaskKind::Reverse: y.assign(x.rbegin(), x.rend()); break;
    case TaskKind::Shift:
      y.resize(n);
      for (int64_t t = 0; t < n; ++t) y[t] = t < c.lag ? filler() : x[t - c.lag];
      break;
    case TaskKind::Sort: y = x; std::sort(y.begin(), y.end()); break;
    case TaskKind::Periodic:
      y.resize(n);
      for (int64_t t = 0; t < n; ++t) y[t] = x[(n + t) % c.period];  // x[t mod P] = pattern[t mod P]
      break;
    default: break;  // the experiments' tasks: experiment_sample
  }
  return s;
}

SyntheticTask::Sample SyntheticTask::held_out_case(int64_t n) const {
  Sample s = sample(n / config_.batch_size, n % config_.batch_size, Split::HeldOut);
  if (config_.kind != TaskKind::PeriodicLm) return s;
  const auto period_end = s.source.begin() + std::min<int64_t>(config_.period, s.source.size());
  return {{s.source.begin(), period_end}, {period_end, s.source.end()}};
}

Batch SyntheticTask::batch(int64_t index, Split split) const {
  const int64_t B = config_.batch_size;
  std::vector<Sample> samples;
  samples.reserve(B);
  for (int64_t b = 0; b < B; ++b) samples.push_back(sample(index, b, split));

  if (config_.kind == TaskKind::PeriodicLm) return periodic_lm_batch(samples, config_.period);
  if (config_.layout == Layout::EncoderDecoder) {
    std::vector<std::vector<int64_t>> src, tgt_in, tgt_out;
    for (const Sample& s : samples) {
      src.push_back(s.source);
      tgt_in.push_back({kBos});
      tgt_in.back().insert(tgt_in.back().end(), s.target.begin(), s.target.end());
      tgt_out.push_back(s.target);
      tgt_out.back().push_back(kEos);
    }
    return encoder_decoder_batch(src, tgt_in, tgt_out);
  } else {
    std::vector<std::vector<int64_t>> prompts, answers;  // x BOS y EOS, the loss on y and EOS
    for (Sample& s : samples) {
      prompts.push_back(std::move(s.source));
      answers.push_back(std::move(s.target));
    }
    return prompt_answer_batch(prompts, answers);
  }
}

}  // namespace relgrad
