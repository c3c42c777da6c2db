// Training data: synthetic sequence tasks, byte-level text and token data files, as batches of
// int64 token tensors.
//
// Token ids of the synthetic tasks (the same for every task, so models and samplers need no special
// cases):
//   0 PAD   right padding; never a loss target (its target is -100)
//   1 BOS   begins the target: tgt_in = BOS + target, and in the decoder-only layout it separates
//           the prompt from the target (so no extra separator token is needed)
//   2 EOS   ends the target; the model must predict it, which is how a sampler knows to stop
//   3...    the task's symbols "0", "1", ... (num_symbols of them); the shift task adds one more,
//           "_", the filler for the first `lag` outputs, outside the input alphabet so that it can
//           never be confused with a copied symbol.
//
// Loss targets are -100 (kIgnoreIndex, cross_entropy's default ignore_index) wherever no loss
// should be taken: padding, and the prompt part of a decoder-only sequence. So for either layout the
// loss is simply cross_entropy(logits, targets) with default options.
//
// Determinism and the data position. Every random number is Philox4x32-10 (core/base/philox.h,
// the generator behind Generator and rand) keyed by the seed, with the counter
//     (block, sample, batch index with its top bit set for the held-out stream)
// so batch n is a pure function of (seed, n): no hidden state advances between calls, batches can be
// produced in any order, and the held-out stream shares no counter with the training stream. The
// batch index plays the role of Generator's offset. The data position that a checkpoint stores is
// therefore a single integer, the index of the next training batch; resuming from it continues the
// exact batch sequence. TextDataset works the same way (random window offsets, same counters).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/name_table.h"
#include "core/base/philox.h"
#include "core/tensor.h"

namespace relgrad {

inline constexpr int64_t kPad = 0;
inline constexpr int64_t kBos = 1;
inline constexpr int64_t kEos = 2;
inline constexpr int64_t kFirstSymbol = 3;  // id of the task's symbol "0"
inline constexpr int64_t kIgnoreIndex = -100;
inline constexpr int64_t kMaxSyncLag = 4096;  // the sync task's largest lag (TaskConfig::lag)

// Names of the token ids, for printing samples.
struct Vocab {
  int64_t size = 0;
  std::vector<std::string> names;  // names[id], size entries
  int64_t pad = kPad;              // the id decode() skips; -1 for the byte vocabulary, which has none
  const std::string& name(int64_t id) const;  // checked
  // Names joined by `sep`, e.g. decode({1, 5, 3, 2}) == "<bos> 2 0 <eos>"; `pad` and -100 are skipped.
  std::string decode(const std::vector<int64_t>& ids, const std::string& sep = " ") const;
};

// The training stream, or a disjoint stream for evaluation (held-out sequences / the val split).
enum class Split { Train, HeldOut };

// One batch. Shapes: B batch, t1 source length, t2 target length, T decoder-only length (each the
// longest sequence of the batch). Only one layout's tensors are defined; the others stay undefined.
struct Batch {
  // encoder-decoder: model(src, tgt_in, src_padding_mask, tgt_padding_mask) → logits (B, t2, V),
  // loss = cross_entropy(logits, tgt_out)
  Tensor src;               // int64 (B, t1)  the input sequence, PAD on the right
  Tensor tgt_in;            // int64 (B, t2)  BOS + target, PAD on the right
  Tensor tgt_out;           // int64 (B, t2)  target + EOS, -100 on the right
  Tensor src_padding_mask;  // bool  (B, t1)  true = PAD
  Tensor tgt_padding_mask;  // bool  (B, t2)  true = PAD
  Tensor tgt_positions;     // int64 (t2)     optional: each target query's position on the source axis,
                            //                the same for every row (model.cross_alignment = "explicit")
  // decoder-only: model(tokens, padding_mask) → logits (B, T, V), loss = cross_entropy(logits, targets)
  Tensor tokens;            // int64 (B, T)   input ids
  Tensor targets;           // int64 (B, T)   the next token where a loss is taken, else -100
  Tensor padding_mask;      // bool  (B, T)   true = PAD; undefined for text (windows are never padded)

