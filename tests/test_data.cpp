// Data (train/data/data.h): every synthetic task's sequences are checked against its rule on many
// samples, read back from the batch tensors; batches are pure functions of (seed, index); masks and
// -100 targets sit exactly where padding and prompts are; the text dataset splits, windows and errors.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "layers/models.h"
#include "testing.h"
#include "train/data/data.h"

using namespace relgrad;
using relgrad::testing::check_throws_with;

namespace {

const TaskKind kAllKinds[] = {TaskKind::Copy, TaskKind::Reverse, TaskKind::Shift, TaskKind::Sort, TaskKind::Periodic};

TaskConfig config_for(TaskKind kind, Layout layout = Layout::EncoderDecoder) {
  TaskConfig c;
  c.kind = kind;
  c.layout = layout;
  c.num_symbols = 7;
  c.min_len = 4;
  c.max_len = 12;
  c.batch_size = 16;
  c.lag = 2;
  c.period = 3;
  c.seed = 42;
  return c;
}

// Row b of an int64 (B, L) tensor.
std::vector<int64_t> row(const Tensor& t, int64_t b) { return t.select(0, b).contiguous().to_vector<int64_t>(); }
std::vector<bool> mask_row(const Tensor& t, int64_t b) { return t.select(0, b).contiguous().to_vector<bool>(); }

// The first `n` entries of v.
std::vector<int64_t> head(const std::vector<int64_t>& v, int64_t n) { return {v.begin(), v.begin() + n}; }

// Checks y against the task's rule for source x.
void check_rule(const SyntheticTask& task, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  const TaskConfig& c = task.config();
  const int64_t n = static_cast<int64_t>(x.size());
  REQUIRE(static_cast<int64_t>(y.size()) == n);
  CHECK(n >= c.min_len);
  CHECK(n <= c.max_len);
  for (int64_t v : x) {
    CHECK(v >= kFirstSymbol);
    CHECK(v < kFirstSymbol + c.num_symbols);
  }
  switch (c.kind) {
    case TaskKind::Copy: CHECK(y == x); break;
    case TaskKind::Reverse:
      for (int64_t t = 0; t < n; ++t) CHECK(y[t] == x[n - 1 - t]);
      break;
    case TaskKind::Shift:
      for (int64_t t = 0; t < n; ++t) CHECK(y[t] == (t < c.lag ? task.filler() : x[t - c.lag]));
      break;
    case TaskKind::Sort: {
      CHECK(std::is_sorted(y.begin(), y.end()));
      std::vector<int64_t> xs = x, ys = y;  // a permutation of x
      std::sort(xs.begin(), xs.end());
      CHECK(xs == ys);
      break;
    }
    case TaskKind::Periodic:
      for (int64_t t = c.period; t < n; ++t) CHECK(x[t] == x[t - c.period]);
      for (int64_t t = 0; t < n; ++t) CHECK(y[t] == x[(n + t) % c.period]);
      break;
    case TaskKind::PeriodicLm:
    case TaskKind::Sync:
    case TaskKind::Stretch:  // not in kAllKinds: with no rule here, a caller passing one must fail, not pass
      FAIL_CHECK("check_rule has no rule for task kind " << to_string(c.kind));
      break;
  }
}

// A file with the given contents, removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& contents) {
    path = (std::filesystem::temp_directory_path() / ("relgrad_test_data_" + std::to_string(getpid()) + "_" +
                                                       std::to_string(counter()++) + ".txt")).string();
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~TempFile() { std::filesystem::remove(path); }
  static int& counter() { static int c = 0; return c; }
};

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<int64_t>() == b.to_vector<int64_t>();
}

}  // namespace

