// safetensors reader/writer: round trips, the exact bytes of a tiny file, and hostile files
// (truncated at every length, every header byte flipped, hand-written malformed headers modelled on
// kinds of bugs found in other tensor-file parsers: size overflow, offsets past the end, overlaps).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/safetensors.h"
#include "file_testing.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k) s[k] = static_cast<char>((v >> (8 * k)) & 0xFF);
  return s;
}

// A raw file: header length, the header text as given, then data_size zero bytes.
std::string raw_file(const std::string& header, size_t data_size) {
  return le64(header.size()) + header + std::string(data_size, '\0');
}

void check_same(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.defined());
  CHECK(actual.dtype() == expected.dtype());
  CHECK(actual.shape() == expected.shape());
  CHECK(actual.is_contiguous());
  Tensor a = actual.to(kFloat64).contiguous(), e = expected.to(kFloat64).contiguous();
  CHECK(a.to_vector<double>() == e.to_vector<double>());
}

// A small file with every dtype, metadata and an empty tensor: the subject of the sweeps below.
std::string small_file(const TempDir& dir) {
  std::string path = dir.file("small.safetensors");
  save_safetensors(path,
                   {{"w", from_vector<float>({1.5f, -2.f, 3.25f, 0.f, 5.f, -6.5f}, {2, 3})},
                    {"step", scalar_tensor(7, kInt64)},
                    {"ids", from_vector<int64_t>({3, -1, 1LL << 40}, {3})},
                    {"mask", from_vector<bool>({true, false, true}, {3})},
                    {"none", zeros({0, 2}, kFloat64)},
                    {"v", from_vector<double>({0.1, -0.2}, {2})}},
                   {{"format", "pt"}, {"note", "x"}});
  return read_bytes(path);
}

}  // namespace

TEST_CASE("safetensors: round trip of every dtype, 0-d, empty and non-contiguous tensors, metadata") {
  TempDir dir;
  Tensor grid = arange(12, kFloat64).reshape({3, 4});
  std::map<std::string, Tensor> tensors = {
      {"f32", from_vector<float>({1.f, -2.5f, 3.f, 1e-30f, 7.f, -0.f}, {2, 3})},
      {"f64_scalar", scalar_tensor(3.141592653589793, kFloat64)},
      {"i64", from_vector<int64_t>({-5, 0, 9007199254740993LL, INT64_MIN}, {4})},
      {"bool", from_vector<bool>({true, false, false, true}, {2, 2})},
      {"empty", zeros({0, 3}, kFloat32)},
      {"transposed", grid.t()},               // (4,3) strides (1,4)
      {"strided", grid.slice(1, 0, 4, 2)},    // (3,2) every other column
      {"expanded", from_vector<double>({1, 2}, {2, 1}).expand({2, 5})},  // stride 0
      {"unicode name \xc3\xa9\xe6\x97\xa5", ones({1}, kFloat64)},
  };
  std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"escapes", "quote \" backslash \\ newline \n tab \t bell \x07 end"},
      {"utf8", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"}, {"empty", ""}};
  std::string path = dir.file("round.safetensors");
  save_safetensors(path, tensors, metadata);
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == metadata);
  REQUIRE(f.tensors.size() == tensors.size());
  for (const auto& entry : tensors) {
    const auto& name = entry.first;
    const auto& t = entry.second;
    CAPTURE(name);
    REQUIRE(f.tensors.count(name) == 1);
    check_same(f.tensors.at(name), t);
  }
  // 0-d stays 0-d; the data section starts 8-byte aligned.
  CHECK(f.tensors.at("f64_scalar").dim() == 0);
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(bytes[k]);
  CHECK(n % 8 == 0);
  // Overwriting replaces the file and leaves no temporary files behind.
  save_safetensors(path, {{"only", ones({2}, kFloat64)}});
  CHECK(load_safetensors(path).tensors.size() == 1);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
  // An empty file (no tensors, no metadata) is valid too.
  save_safetensors(dir.file("nothing.safetensors"), {});
  SafetensorsFile nothing = load_safetensors(dir.file("nothing.safetensors"));
  CHECK(nothing.tensors.empty());
  CHECK(nothing.metadata.empty());
}

