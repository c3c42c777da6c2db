// safetensors reader and writer. The file is hostile until proven otherwise: the loader checks the
// header length against the file size, parses the JSON header with a strict parser for exactly the
// subset safetensors uses, checks every tensor's size with overflow-checked arithmetic, and only then
// allocates (never more bytes than the file holds). The bug classes this guards against are the ones
// found in other tensor-file parsers (docs/reliability.md): size overflow, offsets past EOF,
// allocation sized by an untrusted count, duplicate keys, overlapping or gapped data.
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "core/base/error.h"
#include "core/file_io.h"

// The data bytes are copied to and from memory as they are, and the format is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");
static_assert(sizeof(bool) == 1, "BOOL tensors are stored one byte per element");

// Every error names the file: "[safetensors] <path>: <what>". Needs a `path` in scope.
#define ST_CHECK(cond, ...) RG_CHECK(cond, "safetensors", path, ": ", __VA_ARGS__)

namespace relgrad {
namespace {

constexpr size_t kMaxDims = 64;  // relgrad's own cap: bounds the memory a shape array can ask for

const char* st_dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
  }
  return "?";
}

bool st_dtype_from_name(const std::string& name, DType* out) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Bool, DType::BFloat16, DType::Float16}) {
    if (name == st_dtype_name(dt)) { *out = dt; return true; }
  }
  return false;
}

// Length of the valid UTF-8 sequence starting at p (at most `avail` bytes), or 0 if invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid, as RFC 3629 says).
size_t utf8_sequence_length(const unsigned char* p, size_t avail) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (avail < n || p[1] < lo || p[1] > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if ((p[k] & 0xC0) != 0x80) return 0;
  return n;
}

bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(p + i, s.size() - i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// One tensor as the header describes it; offsets are relative to the data section.
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

// A strict recursive-descent parser for the header schema (not a general JSON parser): the root is
// an object whose values are tensor objects or the "__metadata__" object of strings. Because the
// parser follows the schema, nesting is at most three levels deep and every value it builds is at
// most a small multiple of the header bytes that spelled it.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  Header parse() {
    Header header;
    // The spec requires '{' as the very first byte (no BOM, no leading whitespace).
    check(!s_.empty() && s_[0] == '{', "must start with '{'");
    parse_object([&](const std::string& key) {
      if (key == "__metadata__") {
        parse_metadata(header.metadata);
      } else {
        header.entries.push_back(parse_tensor(key));
      }
    });
    skip_ws();  // writers pad the header with spaces so that the data section is aligned
    check(i_ == s_.size(), "unexpected bytes after the closing '}'");
    return header;
  }

 private:
  template <class... Args>
  void check(bool cond, const Args&... what) const {
    const std::string& path = path_;
    ST_CHECK(cond, "bad header: ", what..., " (at header byte ", i_, ")");
  }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    check(peek() == c, "expected '", c, "'");
    ++i_;
  }

  // { "key": <value parsed by on_member>, ... } with duplicate keys rejected: parsers differ on
  // which duplicate wins, so a file with duplicates could mean different things to different readers.
  template <class OnMember>
  void parse_object(OnMember&& on_member) {
    expect('{');
    std::set<std::string> seen;
    if (peek() == '}') { ++i_; return; }
    while (true) {
      std::string key = parse_string();
      check(seen.insert(key).second, "duplicate key '", key, "'");
      expect(':');
      on_member(key);
      if (peek() == ',') { ++i_; continue; }
      expect('}');
      return;
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      check(i_ < s_.size(), "unterminated string");
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') { ++i_; return out; }
      check(c >= 0x20, "control character in a string");
      if (c != '\\') {
        size_t n = utf8_sequence_length(reinterpret_cast<const unsigned char*>(s_.data()) + i_, s_.size() - i_);
        check(n > 0, "invalid UTF-8 in a string");
        out.append(s_, i_, n);
        i_ += n;
        continue;
      }
      ++i_;
      check(i_ < s_.size(), "unterminated escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate must be followed by a low one
            check(i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u', "unpaired surrogate in \\u escape");
            i_ += 2;
            uint32_t low = parse_hex4();
            check(low >= 0xDC00 && low <= 0xDFFF, "unpaired surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else {
            check(cp < 0xDC00 || cp > 0xDFFF, "unpaired surrogate in \\u escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: check(false, "unknown escape '\\", e, "'");
      }
    }
  }

  uint32_t parse_hex4() {
    check(i_ + 4 <= s_.size(), "truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      check(d >= 0, "bad hex digit in \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // A non-negative JSON integer that fits int64 (shapes and offsets become int64 / Shape).
  uint64_t parse_uint() {
    char c = peek();
    check(c != '-', "negative number");
    check(c >= '0' && c <= '9', "expected a non-negative integer");
    check(!(c == '0' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9'), "number with a leading zero");
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      auto d = static_cast<uint64_t>(s_[i_] - '0');
      check(v <= (static_cast<uint64_t>(INT64_MAX) - d) / 10, "integer too large");
      v = v * 10 + d;
      ++i_;
    }
    check(i_ >= s_.size() || (s_[i_] != '.' && s_[i_] != 'e' && s_[i_] != 'E'), "expected an integer");
    return v;
  }

  std::vector<uint64_t> parse_uint_array(size_t max_items, const char* what) {
    expect('[');
    std::vector<uint64_t> out;
    if (peek() == ']') { ++i_; return out; }
    while (true) {
      check(out.size() < max_items, what, " has more than ", max_items, " entries");
      out.push_back(parse_uint());
      if (peek() == ',') { ++i_; continue; }
      expect(']');
      return out;
    }
  }

  void parse_metadata(std::map<std::string, std::string>& metadata) {
    parse_object([&](const std::string& key) {
      check(peek() == '"', "__metadata__ value of '", key, "' must be a string");
      metadata[key] = parse_string();
    });
  }

  Entry parse_tensor(const std::string& name) {
    Entry e;
    e.name = name;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    check(peek() == '{', "tensor '", name, "' must be an object");
    parse_object([&](const std::string& key) {
      if (key == "dtype") {
        std::string dt = parse_string();
        check(st_dtype_from_name(dt, &e.dtype), "tensor '", name, "' has unsupported dtype '", dt,
              "' (relgrad reads F32, F64, I64, BOOL)");
        has_dtype = true;
      } else if (key == "shape") {
        for (uint64_t d : parse_uint_array(kMaxDims, "shape")) e.shape.push_back(static_cast<int64_t>(d));
        has_shape = true;
      } else if (key == "data_offsets") {
        std::vector<uint64_t> off = parse_uint_array(2, "data_offsets");
        check(off.size() == 2, "tensor '", name, "': data_offsets must be [begin, end]");
        e.begin = off[0];
        e.end = off[1];
        has_offsets = true;
      } else {
        check(false, "tensor '", name, "' has unknown field '", key, "'");
      }
    });
    check(has_dtype && has_shape && has_offsets, "tensor '", name, "' lacks dtype, shape or data_offsets");
    return e;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

// Checks that the entries tile [0, data_size) exactly: each size matches its shape and dtype,
// nothing overlaps, nothing is left over (no hidden bytes: a file means exactly one thing).
void validate_layout(std::vector<Entry>& entries, uint64_t data_size, const std::string& path) {
  for (const Entry& e : entries) {
    uint64_t numel = 1, extent = 1;  // extent: product with zeros as ones, so strides fit in int64 too
    for (int64_t d : e.shape) {
      auto ud = static_cast<uint64_t>(d);
      bool ok = !__builtin_mul_overflow(numel, ud, &numel) &&
                !__builtin_mul_overflow(extent, std::max<uint64_t>(ud, 1), &extent) &&
                extent <= static_cast<uint64_t>(INT64_MAX);
      ST_CHECK(ok, "tensor '", e.name, "': shape ", shape_str(e.shape), " is too large (size overflows)");
    }
    uint64_t bytes = 0;
    ST_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e.dtype)), &bytes), "tensor '", e.name,
             "': shape ", shape_str(e.shape), " is too large (byte size overflows)");
    ST_CHECK(e.begin <= e.end, "tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end, "] end before they begin");
    ST_CHECK(e.end <= data_size, "tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
             "] lie outside the data section (", data_size, " bytes; truncated file?)");
    ST_CHECK(e.end - e.begin == bytes, "tensor '", e.name, "': shape ", shape_str(e.shape), " of ",
             st_dtype_name(e.dtype), " needs ", bytes, " bytes but data_offsets span ", e.end - e.begin);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t covered = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& e = entries[k];
    ST_CHECK(e.begin >= covered, "tensors '", entries[k - 1].name, "' and '", e.name, "' overlap in the data section");
    ST_CHECK(e.begin == covered, "gap in the data section: bytes [", covered, ", ", e.begin,
             ") belong to no tensor (before '", e.name, "')");
    covered = e.end;
  }
  ST_CHECK(covered == data_size, "tensors cover ", covered, " bytes but the data section has ", data_size,
           " (truncated file, or bytes belonging to no tensor)");
}

// Closes a file descriptor on every path out of a function.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at `offset`, or throws (a short read means the file shrank or is broken).
void read_exact(int fd, uint64_t offset, void* dst, uint64_t n, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
    ssize_t got = ::pread(fd, p, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    ST_CHECK(got >= 0, "read failed: ", std::strerror(errno));
    ST_CHECK(got > 0, "unexpected end of file at byte ", offset, " (truncated?)");
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;  // UTF-8 passes through (checked valid by the caller)
    }
  }
  out += '"';
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (it is refused below).
  FdGuard file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  ST_CHECK(file.fd >= 0, "cannot open: ", std::strerror(errno));
  struct stat st {};
  ST_CHECK(::fstat(file.fd, &st) == 0, "cannot stat: ", std::strerror(errno));
  ST_CHECK(S_ISREG(st.st_mode), "not a regular file");
  auto file_size = static_cast<uint64_t>(st.st_size);
  ST_CHECK(file_size >= 8, "file has ", file_size, " bytes, fewer than the 8-byte header length (truncated?)");

  unsigned char len_bytes[8];
  read_exact(file.fd, 0, len_bytes, 8, path);
  uint64_t header_len = 0;
  for (int k = 7; k >= 0; --k) header_len = (header_len << 8) | len_bytes[k];
  ST_CHECK(header_len <= kSafetensorsMaxHeader, "header length ", header_len, " exceeds the limit of ",
           kSafetensorsMaxHeader, " bytes");
  ST_CHECK(header_len <= file_size - 8, "header length ", header_len, " exceeds the ", file_size - 8,
           " bytes after the length field (truncated or not a safetensors file?)");

  std::string text(header_len, '\0');
  read_exact(file.fd, 8, text.data(), header_len, path);
  Header header = HeaderParser(text, path).parse();
  uint64_t data_start = 8 + header_len;
  validate_layout(header.entries, file_size - data_start, path);

  // Only now is anything sized by the header allocated, and the layout check bounds it by the file.
  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  for (const Entry& e : header.entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype));
    uint64_t bytes = e.end - e.begin;
    read_exact(file.fd, data_start + e.begin, t.raw_data(), bytes, path);
    if (e.dtype == DType::Bool) {  // any byte other than 0/1 is not a valid C++ bool (undefined behaviour to read)
      const auto* b = static_cast<const unsigned char*>(t.raw_data());
      for (uint64_t k = 0; k < bytes; ++k)
        ST_CHECK(b[k] <= 1, "tensor '", e.name, "': BOOL byte ", k, " is ", static_cast<int>(b[k]), ", not 0 or 1");
    }
    out.tensors.emplace(e.name, t);
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Contiguous host copies, in name order, with their offsets.
  std::vector<Tensor> hosts;
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      ST_CHECK(valid_utf8(key) && valid_utf8(value), "metadata key '", key, "' or its value is not valid UTF-8");
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ST_CHECK(name != "__metadata__", "'__metadata__' is reserved and cannot name a tensor");
    ST_CHECK(valid_utf8(name), "tensor name '", name, "' is not valid UTF-8");
    ST_CHECK(t.defined(), "tensor '", name, "' is undefined");
    Tensor host = t;
    if (!t.device().is_cpu() || !t.is_contiguous()) {
      host = empty(t.shape(), TensorOptions(t.dtype()));
      copy_into(host, t, "safetensors");
    }
    uint64_t bytes = static_cast<uint64_t>(host.numel()) * dtype_size(host.dtype());
    if (header.size() > 1) header += ',';
    append_json_string(header, name);
    header += ":{\"dtype\":\"";
    header += st_dtype_name(host.dtype());
    header += "\",\"shape\":[";
    for (size_t d = 0; d < host.shape().size(); ++d) header += (d ? "," : "") + std::to_string(host.shape()[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
    hosts.push_back(host);
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');  // aligns the data section to 8 bytes, as the reference writer does
  ST_CHECK(header.size() <= kSafetensorsMaxHeader, "header of ", header.size(), " bytes exceeds the limit");

  AtomicFile out(path, "safetensors");
  unsigned char len_bytes[8];
  for (int k = 0; k < 8; ++k) len_bytes[k] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * k));
  out.write(len_bytes, 8);
  out.write(header);
  for (const Tensor& h : hosts) out.write(h.raw_data(), h.numel() * dtype_size(h.dtype()));
  out.commit();
}

}  // namespace relgrad
