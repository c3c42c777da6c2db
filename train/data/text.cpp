// Byte-level text and token files as windows of a contiguous train/validation split (train/data/data.h).
#include "train/data/data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/base/error.h"
#include "core/file_io.h"
#include "train/data/token_file.h"

namespace relgrad {

namespace {

// The training part of a contiguous split of n units (bytes or tokens): the first (1 - val_fraction),
// with both parts long enough for one input and one target (the validation part may be empty).
int64_t split_train_size(int64_t n, double val_fraction, const char* who, const std::string& path, const char* unit) {
  const int64_t val = static_cast<int64_t>(static_cast<double>(n) * val_fraction + 0.5);
  const int64_t train = n - val;
  RG_CHECK(train >= 2, who, "'", path, "' has ", n, " ", unit, ", which leaves ", train,
           " for training; need at least 2 (one input, one target)");
  RG_CHECK(val_fraction == 0.0 || val >= 2, who, "'", path, "' has ", n, " ", unit, ", which leaves ", val,
           " for validation at val_fraction ", val_fraction, "; need at least 2 (or val_fraction 0)");
  return train;
}

// B windows of context + 1 ids at random offsets of a split (counter-based: row b of batch `index`
// uses row_stream(seed, split, index, b)): tokens = window[0, context), targets = window[1, context].
// id_at(i) is the id at position i of the whole sequence; the split is [begin, begin + length).
template <class IdAt>
Batch window_batch(uint64_t seed, Split split, int64_t index, int64_t batch_size, int64_t context, int64_t begin,
                   int64_t length, const char* who, const std::string& path, const char* unit, IdAt id_at) {
  RG_CHECK(index >= 0, who, "batch index must be >= 0, got ", index);
  RG_CHECK(batch_size >= 1 && context >= 1, who, "batch_size and context must be positive, got ", batch_size,
           " and ", context);
  RG_CHECK(length >= context + 1, who, "context ", context, " needs ", context + 1, " ", unit, " but the ",
           split == Split::Train ? "train" : "validation", " split of '", path, "' has ", length);
  const int64_t windows = length - context;  // valid start offsets: [0, length - context)
  std::vector<int64_t> tokens(batch_size * context), targets(batch_size * context);
  for (int64_t b = 0; b < batch_size; ++b) {
    CounterStream rng = row_stream(seed, split, index, static_cast<uint32_t>(b));
    const int64_t start = begin + rng.below(windows);
    for (int64_t t = 0; t < context; ++t) {
      tokens[b * context + t] = id_at(start + t);
      targets[b * context + t] = id_at(start + t + 1);
    }
  }
  Batch batch;
  batch.tokens = from_vector<int64_t>(tokens, {batch_size, context}, kInt64);
  batch.targets = from_vector<int64_t>(targets, {batch_size, context}, kInt64);
  batch.num_targets = batch_size * context;
  return batch;
}

// "\xNN", two lowercase hex digits: how the byte vocabulary names a byte and printable_text escapes it.
std::string byte_escape(unsigned char c) {
  static const char* hex = "0123456789abcdef";
  return std::string("\\x") + hex[c >> 4] + hex[c & 15];
}

// The whole of a regular file of at most kTextFileMaxBytes. O_NONBLOCK: opening a FIFO would
// otherwise wait for a writer; it is refused by its fstat (the file opened, not a name looked up
// again), as are devices (/dev/zero never ends) and directories, before a byte is read.
std::string read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  RG_CHECK(fd >= 0, "TextDataset", "cannot open '", path, "': ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  RG_CHECK(::fstat(fd, &st) == 0, "TextDataset", path, ": cannot stat: ", std::strerror(errno));
  RG_CHECK(S_ISREG(st.st_mode), "TextDataset", path, ": is ", file_kind(st.st_mode),
           ", not a regular file (data.text_path must name a file)");
  const auto size = static_cast<uint64_t>(st.st_size);
  RG_CHECK(size <= kTextFileMaxBytes, "TextDataset", path, ": file has ", size,
           " bytes, more than the limit of ", kTextFileMaxBytes,
           " (1 GiB) for data.text_path; a larger corpus trains as a token file "
           "(relgrad tokenize)");
  std::string bytes(static_cast<size_t>(size), '\0');
  uint64_t done = 0;
  while (done < size) {
    const auto chunk = static_cast<size_t>(std::min<uint64_t>(size - done, 1u << 30));
    ssize_t got = ::pread(fd, bytes.data() + done, chunk, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    RG_CHECK(got >= 0, "TextDataset", path, ": read failed: ", std::strerror(errno));
    if (got == 0) break;  // the file shrank while being read: keep what is there
    done += static_cast<uint64_t>(got);
  }
  bytes.resize(static_cast<size_t>(done));
  return bytes;
}

}  // namespace

TextDataset::TextDataset(const std::string& path, double val_fraction, uint64_t seed) : path_(path), seed_(seed) {
  RG_CHECK(val_fraction >= 0.0 && val_fraction < 1.0, "TextDataset", "val_fraction must be in [0, 1), got ",
           val_fraction);
  bytes_ = read_text_file(path);
  RG_CHECK(!bytes_.empty(), "TextDataset", "'", path, "' is empty");

  train_size_ = split_train_size(size(), val_fraction, "TextDataset", path, "bytes");
}

Batch TextDataset::batch(int64_t index, int64_t batch_size, int64_t context, Split split) const {
  const bool train = split == Split::Train;
  return window_batch(seed_, split, index, batch_size, context, train ? 0 : train_size_, train ? train_size_ : val_size(),
                      "TextDataset", path_, "bytes",
                      [&](int64_t i) -> int64_t { return static_cast<unsigned char>(bytes_[i]); });
}

uint64_t TextDataset::checksum() const { return fnv1a64(bytes_.data(), bytes_.size()); }

// ---- TokenDataset -------------------------------------------------------------------------------

TokenDataset::TokenDataset(const std::string& path, double val_fraction, uint64_t seed) : path_(path), seed_(seed) {
  RG_CHECK(val_fraction >= 0.0 && val_fraction < 1.0, "TokenDataset", "val_fraction must be in [0, 1), got ",
           val_fraction);
  TokenFile file = read_token_file(path);
  RG_CHECK(file.vocab_size <= kMaxTokenVocab, "TokenDataset", "'", path, "' has vocab_size ", file.vocab_size,
           ", more than relgrad trains on (", kMaxTokenVocab, ")");
  vocab_size_ = file.vocab_size;
  tokens_ = std::move(file.tokens);
  train_size_ = split_train_size(size(), val_fraction, "TokenDataset", path, "tokens");
}

Batch TokenDataset::batch(int64_t index, int64_t batch_size, int64_t context, Split split) const {
  const bool train = split == Split::Train;
  return window_batch(seed_, split, index, batch_size, context, train ? 0 : train_size_, train ? train_size_ : val_size(),
                      "TokenDataset", path_, "tokens", [&](int64_t i) -> int64_t { return tokens_[i]; });
}

uint64_t TokenDataset::checksum() const {
  uint64_t h = fnv1a64(nullptr, 0);
  for (int32_t id : tokens_) {
    unsigned char le[4];
    for (int k = 0; k < 4; ++k) le[k] = static_cast<unsigned char>(static_cast<uint32_t>(id) >> (8 * k));
    h = fnv1a64(le, 4, h);
  }
  const auto vocab = static_cast<uint64_t>(vocab_size_);
  return fnv1a64(&vocab, sizeof vocab, h);
}

Vocab TokenDataset::vocab() const { return ids_vocab(vocab_size_); }

std::vector<int64_t> TokenDataset::sample_prompt(bool* validation) const {
  const int64_t from = val_size() > 0 ? train_size() : 0;
  const int64_t n = std::min<int64_t>(32, size() - from);
  if (validation) *validation = from > 0;
  return {tokens_.begin() + from, tokens_.begin() + from + n};
}

Vocab TokenDataset::ids_vocab(int64_t vocab_size) {
  Vocab v;
  v.size = vocab_size;
  v.pad = -1;  // every id is data
  v.names.reserve(static_cast<size_t>(vocab_size));
  for (int64_t id = 0; id < vocab_size; ++id) v.names.push_back(std::to_string(id));
  return v;
}

std::string printable_text(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7F)) {
      out += c == '\\' ? "\\\\" : std::string(1, static_cast<char>(c));
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, continuation bytes 10xxxxxx, no overlong form,
    // no surrogate, at most U+10FFFF, and not a C1 control (U+0080..U+009F).
    const size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    uint32_t cp = n ? c & (0x7F >> n) : 0;
    for (size_t k = 1; ok && k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    ok = ok && cp >= (n == 2 ? 0xA0u : n == 3 ? 0x800u : 0x10000u) && cp <= 0x10FFFF &&
         (cp < 0xD800 || cp > 0xDFFF);
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += byte_escape(c);  // one byte at a time: what follows is looked at afresh
      ++i;
    }
  }
  return out;
}

Vocab TextDataset::vocab() {
  Vocab v;
  v.size = 256;
  v.pad = -1;  // byte 0 is text, not padding
  for (int c = 0; c < 256; ++c) {
    if (c == '\n') v.names.push_back("\\n");
    else if (c == '\t') v.names.push_back("\\t");
    else if (c >= 32 && c < 127) v.names.push_back(std::string(1, static_cast<char>(c)));
    else v.names.push_back(byte_escape(static_cast<unsigned char>(c)));
  }
  return v;
}

}  // namespace relgrad
