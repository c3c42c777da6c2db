// Token data files: the layout and the reader's rules are in train/data/token_file.h.
#include "train/data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/error.h"

// Every error names the file: "[tokens] <name>: <what>". Needs a `name` in scope.
#define TF_CHECK(cond, ...) RG_CHECK(cond, "tokens", name, ": ", __VA_ARGS__)

namespace relgrad {
namespace {

constexpr char kMagic[8] = {'R', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kMaxVocab = 0x7FFFFFFF;  // ids are int32

uint64_t get_le(const std::string& bytes, uint64_t offset, int width) {
  uint64_t v = 0;
  for (int k = width - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(bytes[offset + k]);
  return v;
}

void put_le(std::string& out, uint64_t v, int width) {
  for (int k = 0; k < width; ++k) out += static_cast<char>((v >> (8 * k)) & 0xFF);
}

struct Header {
  uint64_t width = 0, vocab = 0, count = 0, checksum = 0;
};

// The fixed fields, checked; `bytes` holds at least the header (the file's size is checked here).
Header parse_header(const std::string& bytes, uint64_t file_size, const std::string& name) {
  TF_CHECK(file_size >= kTokenFileHeaderBytes && bytes.size() >= kTokenFileHeaderBytes, "file has ", file_size,
           " bytes, fewer than the ", kTokenFileHeaderBytes, "-byte header (truncated?)");
  TF_CHECK(std::memcmp(bytes.data(), kMagic, 8) == 0, "bad magic at byte 0 (expected \"RGTOKENS\"; not a token file?)");
  uint64_t version = get_le(bytes, 8, 4);
  TF_CHECK(version == kVersion, "unsupported version ", version, " at byte 8 (this build reads version ", kVersion, ")");
  Header h;
  h.width = get_le(bytes, 12, 4);
  TF_CHECK(h.width == 2 || h.width == 4, "bytes per token is ", h.width, " at byte 12 (must be 2 or 4)");
  h.vocab = get_le(bytes, 16, 8);
  TF_CHECK(h.vocab >= 1 && h.vocab <= kMaxVocab, "vocab_size ", h.vocab, " at byte 16 is out of range (1 .. ", kMaxVocab, ")");
  h.count = get_le(bytes, 24, 8);
  h.checksum = get_le(bytes, 32, 8);
  return h;
}

}  // namespace

TokenFile parse_token_file(const std::string& bytes, const std::string& name) {
  const uint64_t size = bytes.size();
  const Header h = parse_header(bytes, size, name);
  const uint64_t width = h.width, vocab = h.vocab, count = h.count, stored = h.checksum;

  // The count is checked against the bytes that are there before anything is sized by it (it may be
  // anything up to 2^64-1; count * width is never computed unless it cannot overflow).
  uint64_t payload = size - kTokenFileHeaderBytes;
  TF_CHECK(count <= payload / width, "header says ", count, " tokens of ", width, " bytes but only ", payload,
           " bytes follow the header (truncated file?)");
  TF_CHECK(count * width == payload, "header says ", count, " tokens of ", width, " bytes (", count * width,
           " bytes) but ", payload, " bytes follow the header (", payload - count * width, " trailing bytes)");

  uint64_t computed = fnv1a64(bytes.data() + kTokenFileHeaderBytes, static_cast<size_t>(payload));
  TF_CHECK(computed == stored, "checksum mismatch (stored ", stored, ", computed ", computed, "): the file is corrupt");

  TokenFile out;
  out.vocab_size = static_cast<int64_t>(vocab);
  out.tokens.resize(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t offset = kTokenFileHeaderBytes + i * width;
    uint64_t id = get_le(bytes, offset, static_cast<int>(width));
    TF_CHECK(id < vocab, "token ", i, " (byte ", offset, ") is ", id, ", not below vocab_size ", vocab);
    out.tokens[i] = static_cast<int32_t>(id);
  }
  return out;
}

TokenFile read_token_file(const std::string& path) {
  return parse_token_file(read_file(path, "tokens", kTokenFileMaxBytes), path);
}

int64_t token_file_vocab_size(const std::string& path) {
  const std::string& name = path;
  // O_NONBLOCK: a FIFO must not block the open (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  TF_CHECK(fd >= 0, "cannot open: ", std::strerror(errno));
  struct stat st {};
  std::string head(kTokenFileHeaderBytes, '\0');
  ssize_t got = -1;
  int error = 0;
  if (::fstat(fd, &st) != 0) error = errno;
  else if (S_ISREG(st.st_mode)) {
    got = ::pread(fd, head.data(), head.size(), 0);
    if (got < 0) error = errno;
  }
  ::close(fd);
  TF_CHECK(error == 0, "cannot read: ", std::strerror(error));
  TF_CHECK(S_ISREG(st.st_mode), "not a regular file");
  head.resize(static_cast<size_t>(got));
  return static_cast<int64_t>(parse_header(head, static_cast<uint64_t>(st.st_size), name).vocab);
}

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size) {
  const std::string& name = path;
  TF_CHECK(vocab_size >= 1 && static_cast<uint64_t>(vocab_size) <= kMaxVocab, "vocab_size ", vocab_size,
           " is out of range (1 .. ", kMaxVocab, ")");
  const int width = vocab_size <= 65536 ? 2 : 4;
  std::string ids;
  ids.reserve(tokens.size() * width);
  for (size_t i = 0; i < tokens.size(); ++i) {
    TF_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size, "token ", i, " is ", tokens[i], ", not in [0, ", vocab_size, ")");
    put_le(ids, static_cast<uint64_t>(tokens[i]), width);
  }
  std::string out(kMagic, 8);
  put_le(out, kVersion, 4);
  put_le(out, static_cast<uint64_t>(width), 4);
  put_le(out, static_cast<uint64_t>(vocab_size), 8);
  put_le(out, tokens.size(), 8);
  put_le(out, fnv1a64(ids.data(), ids.size()), 8);
  out += ids;
  write_file_atomic(path, out, "tokens");
}

#undef TF_CHECK

}  // namespace relgrad