  int64_t num_targets = 0;  // targets that are not -100 (for token accuracy and tokens/s)
  bool decoder_only() const { return tokens.defined(); }
  // The same batch with every tensor on `device` (a no-op for those already there). Batches are
  // built on the host; the trainer moves each one to the model's device before the forward pass.
  Batch to(Device device) const;
};

// ------------------------------------------------------------------------------------------------
// Building blocks shared by every data source (synthetic tasks, text, music, the experiments).

// Uniform integers from Philox4x32-10 keyed by `seed`, with the counter (block, c1, c2, c3): word 0
// counts blocks, the other three name the stream. Each source builds its own counter words so that
// every row of every batch owns a private stream.
class CounterStream {
 public:
  CounterStream(uint64_t seed, uint32_t c1, uint32_t c2, uint32_t c3) : seed_(seed), counter_{{0, c1, c2, c3}} {}
  // Uniform integer in [0, n), n >= 1, from 53 random bits (bias about n / 2^53: negligible).
  int64_t below(int64_t n);
  int64_t between(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }  // inclusive

 private:
  uint64_t seed_;
  philox::Block counter_;
  philox::Block block_{};
  int used_ = 4;  // words of block_ already consumed
};
// The verification experiments' stream of one row of one batch: the counter (block, row, index low 32
// bits, stream | the split bit 31); `stream` separates the tasks (periodic_lm 2, sync 6, stretch 7).
CounterStream experiment_row_stream(uint64_t seed, uint32_t stream, Split split, int64_t index, int64_t row);
// Row `row` of batch `index` (>= 0): the counter (block, row, index low 32 bits, index high 31 bits
// | split bit), so a batch can be built alone, in any order, and its rows do not shift if the
// batch size changes. (Music uses it with a tag in place of the row.)
CounterStream row_stream(uint64_t seed, Split split, int64_t index, uint32_t row);

// The targets that are not -100 (kIgnoreIndex): a batch's num_targets.
int64_t count_targets(const std::vector<int64_t>& targets);

// Right-padded batches from unpadded rows: inputs filled with PAD, targets with -100, bool masks
// true at the padding, num_targets counted. Encoder–decoder: src, tgt_in, tgt_out (tgt_in and tgt_out
// rows of equal length); decoder-only: tokens and targets (rows of equal length).
Batch encoder_decoder_batch(const std::vector<std::vector<int64_t>>& src, const std::vector<std::vector<int64_t>>& tgt_in,
                            const std::vector<std::vector<int64_t>>& tgt_out);
Batch decoder_only_batch(const std::vector<std::vector<int64_t>>& tokens, const std::vector<std::vector<int64_t>>& targets);
// Decoder-only rows of exactly `context` positions cut from sequences: window(b) gives row b's ids (at
// most context + 1); tokens = all but its last, targets = all but its first, and a shorter window
// leaves PAD, -100 and mask true after its end (music, chorales).
Batch window_rows(int64_t rows, int64_t context, const std::function<std::vector<int64_t>(int64_t row)>& window);
// The decoder-only layout of prompt and answer rows (the synthetic tasks, train/data/length_tasks.h,
// train/data/addition_hints.h): row b is the sequence x BOS y EOS (x = prompts[b], y = answers[b]);
// tokens = all but the last, targets = all but the first with the prompt's targets (x[1..] and BOS)
// -100, so the loss is on y and EOS only. prompts and answers pair up (checked).
Batch prompt_answer_batch(const std::vector<std::vector<int64_t>>& prompts,
                          const std::vector<std::vector<int64_t>>& answers);

// ------------------------------------------------------------------------------------------------
// Synthetic tasks. For a source x of length n (n uniform in [min_len, max_len]) the target y is
//   copy      y = x
//   reverse   y[t] = x[n-1-t]
//   shift     y[t] = x[t-lag] for t >= lag, "_" for t < lag     (lag-k copy: the relative-attention probe)
//   sort      y = x sorted ascending
//   periodic  x is a random pattern of `period` symbols repeated (x[t] = x[t mod period]); y is the
//             next n symbols of the same repetition, y[t] = x[(n + t) mod period]
// and each sample becomes
//   encoder-decoder  src = x, tgt_in = BOS y, tgt_out = y EOS
//   decoder-only     sequence x BOS y EOS; tokens = all but the last, targets = all but the first,
//                    with the targets of the prompt part (x[1..] and BOS) set to -100, so the loss is
//                    on y and EOS only: tokens  x0 x1 .. x(n-1) BOS y0 .. y(n-1)
//                                       targets -100 ..  -100  y0  y1 .. EOS
//
// Three more tasks are the verification experiments' own (docs/experiments.md D2, D3 and D6), with
// their layouts and random streams, so that `relgrad train` gives the batches the experiments train on.
// f(s) is the mirror symbol (num_symbols − 1 − s, and f(EOS) = EOS), so a target never equals its source:
//   periodic_lm  decoder-only only. A pattern s[0..period) of random symbols repeated over max_len
//                positions (min_len is not used): tokens = BOS s[0] … s[max_len−2], targets[i] = s[i]
//                for i >= period, -100 before (the loss is on the repeated part only). Query i predicts
//                s[i] = s[i − period], δ* = 1 − period. 1 <= period < max_len.
//   sync         encoder-decoder only. x of n + lag symbols (n uniform in [min_len, max_len]), source =
//                x EOS, y[i] = f(x[i + lag]) for i < n: query i needs key i + lag, δ* = +lag under Left.
//   stretch      encoder-decoder only. x of n symbols, source = x EOS (t1 = n + 1), every source token
//                twice: y = f(x0) f(x0) … f(x(n−1)) f(x(n−1)) EOS, so tgt_out = y EOS has t2 = 2·t1
//                tokens and query i needs key ⌊i/2⌋ (Scaled alignment: δ* = 0).
// They draw from the experiments' counters, (block, row, index, stream | split bit) with stream 2, 6
// and 7 (experiment_row_stream), not row_stream's.
enum class TaskKind { Copy, Reverse, Shift, Sort, Periodic, PeriodicLm, Sync, Stretch };
enum class Layout { EncoderDecoder, DecoderOnly };
// "copy", "reverse", "shift", "sort", "periodic", "periodic_lm", "sync", "stretch" / "encoder-decoder",
// "decoder-only" (data.task and model.type: train/config/config.cpp); both ways.
inline constexpr NameTable<TaskKind, 8> kTaskKindNames{
    {{TaskKind::Copy, "copy"}, {TaskKind::Reverse, "reverse"}, {TaskKind::Shift, "shift"}, {TaskKind::Sort, "sort"},
     {TaskKind::Periodic, "periodic"}, {TaskKind::PeriodicLm, "periodic_lm"}, {TaskKind::Sync, "sync"},
     {TaskKind::Stretch, "stretch"}}};
inline constexpr NameTable<Layout, 2> kLayoutNames{
    {{Layout::EncoderDecoder, "encoder-decoder"}, {Layout::DecoderOnly, "decoder-only"}}};
const char* to_string(TaskKind kind);
const char* to_string(Layout layout);
TaskKind task_kind_from_string(const std::string& name);  // error lists the valid names
Layout layout_from_string(const std::string& name);

struct TaskConfig {
  TaskKind kind = TaskKind::Copy;
  Layout layout = Layout::EncoderDecoder;
  int64_t num_symbols = 10;  // alphabet of x: ids kFirstSymbol .. kFirstSymbol + num_symbols - 1
  int64_t min_len = 4;       // source length n, uniform in [min_len, max_len] per sample
  int64_t max_len = 16;
  int64_t batch_size = 32;
  int64_t lag = 1;           // shift: 1 <= lag < min_len, so every output copies something;
                             // sync: lag >= 0
  int64_t period = 3;        // periodic: 2 <= period <= min_len, so x shows a whole period;
                             // periodic_lm: 1 <= period < max_len
  uint64_t seed = 0;
};

class SyntheticTask {
 public:
  explicit SyntheticTask(const TaskConfig& config);  // checks the parameters