TEST_CASE("safetensors: the bytes of a tiny file follow the format exactly") {
  TempDir dir;
  std::string path = dir.file("tiny.safetensors");
  save_safetensors(path, {{"a", from_vector<float>({1.f, 2.f}, {2})}});
  // 54 bytes of JSON padded with 2 spaces to 56 = 0x38; then 1.0f = 00 00 80 3f, 2.0f = 00 00 00 40.
  std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ";
  std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + header + std::string("\0\0\x80\x3f\0\0\0\x40", 8);
  CHECK(read_bytes(path) == expected);

  save_safetensors(path, {{"a", from_vector<float>({1.f, 2.f}, {2})}}, {{"k", "v"}});
  header = "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} ";
  expected = std::string("\x50\0\0\0\0\0\0\0", 8) + header + std::string("\0\0\x80\x3f\0\0\0\x40", 8);
  CHECK(read_bytes(path) == expected);

  // And a file written by another writer (no padding, keys in another order, whitespace) reads back.
  std::string foreign = "{ \"b\" : {\"shape\": [], \"data_offsets\": [0, 8], \"dtype\": \"I64\"},\n \"__metadata__\": {} }";
  write_bytes(path, le64(foreign.size()) + foreign + le64(42));
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.tensors.at("b").item() == 42);
  CHECK(f.tensors.at("b").dtype() == kInt64);
}

TEST_CASE("safetensors: a file truncated at any length is refused") {
  TempDir dir;
  std::string good = small_file(dir);
  std::string path = dir.file("cut.safetensors");
  for (size_t len = 0; len < good.size(); ++len) {
    CAPTURE(len);
    write_bytes(path, good.substr(0, len));
    CHECK_THROWS_AS(load_safetensors(path), Error);
  }
  // One byte too many is refused too: no bytes may belong to no tensor.
  write_bytes(path, good + "x");
  CHECK_THROWS_AS(load_safetensors(path), Error);
}

TEST_CASE("safetensors: flipped header bytes give an error or a load, never a crash") {
  TempDir dir;
  std::string good = small_file(dir);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(good[k]);
  std::string path = dir.file("flip.safetensors");
  int errors = 0, loads = 0;
  auto try_load = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    try {
      SafetensorsFile f = load_safetensors(path);
      uint64_t total = 0;
      for (const auto& [name, t] : f.tensors) total += t.numel() * dtype_size(t.dtype());
      CHECK(total <= bytes.size());  // never more memory than the file justifies
      ++loads;
    } catch (const Error&) {
      ++errors;
    }
  };
  // Every byte of the length field and the header, with several replacements each.
  const unsigned char xors[] = {0x01, 0x02, 0x10, 0x80, 0xFF};
  const char sets[] = {'"', '{', '}', '[', ']', ',', ':', '\\', '0', '9', '-', ' ', '\0'};
  for (size_t i = 0; i < 8 + n; ++i) {
    CAPTURE(i);
    for (unsigned char x : xors) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      try_load(bad);
    }
    for (char c : sets) {
      std::string bad = good;
      bad[i] = c;
      try_load(bad);
    }
  }
  CHECK(errors > 0);
  CHECK(loads > 0);  // e.g. a changed letter in a metadata value still loads
  // In the data section, a BOOL byte other than 0/1 is refused (reading it as bool would be UB);
  // other data flips are valid files (without a checksum they cannot be detected).
  write_bytes(path, good);
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.tensors.at("mask").to_vector<bool>() == std::vector<bool>{true, false, true});
  size_t mask_byte = good.find(std::string("\x01\x00\x01", 3), 8 + n);
  REQUIRE(mask_byte != std::string::npos);
  std::string bad = good;
  bad[mask_byte + 1] = 2;
  write_bytes(path, bad);
  check_throws_with([&] { load_safetensors(path); }, "not 0 or 1");
}