TEST_CASE("data: token conventions and vocabularies") {
  CHECK(kPad == 0);
  CHECK(kBos == 1);
  CHECK(kEos == 2);
  CHECK(kFirstSymbol == 3);
  SyntheticTask copy(config_for(TaskKind::Copy));
  CHECK(copy.vocab().size == 3 + 7);
  CHECK(copy.vocab().name(kBos) == "<bos>");
  CHECK(copy.vocab().name(kFirstSymbol + 6) == "6");
  SyntheticTask shift(config_for(TaskKind::Shift));
  CHECK(shift.vocab().size == 3 + 7 + 1);
  CHECK(shift.vocab().name(shift.filler()) == "_");
  CHECK(shift.vocab().decode({kBos, 5, 3, kEos, kPad, kIgnoreIndex}) == "<bos> 2 0 <eos>");
  check_throws_with([&] { copy.vocab().name(10); }, "[Vocab] token id 10 is outside the vocabulary of 10");
  for (TaskKind k : kAllKinds) CHECK(task_kind_from_string(to_string(k)) == k);
  CHECK(layout_from_string("decoder-only") == Layout::DecoderOnly);
  CHECK(layout_from_string(to_string(Layout::EncoderDecoder)) == Layout::EncoderDecoder);
}

TEST_CASE("data: encoder-decoder batches follow each task's rule, with padding and masks") {
  for (TaskKind kind : kAllKinds) {
    CAPTURE(to_string(kind));
    SyntheticTask task(config_for(kind));
    std::vector<int64_t> lengths_seen;
    for (int64_t index = 0; index < 25; ++index) {
      Batch batch = task.batch(index);
      CHECK_FALSE(batch.decoder_only());
      const int64_t B = 16, t1 = batch.src.size(1), t2 = batch.tgt_in.size(1);
      REQUIRE(batch.src.shape() == Shape{B, t1});
      REQUIRE(batch.src_padding_mask.shape() == Shape{B, t1});
      REQUIRE(batch.tgt_out.shape() == Shape{B, t2});
      REQUIRE(batch.tgt_padding_mask.shape() == Shape{B, t2});
      CHECK(batch.src.dtype() == kInt64);
      CHECK(batch.tgt_out.dtype() == kInt64);
      CHECK(batch.src_padding_mask.dtype() == kBool);
      CHECK(t2 == t1 + 1);  // targets are as long as sources here, plus BOS / EOS
      int64_t longest = 0, targets = 0;
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> src = row(batch.src, b), in = row(batch.tgt_in, b), out = row(batch.tgt_out, b);
        std::vector<bool> src_mask = mask_row(batch.src_padding_mask, b), tgt_mask = mask_row(batch.tgt_padding_mask, b);
        const int64_t n = std::find(src.begin(), src.end(), kPad) - src.begin();
        longest = std::max(longest, n);
        lengths_seen.push_back(n);
        // masks are true exactly on the right padding
        for (int64_t t = 0; t < t1; ++t) CHECK(src_mask[t] == (t >= n));
        for (int64_t t = n; t < t1; ++t) CHECK(src[t] == kPad);
        for (int64_t t = 0; t < t2; ++t) {
          CHECK(tgt_mask[t] == (t > n));
          if (t > n) { CHECK(in[t] == kPad); CHECK(out[t] == kIgnoreIndex); }
        }
        // tgt_in = BOS y, tgt_out = y EOS
        std::vector<int64_t> y(out.begin(), out.begin() + n);
        CHECK(in[0] == kBos);
        CHECK(std::equal(y.begin(), y.end(), in.begin() + 1));
        CHECK(out[n] == kEos);
        check_rule(task, head(src, n), y);
        // sample() gives the same sequences unpadded
        SyntheticTask::Sample s = task.sample(index, b);
        CHECK(s.source == head(src, n));
        CHECK(s.target == y);
        targets += n + 1;
      }
      CHECK(longest == t1);  // padded to the batch's longest, not to max_len
      CHECK(batch.num_targets == targets);
    }
    // lengths vary over the whole range
    CHECK(*std::min_element(lengths_seen.begin(), lengths_seen.end()) == 4);
    CHECK(*std::max_element(lengths_seen.begin(), lengths_seen.end()) == 12);
  }
}

