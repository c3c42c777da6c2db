// What the trainer needs from training data, whatever its source: batch n of a split as a pure
// function of (seed, n) (train/data/data.h explains the counters), the vocabulary, an optional checksum
// of the file read (so a resume on other data is refused), and the samples printed after training.
// Synthetic tasks, text and token files implement it here; music in train/music/music.h. Which
// source a run uses is decided once, above the trainer (its entry in train/config/source.h).
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "train/data/data.h"

namespace relgrad {

// The trained model as a Dataset's samples see it (the trainer implements it with the sampler).
class SampleModel {
 public:
  virtual ~SampleModel() = default;
  // Greedy answer to a synthetic source, EOS included if produced: the encoder–decoder reads
  // `source`, the decoder-only model continues `source BOS`; only the new tokens come back.
  virtual std::vector<int64_t> answer(const std::vector<int64_t>& source, int64_t max_new_tokens) = 0;
  // A decoder-only model continuing `prompt` with the run's sampling options (stop_at_eos false:
  // no stop token); the prompt and its continuation come back.
  virtual std::vector<int64_t> continue_prompt(const std::vector<int64_t>& prompt, bool stop_at_eos) = 0;
};

// One example of a prompt–answer task: what the model reads and the answer wanted (no BOS / EOS).
struct PromptAnswer {
  std::vector<int64_t> input, target;
};
// The decoder-only batch of `rows` prompt–answer examples (row b = example(b); the layout of
// prompt_answer_batch, train/data/data.h: x BOS y EOS, the loss on y and EOS).
Batch prompt_answer_rows(int64_t rows, const std::function<PromptAnswer(int64_t row)>& example);
// The greedy samples every prompt–answer source prints (synthetic tasks, length tasks, addition,
// position tasks): "greedy samples on held-out WHAT:", then for rows 0 … n − 1 of `example` the input,
// the target and the model's answer (its EOS dropped) marked "(exact)" or "(differs)", then "k/n exact".
void print_greedy_samples(SampleModel& model, const Vocab& vocab, const std::string& what, int64_t n,
                          const std::function<PromptAnswer(int64_t row)>& example, std::ostream& out);

// A file the data skipped while it was opened (a MIDI folder's unreadable file), and why.
struct SkippedFile {
  std::string path, error;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Batch `index` (>= 0) of `split`; a pure function of (seed, split, index).
  virtual Batch batch(int64_t index, Split split) const = 0;
  virtual const Vocab& vocab() const = 0;
  virtual int64_t batch_size() const = 0;  // rows of every batch (data parallelism shards them)
  // FNV-1a 64 of the file the data came from (checkpoint extra "data_checksum"); none for generated data.
  virtual std::optional<uint64_t> checksum() const { return std::nullopt; }
  virtual std::string path() const { return ""; }  // the file the checksum is of, for messages
  // Prints (and for music writes into `out_dir`) up to `count` samples of `model` after training.
  virtual void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const = 0;
  // Whether a batch row is one whole example (a synthetic task's sequence), so that rows all right
  // count as sequences right (EvalResult); a language model's windows are cut anywhere.
  virtual bool rows_are_examples() const { return false; }
  virtual const std::vector<SkippedFile>& skipped_files() const;  // none by default
};

// A synthetic task (batches hold the task's batch_size rows); samples: greedy answers to held-out sources.
class SyntheticData : public Dataset {
 public:
  explicit SyntheticData(const TaskConfig& config) : task_(config) {}
  Batch batch(int64_t index, Split split) const override { return task_.batch(index, split); }
  const Vocab& vocab() const override { return task_.vocab(); }
  int64_t batch_size() const override { return task_.config().batch_size; }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override;
  bool rows_are_examples() const override { return true; }
  const SyntheticTask& task() const { return task_; }

 private:
  SyntheticTask task_;
};

// Byte-level text in windows of `context`; samples: a continuation of the validation text's start.
class TextData : public Dataset {
 public:
  TextData(const std::string& path, double val_fraction, uint64_t seed, int64_t batch_size, int64_t context)
      : text_(path, val_fraction, seed), vocab_(TextDataset::vocab()), batch_size_(batch_size), context_(context) {}
  Batch batch(int64_t index, Split split) const override { return text_.batch(index, batch_size_, context_, split); }
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return batch_size_; }
  std::optional<uint64_t> checksum() const override { return text_.checksum(); }
  std::string path() const override { return text_.path(); }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override;
  const TextDataset& text() const { return text_; }

 private:
  TextDataset text_;
  Vocab vocab_;
  int64_t batch_size_, context_;
};

// The ids of a token data file in windows of `context`; samples: a continuation of the validation ids' start.
class TokenData : public Dataset {
 public:
  TokenData(const std::string& path, double val_fraction, uint64_t seed, int64_t batch_size, int64_t context)
      : tokens_(path, val_fraction, seed), vocab_(tokens_.vocab()), batch_size_(batch_size), context_(context) {}
  Batch batch(int64_t index, Split split) const override { return tokens_.batch(index, batch_size_, context_, split); }
  const Vocab& vocab() const override { return vocab_; }
  int64_t batch_size() const override { return batch_size_; }
  std::optional<uint64_t> checksum() const override { return tokens_.checksum(); }
  std::string path() const override { return tokens_.path(); }
  void print_samples(SampleModel& model, int64_t count, const std::string& out_dir, std::ostream& out) const override;
  const TokenDataset& tokens() const { return tokens_; }

 private:
  TokenDataset tokens_;
  Vocab vocab_;
  int64_t batch_size_, context_;
};

}  // namespace relgrad
