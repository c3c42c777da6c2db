// Binary token data files (".tokens"): a sequence of token ids with its vocabulary size, for
// data.source = "tokens" (a decoder-only LM over the ids). Made from text by `relgrad tokenize`.
//
// Layout (all integers little-endian; docs/data-format.md):
//   offset  0  8 bytes   magic "RGTOKENS"
//   offset  8  uint32    version (1)
//   offset 12  uint32    bytes per token: 2 (ids < 65536) or 4
//   offset 16  uint64    vocab_size (1 .. 2^31-1)
//   offset 24  uint64    count: number of tokens
//   offset 32  uint64    FNV-1a-64 checksum of the token bytes (everything after the header)
//   offset 40  count ids of `bytes per token` bytes each, unsigned, every one < vocab_size
// The header is kTokenFileHeaderBytes = 40 bytes; the file is exactly 40 + count * width bytes.
//
// The reader trusts nothing: bad magic, version or width, a count that does not match the bytes
// that follow (truncated or trailing bytes), vocab_size 0 or > 2^31-1, an id >= vocab_size (the
// error names the index, the file offset and the id) and a checksum mismatch are all
// relgrad::Error "[tokens] <name>: <what>". Nothing is allocated before the count has been checked
// against the size of the input, and the checksum is checked before any id is interpreted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/file_io.h"  // fnv1a64, the checksum

namespace relgrad {

inline constexpr uint64_t kTokenFileHeaderBytes = 40;
inline constexpr uint64_t kTokenFileMaxBytes = uint64_t(1) << 34;  // 16 GiB: read_token_file's limit

struct TokenFile {
  int64_t vocab_size = 0;
  std::vector<int32_t> tokens;
};

// Parses the bytes of a token file; `name` (a path or a label) is used in errors.
TokenFile parse_token_file(const std::string& bytes, const std::string& name);
// Reads and parses the file at `path` (a regular file of at most kTokenFileMaxBytes).
TokenFile read_token_file(const std::string& path);
// The vocab_size in the header of the file at `path` (the header's fields checked; the ids are not
// read): what the model's vocabulary must be, known before the data is loaded.
int64_t token_file_vocab_size(const std::string& path);
// Writes `tokens` atomically (core/file_io.h), 2 bytes per id when vocab_size <= 65536, else 4.
// Every id must be in [0, vocab_size) and vocab_size in [1, 2^31-1].
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size);

}  // namespace relgrad
