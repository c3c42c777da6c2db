// The chorale datasets for the trainer (ChoraleData: decoder-only windows; HarmonyData: soprano →
// alto, tenor, bass), their evaluation batches over whole chorales, and their samples
// (train/music/chorales.h).
#include <algorithm>
#include <ostream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/music/chorales.h"

namespace relgrad {

namespace {

constexpr uint32_t kChoraleTag = 0x63686F72;  // "chor"
constexpr int64_t kRowsPerBatch = int64_t(1) << 20;

const std::vector<Chorale>& split_chorales(const ChoraleSet& set, Split split) {
  return split == Split::Train ? set.train : set.valid;
}

// The row's own stream, and a chorale drawn from it with probability ∝ its length.
CounterStream row_rng(uint64_t seed, Split split, int64_t index, int64_t row) {
  return row_stream(seed, split, index * kRowsPerBatch + row, kChoraleTag);
}
const Chorale& pick_chorale(CounterStream& rng, const std::vector<Chorale>& chorales) {
  int64_t total = 0;
  for (const Chorale& c : chorales) total += static_cast<int64_t>(c.steps.size());
  int64_t u = rng.below(total);
  for (const Chorale& c : chorales) {
    if (u < static_cast<int64_t>(c.steps.size())) return c;
    u -= static_cast<int64_t>(c.steps.size());
  }
  return chorales.back();
}

void check_index(int64_t index, const char* who) {
  RG_CHECK(index >= 0 && index < (int64_t(1) << 42), who, "batch index must be in [0, 2^42), got ", index);
}

std::string step_names(const Vocab& vocab, const Chorale& c, size_t max_steps) {
  std::string out;
  for (size_t k = 0; k < c.steps.size() && k < max_steps; ++k) {
    out += k ? " | " : "";
    for (int v = 0; v < kChoraleVoices; ++v) out += (v ? " " : "") + vocab.name(chorale_token(c.steps[k][v]));
  }
  if (c.steps.size() > max_steps) out += " | …";
  return out;
}

// A constructor's own check, made before the file is loaded (so a bad setting is named first).
template <class... Message>
const ChoraleDataConfig& checked(const ChoraleDataConfig& config, bool ok, const char* who, const Message&... message) {
  RG_CHECK(ok, who, message...);
  return config;
}

}  // namespace

ChoraleFileData::ChoraleFileData(const ChoraleDataConfig& config, const char* who)
    : config_(config), vocab_(chorale_vocab()) {
  RG_CHECK(config.batch_size >= 1 && config.batch_size <= kRowsPerBatch, who,
           "batch_size must be in [1, 2^20], got ", config.batch_size);
  path_ = config.path.empty() ? default_chorales_path() : config.path;
  const std::string bytes = read_file(path_, "chorales", static_cast<uint64_t>(kMaxChoraleFileBytes));
  checksum_ = fnv1a64(bytes.data(), bytes.size());
  set_ = parse_chorales(bytes, path_);
  RG_CHECK(!set_.train.empty() && !set_.valid.empty(), who, path_, ": needs training and validation chorales, got ",
           set_.train.size(), " and ", set_.valid.size());
}

// ---- decoder-only --------------------------------------------------------------------------------

ChoraleData::ChoraleData(const ChoraleDataConfig& config)
    : ChoraleFileData(checked(config, config.context >= 4 && config.context % 4 == 0, "ChoraleData",
                              "context must be a positive multiple of 4 (one 16th step is 4 tokens), got ",
                              config.context),
                      "ChoraleData") {}

Batch ChoraleData::batch(int64_t index, Split split) const {
  check_index(index, "ChoraleData");
  const int64_t T = config_.context;
  return window_rows(config_.batch_size, T, [&](int64_t b) {
    CounterStream rng = row_rng(config_.seed, split, index, b);
    const std::vector<int64_t> seq = chorale_tokens(pick_chorale(rng, split_chorales(set_, split)));
    const int64_t len = static_cast<int64_t>(seq.size());  // 4n + 2
    // Start 4k with every window full when the piece is long enough: 4k + T + 1 ≤ 4n + 2.
    const int64_t start = 4 * rng.below(std::max<int64_t>(0, (len - 1 - T) / 4) + 1);
    return std::vector<int64_t>(seq.begin() + start, seq.begin() + std::min(len, start + T + 1));
  });
}

void ChoraleData::print_samples(SampleModel& model, int64_t, const std::string& out_dir,
                                std::ostream& out) const {
  const Chorale prompt_chorale = chorale_opening(set_.valid.front());
  std::vector<int64_t> prompt = chorale_tokens(prompt_chorale);
  prompt.pop_back();  // no EOS: the model continues the piece
  const std::vector<int64_t> seq = model.continue_prompt(prompt, true);
  const Chorale sample = chorale_from_tokens(seq);
  const std::string path = out_dir + "/sample.mid";
  if (sample.steps.empty()) {
    out << "sampled no complete 16th step from the first " << prompt_chorale.steps.size()
        << " steps of valid chorale 0; nothing written\n";
    return;
  }
  write_midi(path, chorale_midi(sample));
  out << "continued the first " << prompt_chorale.steps.size() << " steps of valid chorale 0 to "
      << sample.steps.size() << " steps (soprano alto tenor bass per step): " << path << "\n  "
      << step_names(vocab_, sample, 32) << "\n";
}

// ---- harmonisation -------------------------------------------------------------------------------

HarmonyData::HarmonyData(const ChoraleDataConfig& config)
    : ChoraleFileData(checked(config, config.harmony_steps >= 1 && config.harmony_steps <= kMaxChoraleSteps,
                              "HarmonyData", "harmony_steps must be in [1, ", kMaxChoraleSteps, "], got ",
                              config.harmony_steps),
                      "HarmonyData") {}

Batch HarmonyData::batch(int64_t index, Split split) const {
  check_index(index, "HarmonyData");
  const int64_t B = config_.batch_size, S = config_.harmony_steps, T2 = 3 * S + 1;
  const auto& chorales = split_chorales(set_, split);
  std::vector<int64_t> src(B * S, kPad), tgt_in(B * T2, kPad), tgt_out(B * T2, kIgnoreIndex);
  std::vector<bool> src_mask(B * S, true), tgt_mask(B * T2, true);
  int64_t num_targets = 0;
  for (int64_t b = 0; b < B; ++b) {
    CounterStream rng = row_rng(config_.seed, split, index, b);
    const Chorale& c = pick_chorale(rng, chorales);
    const int64_t n = static_cast<int64_t>(c.steps.size());
    const int64_t k0 = rng.below(std::max<int64_t>(0, n - S) + 1);
    const int64_t m = std::min(S, n - k0);  // steps in this row
    for (int64_t k = 0; k < m; ++k) {
      const auto& step = c.steps[k0 + k];
      src[b * S + k] = chorale_token(step[0]);
      src_mask[b * S + k] = false;
      for (int v = 1; v < kChoraleVoices; ++v) {
        const int64_t i = 3 * k + v - 1;
        tgt_out[b * T2 + i] = chorale_token(step[v]);
        tgt_in[b * T2 + i + 1] = tgt_out[b * T2 + i];
      }
    }
    tgt_in[b * T2] = kBos;
    tgt_out[b * T2 + 3 * m] = kEos;
    for (int64_t i = 0; i <= 3 * m; ++i) tgt_mask[b * T2 + i] = false;
    num_targets += 3 * m + 1;
  }
  Batch batch;
  batch.src = from_vector<int64_t>(src, {B, S}, kInt64);
  batch.src_padding_mask = from_vector<bool>(src_mask, {B, S}, kBool);
  batch.tgt_in = from_vector<int64_t>(tgt_in, {B, T2}, kInt64);
  batch.tgt_out = from_vector<int64_t>(tgt_out, {B, T2}, kInt64);
  batch.tgt_padding_mask = from_vector<bool>(tgt_mask, {B, T2}, kBool);
  batch.tgt_positions = harmony_query_positions(S);
  batch.num_targets = num_targets;
  return batch;
}

void HarmonyData::print_samples(SampleModel& model, int64_t, const std::string& out_dir,
                                std::ostream& out) const {
  const Chorale& first = set_.valid.front();
  const std::vector<int64_t> soprano = soprano_tokens(first);
  const size_t want = 3 * soprano.size();
  std::vector<int64_t> answer = model.answer(soprano, static_cast<int64_t>(want) + 1);
  const auto eos = std::find(answer.begin(), answer.end(), kEos);
  answer.erase(eos, answer.end());
  // A model may write ids that are no voice (PAD, BOS) or the wrong number of them: such ids become
  // rests and the line is cut or filled with rests to 3 tokens per soprano step, and we say so.
  int64_t not_voices = 0;
  for (int64_t& t : answer)
    if (t < kChoraleRest || t >= kChoraleVocabSize) t = kChoraleRest, ++not_voices;
  const size_t got = answer.size();
  answer.resize(want, kChoraleRest);
  const Chorale sample = chorale_from_parts(soprano, answer);
  const std::string path = out_dir + "/harmony.mid";
  write_midi(path, chorale_midi(sample));
  out << "harmonised the soprano of valid chorale 0 (" << soprano.size() << " steps): " << path << "\n";
  if (got != want)
    out << "  the model wrote " << got << " lower-voice tokens for " << want
        << " (3 per step): " << (got < want ? "filled with rests" : "cut") << "\n";
  if (not_voices > 0) out << "  " << not_voices << " tokens that are no voice (PAD/BOS) became rests\n";
  out << "  " << step_names(vocab_, sample, 32) << "\n";
}

Tensor harmony_query_positions(int64_t steps) {
  RG_CHECK(steps >= 0 && steps <= kMaxChoraleSteps, "harmony_query_positions", "steps must be in [0, ",
           kMaxChoraleSteps, "], got ", steps);
  std::vector<int64_t> pos(3 * steps + 1);
  for (int64_t i = 0; i < 3 * steps + 1; ++i) pos[i] = i / 3;
  return from_vector<int64_t>(pos, {3 * steps + 1}, kInt64);
}

// ---- evaluation batches --------------------------------------------------------------------------

std::vector<Batch> chorale_eval_batches(const ChoraleSet& set, ChoraleSplit split, int64_t context,
                                        int64_t batch_size) {
  RG_CHECK(context >= 8 && context % 4 == 0, "chorale_eval_batches",
           "context must be a multiple of 4 and at least 8 (windows overlap by half of it), got ", context);
  RG_CHECK(batch_size >= 1, "chorale_eval_batches", "batch_size must be >= 1, got ", batch_size);
  // Windows advance by `stride` (a multiple of 4, at most context / 2), so the first token a window
  // scores, one past the previous window's last, has at least context + 1 - stride tokens before it.
  const int64_t stride = context / 2 / 4 * 4;
  std::vector<std::vector<int64_t>> rows_in, rows_out;
  std::vector<Batch> out;
  auto flush = [&]() {
    if (rows_in.empty()) return;
    out.push_back(decoder_only_batch(rows_in, rows_out));
    rows_in.clear();
    rows_out.clear();
  };
  for (const Chorale& c : set.split(split)) {
    const std::vector<int64_t> seq = chorale_tokens(c);
    const int64_t len = static_cast<int64_t>(seq.size());
    int64_t scored = 0;  // targets seq[1..scored] are done
    for (int64_t start = 0; scored < len - 1; start += stride) {
      const int64_t width = std::min(context, len - 1 - start);
      std::vector<int64_t> in(seq.begin() + start, seq.begin() + start + width), tgt(width, kIgnoreIndex);
      for (int64_t t = 0; t < width; ++t)
        if (start + t + 1 > scored) tgt[t] = seq[start + t + 1];
      scored = start + width;
      rows_in.push_back(std::move(in));
      rows_out.push_back(std::move(tgt));
      if (static_cast<int64_t>(rows_in.size()) == batch_size) flush();
    }
  }
  flush();
  return out;
}

std::vector<Batch> harmony_eval_batches(const ChoraleSet& set, ChoraleSplit split, int64_t batch_size) {
  RG_CHECK(batch_size >= 1, "harmony_eval_batches", "batch_size must be >= 1, got ", batch_size);
  std::vector<std::vector<int64_t>> src, tgt_in, tgt_out;
  std::vector<Batch> out;
  int64_t longest = 0;
  auto flush = [&]() {
    if (src.empty()) return;
    Batch b = encoder_decoder_batch(src, tgt_in, tgt_out);
    b.tgt_positions = harmony_query_positions(longest);
    out.push_back(std::move(b));
    src.clear(), tgt_in.clear(), tgt_out.clear();
    longest = 0;
  };
  for (const Chorale& c : set.split(split)) {
    src.push_back(soprano_tokens(c));
    std::vector<int64_t> lower = lower_voice_tokens(c);
    tgt_in.push_back({kBos});
    tgt_in.back().insert(tgt_in.back().end(), lower.begin(), lower.end());
    lower.push_back(kEos);
    tgt_out.push_back(std::move(lower));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(c.steps.size()));
    if (static_cast<int64_t>(src.size()) == batch_size) flush();
  }
  flush();
  return out;
}

}  // namespace relgrad