TEST_CASE("safetensors: malformed headers are refused with a message naming the problem") {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  std::string many_dims = "1";
  for (int k = 0; k < 64; ++k) many_dims += ",1";  // 65 dims, one over relgrad's cap
  const std::string a8 = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  struct Case { const char* what; std::string header; size_t data_size; const char* message; };
  const Case cases[] = {
      {"overlap", "{" + a8 + ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap"},
      {"gap", "{" + a8 + ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, "gap in the data section"},
      {"leftover data", "{" + a8 + "}", 12, "tensors cover 8 bytes but the data section has 12"},
      {"unsupported dtype", "{\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "unsupported dtype 'I16'"},
      {"unknown dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unsupported dtype 'f32'"},
      {"size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12 bytes but data_offsets span 8"},
      {"dtype size mismatch", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "needs 16 bytes"},
      {"offsets past the end", "{" + a8 + "}", 4, "outside the data section"},
      {"offsets reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "end before they begin"},
      {"duplicate tensor", "{" + a8 + "," + a8 + "}", 8, "duplicate key 'a'"},
      {"duplicate field", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate key 'dtype'"},
      {"duplicate metadata key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate key 'k'"},
      {"duplicate __metadata__", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key '__metadata__'"},
      {"numel overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, "too large"},
      {"bytes overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952,4],\"data_offsets\":[0,0]}}", 0, "too large"},
      {"stride overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4],\"data_offsets\":[0,0]}}", 0, "too large"},
      {"integer overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,0]}}", 0, "integer too large"},
      {"negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "negative number"},
      {"float dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "expected an integer"},
      {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zero"},
      {"three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8, "more than 2 entries"},
      {"one offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8, "must be [begin, end]"},
      {"too many dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[" + many_dims + "]}}", 0, "more than 64 entries"},
      {"missing field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks dtype, shape or data_offsets"},
      {"unknown field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unknown field 'x'"},
      {"tensor not an object", "{\"a\":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}", 0, "must be an object"},
      {"non-string metadata", "{\"__metadata__\":{\"step\":3}}", 0, "value of 'step' must be a string"},
      {"nested metadata", "{\"__metadata__\":{\"k\":{\"k\":{}}}}", 0, "must be a string"},
      {"BOM", "\xef\xbb\xbf{}", 0, "must start with '{'"},
      {"leading space", " {}", 0, "must start with '{'"},
      {"not an object", "[]", 0, "must start with '{'"},
      {"empty header", "", 0, "must start with '{'"},
      {"trailing bytes", "{}x", 0, "unexpected bytes after"},
      {"two objects", "{}{}", 0, "unexpected bytes after"},
      {"unterminated object", "{\"__metadata__\":{}", 0, "expected '}'"},
      {"missing colon", "{\"__metadata__\" {}}", 0, "expected ':'"},
      {"trailing comma", "{\"__metadata__\":{},}", 0, "expected '\"'"},
      {"unterminated string", "{\"__metadata__\":{\"k\":\"v}}", 0, "unterminated string"},
      {"control character", "{\"__metadata__\":{\"k\":\"a\nb\"}}", 0, "control character"},
      {"bad escape", "{\"__metadata__\":{\"k\":\"\\q\"}}", 0, "unknown escape"},
      {"bad \\u escape", "{\"__metadata__\":{\"k\":\"\\u12G4\"}}", 0, "bad hex digit"},
      {"lone surrogate", "{\"__metadata__\":{\"k\":\"\\ud800x\"}}", 0, "unpaired surrogate"},
      {"invalid UTF-8", "{\"__metadata__\":{\"k\":\"\xc3\x28\"}}", 0, "invalid UTF-8"},
      {"overlong UTF-8", "{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", 0, "invalid UTF-8"},
      {"true literal", "{\"__metadata__\":{\"k\":true}}", 0, "must be a string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    write_bytes(path, raw_file(c.header, c.data_size));
    check_throws_with([&] { load_safetensors(path); }, c.message);
    check_throws_with([&] { load_safetensors(path); }, "[safetensors] " + path + ": ");
  }
  // Escapes that are valid decode correctly (surrogate pair → one 4-byte UTF-8 character).
  write_bytes(path, raw_file("{\"__metadata__\":{\"k\":\"\\u00e9\\ud83d\\ude00\\n\\/\"}}", 0));
  CHECK(load_safetensors(path).metadata.at("k") == "\xc3\xa9\xf0\x9f\x98\x80\n/");

  // The length field itself.
  write_bytes(path, le64(UINT64_MAX) + "{}");
  check_throws_with([&] { load_safetensors(path); }, "exceeds the limit");
  write_bytes(path, le64(kSafetensorsMaxHeader + 1) + "{}");
  check_throws_with([&] { load_safetensors(path); }, "exceeds the limit");
  write_bytes(path, le64(1000) + "{}");
  check_throws_with([&] { load_safetensors(path); }, "header length 1000 exceeds the 2 bytes");
  write_bytes(path, "");
  check_throws_with([&] { load_safetensors(path); }, "fewer than the 8-byte header length");
  check_throws_with([&] { load_safetensors(dir.file("missing.safetensors")); }, "cannot open");
  check_throws_with([&] { load_safetensors(dir.path.string()); }, "not a regular file");
}

TEST_CASE("safetensors: saving fails cleanly") {
  TempDir dir;
  std::string missing = dir.file("no/such/dir/x.safetensors");
  check_throws_with([&] { save_safetensors(missing, {{"a", ones({2})}}); }, "cannot create temporary file");
  check_throws_with([&] { save_safetensors(missing, {{"a", ones({2})}}); }, "[safetensors] " + missing + ": ");
  std::string path = dir.file("x.safetensors");
  check_throws_with([&] { save_safetensors(path, {{"__metadata__", ones({2})}}); }, "reserved");
  check_throws_with([&] { save_safetensors(path, {{"a", Tensor()}}); }, "undefined");
  check_throws_with([&] { save_safetensors(path, {{"\xff", ones({2})}}); }, "not valid UTF-8");
  check_throws_with([&] { save_safetensors(path, {}, {{"k", "\xc3"}}); }, "not valid UTF-8");
  // A failed save leaves the old file as it was and no temporary file.
  save_safetensors(path, {{"a", ones({2})}});
  std::string before = read_bytes(path);
  CHECK_THROWS_AS(save_safetensors(path, {{"a", ones({3})}, {"b", Tensor()}}), Error);
  CHECK(read_bytes(path) == before);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("safetensors: CVE-modelled files are refused before anything is allocated from them") {
  TempDir dir;
  std::string path = dir.file("cve.safetensors");
  struct Case { const char* what; std::string file; const char* message; };
  const std::string a8 = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  const Case cases[] = {
      // The length field: 2^64-1 (8 + n wraps around), 2^63, and one byte more than the file holds.
      {"length 2^64-1", le64(UINT64_MAX) + "{}", "exceeds the limit"},
      {"length 2^63", le64(uint64_t{1} << 63) + "{}", "exceeds the limit"},
      {"length one past the end", le64(3) + "{}", "header length 3 exceeds the 2 bytes"},
      // Ollama GHSA-x8qc-fggm-mpqg: a tensor whose size and offsets agree but lie beyond the file.
      {"offsets past EOF", raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1152921504606846976],\"data_offsets\":[0,4611686018427387904]}}", 8),
       "lie outside the data section (8 bytes"},
      {"begin past EOF", raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[100,100]}}", 8), "outside the data section"},
      // llama.cpp #18674 / GGUF: dimensions whose product wraps to a small number.
      {"shape [2^32, 2^32]", raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0), "too large"},
      {"shape [2^42+1, 2^22] wraps to 2^22", raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4398046511105,4194304],\"data_offsets\":[0,16777216]}}", 0),
       "too large"},
      {"shape x dtype wraps", raw_file("{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693953],\"data_offsets\":[0,8]}}", 8), "too large"},
      // Overlap (two names for the same bytes) and a gap (bytes hidden from every reader: polyglot files).
      {"overlap", raw_file("{" + a8 + ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "overlap"},
      {"gap", raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12), "gap in the data section: bytes [0, 4)"},
      {"trailing data", raw_file("{" + a8 + "}", 9), "tensors cover 8 bytes but the data section has 9"},
      // Duplicate names, also when spelled differently (an escape decodes to the same name).
      {"duplicate key", raw_file("{" + a8 + "," + a8 + "}", 8), "duplicate key 'a'"},
      {"duplicate by escape", raw_file("{" + a8 + ",\"\\u0061\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8),
       "duplicate key 'a'"},
      {"unknown dtype", raw_file("{\"a\":{\"dtype\":\"Q4_0\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "unsupported dtype 'Q4_0'"},
      {"empty dtype", raw_file("{\"a\":{\"dtype\":\"\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "unsupported dtype ''"},
      {"0-byte file", "", "fewer than the 8-byte header length"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    write_bytes(path, c.file);
    check_throws_with([&] { load_safetensors(path); }, c.message);
    check_throws_with([&] { load_safetensors(path); }, "[safetensors] " + path + ": ");
  }
  // The counterpart that is fine: a file with exactly what its header says loads.
  write_bytes(path, raw_file("{" + a8 + "}", 8));
  CHECK(load_safetensors(path).tensors.at("a").numel() == 2);
}