  // Batch number `index` (>= 0) of the stream; a pure function of (config, split, index).
  Batch batch(int64_t index, Split split = Split::Train) const;
  Batch held_out(int64_t index) const { return batch(index, Split::HeldOut); }

  // One sample without padding: the source x and the target y (no BOS / EOS).
  struct Sample { std::vector<int64_t> source, target; };
  Sample sample(int64_t index, int64_t row, Split split = Split::Train) const;  // row of batch `index`
  // Held-out example n, as the samples after training and `relgrad sample` show it: row
  // n % batch_size of held-out batch n / batch_size; for periodic_lm the source is the pattern's first
  // period and the target the rest of it (what a continuation should repeat).
  Sample held_out_case(int64_t n) const;

  const TaskConfig& config() const { return config_; }
  const Vocab& vocab() const { return vocab_; }
  int64_t filler() const { return kFirstSymbol + config_.num_symbols; }  // shift's "_" (shift only)
  // The longest sequence a batch can hold: t1 = t2 - 1 = max_len, or T = 2 * max_len + 1 (periodic_lm:
  // max_len; sync: t1 = max_len + lag + 1; stretch: t2 = 2 * max_len + 2); what the model's max_len
  // (learned positions, relative-bias buckets) must cover.
  int64_t max_sequence_length() const { return synthetic_max_sequence_length(config_); }
  static int64_t synthetic_max_sequence_length(const TaskConfig& config);