TEST_CASE("data: decoder-only batches are x BOS y EOS with the loss on y and EOS only") {
  for (TaskKind kind : kAllKinds) {
    CAPTURE(to_string(kind));
    SyntheticTask task(config_for(kind, Layout::DecoderOnly));
    for (int64_t index = 0; index < 25; ++index) {
      Batch batch = task.batch(index);
      CHECK(batch.decoder_only());
      CHECK_FALSE(batch.src.defined());
      const int64_t B = 16, T = batch.tokens.size(1);
      REQUIRE(batch.targets.shape() == Shape{B, T});
      REQUIRE(batch.padding_mask.shape() == Shape{B, T});
      CHECK(T <= task.max_sequence_length());
      int64_t targets = 0;
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> tok = row(batch.tokens, b), tgt = row(batch.targets, b);
        std::vector<bool> mask = mask_row(batch.padding_mask, b);
        const int64_t n = std::find(tok.begin(), tok.end(), kBos) - tok.begin();
        REQUIRE(n < T);
        const int64_t length = 2 * n + 1;  // x (n), BOS, y (n)
        std::vector<int64_t> x = head(tok, n), y(tok.begin() + n + 1, tok.begin() + length);
        check_rule(task, x, y);
        for (int64_t t = 0; t < T; ++t) {
          CHECK(mask[t] == (t >= length));
          if (t < n) CHECK(tgt[t] == kIgnoreIndex);                // the prompt carries no loss
          else if (t < length - 1) CHECK(tgt[t] == tok[t + 1]);  // next token: y0 .. y(n-1)
          else if (t == length - 1) CHECK(tgt[t] == kEos);
          else { CHECK(tok[t] == kPad); CHECK(tgt[t] == kIgnoreIndex); }
        }
        targets += n + 1;
      }
      CHECK(batch.num_targets == targets);
    }
  }
}

TEST_CASE("data: a batch is a pure function of (seed, index)") {
  for (Layout layout : {Layout::EncoderDecoder, Layout::DecoderOnly}) {
    TaskConfig c = config_for(TaskKind::Reverse, layout);
    SyntheticTask a(c), b(c);
    Batch late = a.batch(7);  // before index 3: order must not matter
    Batch b3 = b.batch(3), a3 = a.batch(3), a7 = b.batch(7);
    const Tensor& first = layout == Layout::EncoderDecoder ? a3.src : a3.tokens;
    const Tensor& second = layout == Layout::EncoderDecoder ? b3.src : b3.tokens;
    CHECK(same_values(first, second));
    CHECK(same_values(late.decoder_only() ? late.targets : late.tgt_out, a7.decoder_only() ? a7.targets : a7.tgt_out));
    CHECK_FALSE(same_values(first, layout == Layout::EncoderDecoder ? late.src : late.tokens));
    c.seed = 43;
    Batch other_seed = SyntheticTask(c).batch(3);
    CHECK_FALSE(same_values(first, layout == Layout::EncoderDecoder ? other_seed.src : other_seed.tokens));
  }
  // Rows do not depend on batch_size: row r of batch i is the same sample in a larger batch.
  TaskConfig small = config_for(TaskKind::Copy), large = small;
  large.batch_size = 64;
  CHECK(SyntheticTask(small).sample(5, 3).source == SyntheticTask(large).sample(5, 3).source);
  // Neighbouring batches differ everywhere one looks: no two of the first 50 are equal.
  SyntheticTask task(config_for(TaskKind::Sort));
  std::vector<std::vector<int64_t>> seen;
  for (int64_t i = 0; i < 50; ++i) seen.push_back(task.batch(i).src.to_vector<int64_t>());
  std::sort(seen.begin(), seen.end());
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
}

TEST_CASE("data: the held-out stream is disjoint from training and deterministic too") {
  TaskConfig c = config_for(TaskKind::Copy);
  c.num_symbols = 10;
  c.min_len = c.max_len = 12;  // 10^12 possible sources: a repeat by chance is ~1e-6 likely
  SyntheticTask task(c);
  std::vector<std::vector<int64_t>> train, held;
  for (int64_t i = 0; i < 20; ++i) {
    for (int64_t b = 0; b < c.batch_size; ++b) {
      train.push_back(task.sample(i, b).source);
      held.push_back(task.sample(i, b, Split::HeldOut).source);
    }
    CHECK(same_values(task.held_out(i).src, task.batch(i, Split::HeldOut).src));
    CHECK(same_values(task.held_out(i).src, SyntheticTask(c).held_out(i).src));
    CHECK_FALSE(same_values(task.held_out(i).src, task.batch(i).src));
  }
  std::sort(train.begin(), train.end());
  int64_t shared = 0;
  for (const auto& h : held) shared += std::binary_search(train.begin(), train.end(), h);
  CHECK(shared == 0);
}

TEST_CASE("data: bad task parameters are errors that name the parameter") {
  auto make = [](TaskConfig c) { return [c] { SyntheticTask task(c); }; };
  TaskConfig c = config_for(TaskKind::Copy);
  c.num_symbols = 1;
  check_throws_with(make(c), "[SyntheticTask] copy: num_symbols must be at least 2, got 1");
  c = config_for(TaskKind::Reverse);
  c.min_len = 9;
  c.max_len = 5;
  check_throws_with(make(c), "[SyntheticTask] reverse: need 1 <= min_len <= max_len, got min_len 9 and max_len 5");
  c = config_for(TaskKind::Copy);
  c.min_len = 0;
  check_throws_with(make(c), "need 1 <= min_len <= max_len");
  c = config_for(TaskKind::Sort);
  c.batch_size = 0;
  check_throws_with(make(c), "[SyntheticTask] sort: batch_size must be positive, got 0");
  c = config_for(TaskKind::Shift);
  c.lag = 4;  // == min_len
  check_throws_with(make(c), "[SyntheticTask] shift: need 1 <= lag < min_len");
  c.lag = 0;
  check_throws_with(make(c), "got lag 0 and min_len 4");
  c = config_for(TaskKind::Periodic);
  c.period = 5;  // > min_len
  check_throws_with(make(c), "[SyntheticTask] periodic: need 2 <= period <= min_len");
  c.period = 1;
  check_throws_with(make(c), "got period 1 and min_len 4");
  // parameters of other tasks are not checked: lag is irrelevant to copy
  c = config_for(TaskKind::Copy);
  c.lag = 100;
  CHECK_NOTHROW(SyntheticTask{c});
  SyntheticTask task(config_for(TaskKind::Copy));
  check_throws_with([&] { task.batch(-1); }, "[SyntheticTask] batch index must be >= 0, got -1");
  check_throws_with([&] { task.sample(0, 16); }, "[SyntheticTask] row 16 is outside a batch of 16");
  check_throws_with([] { task_kind_from_string("rot13"); },
                    "[SyntheticTask] unknown task 'rot13' (expected copy, reverse, shift, sort, periodic, "
                    "periodic_lm, sync or stretch)");
  check_throws_with([] { layout_from_string("encoder"); }, "[SyntheticTask] unknown layout 'encoder'");
}

TEST_CASE("data: batches feed the models and give a finite loss") {
  TransformerConfig mc;
  mc.d_model = 16;
  mc.n_heads = 2;
  mc.d_ff = 32;
  mc.n_encoder_layers = 1;
  mc.n_decoder_layers = 1;
  mc.dropout = 0.0;
  {
    SyntheticTask task(config_for(TaskKind::Reverse));
    mc.vocab_size = task.vocab().size;
    Generator init(1);
    EncoderDecoder model(mc, &init);
    Batch b = task.batch(0);
    Tensor logits = model(b.src, b.tgt_in, b.src_padding_mask, b.tgt_padding_mask);
    CHECK(logits.shape() == Shape{16, b.tgt_in.size(1), task.vocab().size});
    double loss = cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten()).item();
    CHECK(std::isfinite(loss));
  }
  {
    SyntheticTask task(config_for(TaskKind::Shift, Layout::DecoderOnly));
    mc.vocab_size = task.vocab().size;
    Generator init(1);
    DecoderLM model(mc, &init);
    Batch b = task.batch(0);
    Tensor logits = model(b.tokens, b.padding_mask);
    double loss = cross_entropy(logits.flatten(0, 1), b.targets.flatten()).item();
    CHECK(std::isfinite(loss));
  }
}