 private:
  TaskConfig config_;
  Vocab vocab_;
};

// ------------------------------------------------------------------------------------------------
// Byte-level text for a decoder-only LM (nanoGPT's shakespeare_char, but over raw bytes: the
// vocabulary is exactly the 256 byte values, id = byte, so any file works, UTF-8 included, and no
// vocabulary file is needed). There are no PAD/BOS/EOS ids here: every window is a full run of
// text, so no padding is ever needed. The file is split contiguously: the first
// (1 - val_fraction) of the bytes train, the rest validate (a random split would leak neighbouring
// text into validation).
inline constexpr uint64_t kTextFileMaxBytes = uint64_t(1) << 30;  // 1 GiB: TextDataset's limit

// Bytes a byte-level model produced, made safe to print on a terminal: valid UTF-8 text, newlines and
// tabs stay as they are; every other control byte (C0, DEL, and the C1 characters U+0080..U+009F),
// every byte of invalid or cut-off UTF-8 becomes "\xNN" (two lowercase hex digits, as the vocabulary
// names them), and a backslash becomes "\\", so the escapes cannot be confused with the text.
std::string printable_text(const std::string& bytes);

class TextDataset {
 public:
  // Errors: missing/unreadable file, empty file, val_fraction outside [0, 1), or a split of fewer
  // than 2 bytes (one input and one target). `path` must name a regular file (a FIFO, device or
  // directory is refused before anything is read: it could block forever or never end) of at most
  // kTextFileMaxBytes (checked from its size before reading; larger corpora: `relgrad tokenize`).
  TextDataset(const std::string& path, double val_fraction = 0.1, uint64_t seed = 0);

  // B windows of context + 1 bytes at random offsets (counter-based, as the synthetic tasks):
  // tokens = window[0, context), targets = window[1, context]. Error if the split is shorter than
  // context + 1 bytes.
  Batch batch(int64_t index, int64_t batch_size, int64_t context, Split split = Split::Train) const;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  int64_t train_size() const { return train_size_; }
  int64_t val_size() const { return size() - train_size_; }
  const std::string& bytes() const { return bytes_; }
  // FNV-1a 64 of the file's bytes: lets a checkpoint tell that it is resumed on the same data.
  uint64_t checksum() const;
  static Vocab vocab();  // 256 entries: printable ASCII as itself, others as "\n", "\t", "\xNN"

 private:
  std::string path_;
  std::string bytes_;
  int64_t train_size_ = 0;
  uint64_t seed_ = 0;
};

// ------------------------------------------------------------------------------------------------
// The ids of a token data file (train/data/token_file.h; `relgrad tokenize` makes one from any file's
// bytes) for a decoder-only LM whose vocabulary is the file's vocab_size. Split, windows and random
// streams are exactly TextDataset's, so the token file of a text's bytes gives the same batches as
// data.source = "text" on that text.
class TokenDataset {
 public:
  // Errors: whatever read_token_file refuses, val_fraction outside [0, 1), a split of fewer than 2
  // tokens, and vocab_size above kMaxTokenVocab.
  TokenDataset(const std::string& path, double val_fraction = 0.1, uint64_t seed = 0);

  // TextDataset::batch over the ids (error if the split is shorter than context + 1 tokens).
  Batch batch(int64_t index, int64_t batch_size, int64_t context, Split split = Split::Train) const;

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t train_size() const { return train_size_; }
  int64_t val_size() const { return size() - train_size_; }
  int64_t vocab_size() const { return vocab_size_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // FNV-1a 64 of the ids as 4-byte little-endian integers, and of the vocab_size (as a checkpoint's
  // data_checksum: a resume on other data is refused).
  uint64_t checksum() const;
  Vocab vocab() const;  // the ids by number: names "0", "1", ...; no padding id
  static Vocab ids_vocab(int64_t vocab_size);  // that vocabulary for any size (a checkpoint's, unread file)
  // The prompt of its samples (after training, and `relgrad sample` without --input): the first (up
  // to 32) ids of the validation split, of the training split when there is none (`*validation` says which).
  std::vector<int64_t> sample_prompt(bool* validation = nullptr) const;

  // Larger vocabularies are refused (the names alone would take gigabytes; so would the embedding).
  static constexpr int64_t kMaxTokenVocab = int64_t(1) << 22;

 private:
  std::string path_;
  std::vector<int32_t> tokens_;
  int64_t vocab_size_ = 0;
  int64_t train_size_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace relgrad