TEST_CASE("data: TextDataset splits contiguously and draws windows inside each split") {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + ": the quick brown fox\n";
  TempFile file(text);
  TextDataset data(file.path, 0.1, 7);
  const int64_t n = static_cast<int64_t>(text.size());
  CHECK(data.size() == n);
  CHECK(data.val_size() == static_cast<int64_t>(n * 0.1 + 0.5));
  CHECK(data.train_size() + data.val_size() == n);
  CHECK(data.bytes() == text);
  CHECK(TextDataset::vocab().size == 256);
  CHECK(TextDataset::vocab().decode({'h', 'i', '\n', 0}, "") == "hi\\n\\x00");

  const std::string train_part = text.substr(0, data.train_size()), val_part = text.substr(data.train_size());
  for (Split split : {Split::Train, Split::HeldOut}) {
    const std::string& part = split == Split::Train ? train_part : val_part;
    for (int64_t index = 0; index < 10; ++index) {
      Batch b = data.batch(index, 8, 32, split);
      REQUIRE(b.tokens.shape() == Shape{8, 32});
      REQUIRE(b.targets.shape() == Shape{8, 32});
      CHECK(b.decoder_only());
      CHECK_FALSE(b.padding_mask.defined());
      CHECK(b.num_targets == 8 * 32);
      for (int64_t r = 0; r < 8; ++r) {
        std::vector<int64_t> tok = row(b.tokens, r), tgt = row(b.targets, r);
        std::string window(tok.begin(), tok.end());
        window.push_back(static_cast<char>(tgt.back()));
        CHECK(std::equal(tok.begin() + 1, tok.end(), tgt.begin()));  // targets = tokens shifted by one
        CHECK(part.find(window) != std::string::npos);                // a real window of this split
      }
    }
  }
  // pure function of (seed, index); the val stream differs from the train stream
  CHECK(same_values(data.batch(3, 4, 16).tokens, TextDataset(file.path, 0.1, 7).batch(3, 4, 16).tokens));
  CHECK_FALSE(same_values(data.batch(3, 4, 16).tokens, data.batch(4, 4, 16).tokens));
  CHECK_FALSE(same_values(data.batch(3, 4, 16).tokens, TextDataset(file.path, 0.1, 8).batch(3, 4, 16).tokens));
  // a window may end on the split's last byte: context = split size - 1 leaves exactly one offset
  Batch whole = data.batch(0, 2, data.val_size() - 1, Split::HeldOut);
  std::vector<int64_t> only = row(whole.tokens, 1);
  CHECK(std::string(only.begin(), only.end()) == val_part.substr(0, val_part.size() - 1));
  // no validation split at all
  TextDataset all(file.path, 0.0);
  CHECK(all.train_size() == n);
  CHECK(all.val_size() == 0);
  // the checksum tells files apart
  TempFile other(text + "!");
  CHECK(data.checksum() == TextDataset(file.path, 0.5).checksum());
  CHECK(data.checksum() != TextDataset(other.path).checksum());
}

TEST_CASE("data: TextDataset errors name the file and the problem") {
  const std::string missing = "/nonexistent/relgrad/corpus.txt";
  check_throws_with([&] { TextDataset d(missing); },
                    "[TextDataset] cannot open '/nonexistent/relgrad/corpus.txt': No such file or directory");
  TempFile empty("");
  check_throws_with([&] { TextDataset d(empty.path); }, "' is empty");
  TempFile tiny("abc");
  check_throws_with([&] { TextDataset d(tiny.path, 0.5); }, "which leaves 1 for training; need at least 2");
  TempFile small("0123456789");
  check_throws_with([&] { TextDataset d(small.path, 0.1); }, "which leaves 1 for validation at val_fraction 0.1");
  check_throws_with([&] { TextDataset d(small.path, 1.0); }, "[TextDataset] val_fraction must be in [0, 1), got 1");
  check_throws_with([&] { TextDataset d(small.path, -0.1); }, "val_fraction must be in [0, 1)");
  TextDataset data(small.path, 0.2);  // 8 train bytes, 2 val bytes
  check_throws_with([&] { data.batch(0, 2, 8); }, "[TextDataset] context 8 needs 9 bytes but the train split of '");
  check_throws_with([&] { data.batch(0, 2, 2, Split::HeldOut); }, "but the validation split of '");
  CHECK_NOTHROW(data.batch(0, 2, 7));
  check_throws_with([&] { data.batch(0, 0, 4); }, "batch_size and context must be positive, got 0 and 4");
  check_throws_with([&] { data.batch(-2, 1, 4); }, "[TextDataset] batch index must be >= 0, got -2");
}
