// Token data files (train/data/token_file.h): the exact layout, round trips at both widths, and every
// rule of the reader on hand-made hostile files (size checks before allocation, ids below the
// vocabulary, checksum). The truncation and byte-flip sweeps are in
// tests/test_file_sweeps.cpp.
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <sstream>

#include "file_testing.h"
#include "testing.h"
#include "train/command/cli.h"
#include "train/data/token_file.h"
#include "train/trainer/trainer.h"
#include "trainer_testing.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

std::string le(uint64_t v, int width) {
  std::string s;
  for (int k = 0; k < width; ++k) s += static_cast<char>((v >> (8 * k)) & 0xFF);
  return s;
}

// A token file from its fields; the checksum is the right one unless `checksum` is given.
struct Fields {
  std::string magic = "RGTOKENS";
  uint64_t version = 1, width = 2, vocab = 10, count = 0;
  std::string ids;  // the payload as it is to be written
  bool custom_checksum = false;
  uint64_t checksum = 0;
};
std::string make(Fields f) {
  uint64_t sum = f.custom_checksum ? f.checksum : fnv1a64(f.ids.data(), f.ids.size());
  return f.magic + le(f.version, 4) + le(f.width, 4) + le(f.vocab, 8) + le(f.count, 8) + le(sum, 8) + f.ids;
}
Fields valid_fields() {  // ids 3, 1, 4, 1, 5 of vocab 10, 2 bytes each
  Fields f;
  f.count = 5;
  for (uint64_t id : {3, 1, 4, 1, 5}) f.ids += le(id, 2);
  return f;
}

}  // namespace

TEST_CASE("token file: the bytes of a tiny file follow the documented layout") {
  TempDir dir;
  std::string path = dir.file("tiny.tokens");
  write_token_file(path, {3, 1, 4, 1, 5}, 10);
  const std::string bytes = read_bytes(path);
  CHECK(bytes == make(valid_fields()));
  REQUIRE(bytes.size() == kTokenFileHeaderBytes + 10);
  CHECK(bytes.substr(0, 8) == "RGTOKENS");
  CHECK(bytes.substr(40, 4) == std::string("\x03\x00\x01\x00", 4));  // little-endian ids
  // The FNV-1a 64 reference values (offset basis, and "a" from the published test vectors).
  CHECK(fnv1a64(nullptr, 0) == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
}

TEST_CASE("token file: round trips at 2 and 4 bytes per id, and an empty file") {
  TempDir dir;
  std::string path = dir.file("t.tokens");
  struct Case { int64_t vocab; std::vector<int32_t> ids; uint64_t width; };
  const Case cases[] = {
      {256, {0, 255, 10, 65, 0}, 2},
      {65536, {65535, 0, 1}, 2},
      {65537, {65536, 0, 12345}, 4},
      {INT32_MAX, {INT32_MAX - 1, 0, 7}, 4},
      {1, {0, 0, 0}, 2},
      {5, {}, 2},
  };
  for (const Case& c : cases) {
    CAPTURE(c.vocab);
    write_token_file(path, c.ids, c.vocab);
    const std::string bytes = read_bytes(path);
    CHECK(bytes.size() == kTokenFileHeaderBytes + c.ids.size() * c.width);
    CHECK(static_cast<unsigned char>(bytes[12]) == c.width);
    TokenFile f = read_token_file(path);
    CHECK(f.vocab_size == c.vocab);
    CHECK(f.tokens == c.ids);
    TokenFile g = parse_token_file(bytes, "in memory");
    CHECK(g.tokens == c.ids);
  }
}

TEST_CASE("token file: hostile headers and payloads are refused with the file, the offset and the problem") {
  const std::string name = "hostile.tokens";
  auto refused = [&](const std::string& bytes, const std::string& message) {
    check_throws_with([&] { parse_token_file(bytes, name); }, message);
    check_throws_with([&] { parse_token_file(bytes, name); }, "[tokens] " + name + ": ");
  };
  CHECK(parse_token_file(make(valid_fields()), name).tokens == std::vector<int32_t>{3, 1, 4, 1, 5});

  refused("", "file has 0 bytes, fewer than the 40-byte header");
  refused(make(valid_fields()).substr(0, 39), "fewer than the 40-byte header");
  Fields f = valid_fields();
  f.magic = "RGTOKENZ";
  refused(make(f), "bad magic at byte 0");
  f = valid_fields();
  f.version = 2;
  refused(make(f), "unsupported version 2 at byte 8");
  for (uint64_t width : {0ull, 1ull, 3ull, 8ull, 0xFFFFFFFFull}) {
    CAPTURE(width);
    f = valid_fields();
    f.width = width;
    refused(make(f), "bytes per token is " + std::to_string(width) + " at byte 12 (must be 2 or 4)");
  }
  for (uint64_t vocab : {uint64_t{0}, uint64_t{1} << 31, UINT64_MAX}) {
    CAPTURE(vocab);
    f = valid_fields();
    f.vocab = vocab;
    refused(make(f), "vocab_size " + std::to_string(vocab) + " at byte 16 is out of range");
  }
  // Counts that do not match the bytes that follow, up to 2^64-1 (count * width would wrap to a
  // small number if it were computed first: 2^63 * 2 = 0).
  for (uint64_t count : {uint64_t{6}, uint64_t{1} << 62, uint64_t{1} << 63, UINT64_MAX}) {
    CAPTURE(count);
    f = valid_fields();
    f.count = count;
    refused(make(f), "tokens of 2 bytes but only 10 bytes follow the header (truncated file?)");
  }
  f = valid_fields();
  f.count = 4;
  refused(make(f), "header says 4 tokens of 2 bytes (8 bytes) but 10 bytes follow the header (2 trailing bytes)");
  f = valid_fields();
  f.ids += "x";  // an odd byte after the ids
  refused(make(f), "(1 trailing bytes)");
  f = valid_fields();
  f.width = 4;  // the same 10 bytes read as 4-byte ids: not a whole number of them
  refused(make(f), "header says 5 tokens of 4 bytes but only 10 bytes follow");

  // An id at or above vocab_size (with a checksum that matches, as a buggy writer would produce).
  f = valid_fields();
  f.ids.replace(6, 2, le(10, 2));  // token 3 = vocab_size
  refused(make(f), "token 3 (byte 46) is 10, not below vocab_size 10");
  f = valid_fields();
  f.width = 4, f.vocab = 100000, f.ids.clear();
  for (uint64_t id : {1ull, 2ull, 0xFFFFFFFFull, 4ull, 5ull}) f.ids += le(id, 4);
  refused(make(f), "token 2 (byte 48) is 4294967295, not below vocab_size 100000");

  // The checksum: a changed id or a changed stored sum.
  f = valid_fields();
  f.custom_checksum = true;
  f.checksum = fnv1a64(f.ids.data(), f.ids.size()) ^ 1;
  refused(make(f), "checksum mismatch");
  std::string bad = make(valid_fields());
  bad[41] = 1;  // id 3 becomes 259 (above vocab_size 10), but the checksum is checked first
  refused(bad, "checksum mismatch");
}

TEST_CASE("token file: writing checks its input and is atomic — reading refuses what is not a file") {
  TempDir dir;
  std::string path = dir.file("w.tokens");
  check_throws_with([&] { write_token_file(path, {1, 2}, 0); }, "[tokens] " + path + ": vocab_size 0 is out of range");
  check_throws_with([&] { write_token_file(path, {1, 2}, int64_t{1} << 31); }, "vocab_size 2147483648 is out of range");
  check_throws_with([&] { write_token_file(path, {1, 10}, 10); }, "token 1 is 10, not in [0, 10)");
  check_throws_with([&] { write_token_file(path, {-1}, 10); }, "token 0 is -1, not in [0, 10)");
  CHECK_FALSE(fs::exists(path));
  // A refused write leaves the previous file as it was and no temporary file.
  write_token_file(path, {1, 2, 3}, 10);
  const std::string before = read_bytes(path);
  CHECK_THROWS_AS(write_token_file(path, {1, 2, 30}, 10), Error);
  CHECK(read_bytes(path) == before);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);

  check_throws_with([&] { read_token_file(dir.file("missing.tokens")); }, "[tokens] " + dir.file("missing.tokens") + ": cannot open");
  check_throws_with([&] { read_token_file(dir.path.string()); }, "not a regular file");
  std::string fifo = dir.file("fifo.tokens");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  check_throws_with([&] { read_token_file(fifo); }, "not a regular file");  // and does not wait for a writer
  check_throws_with([&] { write_token_file(fifo, {1}, 10); }, "is a FIFO, not a regular file: refusing to replace it");

  // The header alone (what the config reads to size the model): the same checks on its fields.
  CHECK(token_file_vocab_size(path) == 10);
  check_throws_with([&] { token_file_vocab_size(fifo); }, "[tokens] " + fifo + ": not a regular file");
  check_throws_with([&] { token_file_vocab_size(dir.file("missing.tokens")); }, "cannot open");
  write_bytes(path, before.substr(0, 39));
  check_throws_with([&] { token_file_vocab_size(path); }, "file has 39 bytes, fewer than the 40-byte header");
  std::string zero_vocab = before;
  for (int k = 16; k < 24; ++k) zero_vocab[k] = 0;
  write_bytes(path, zero_vocab);
  check_throws_with([&] { token_file_vocab_size(path); }, "vocab_size 0 at byte 16 is out of range");
}

// ---- data.source = "tokens" ------------------------------------------------------------------------
namespace {

int cli(const std::vector<std::string>& args, std::string* out_text = nullptr, std::string* err_text = nullptr) {
  std::vector<const char*> argv{"relgrad"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  if (out_text) *out_text = out.str();
  if (err_text) *err_text = err.str();
  return code;
}

// A tiny decoder-only LM (RoPE, dropout) on 16-byte windows of `source` data.
RunConfig tiny_lm_on(const std::string& source, const std::string& path, const std::string& out_dir) {
  RunConfig c = tiny_ed(out_dir);
  c.model_type = ModelKind::DecoderOnly;
  c.model.decoder_self = PositionalConfig{"rope"};
  c.data.source = source;
  (source == "text" ? c.data.text_path : c.data.token_path) = path;
  c.data.context = 16;
  c.data.val_fraction = 0.2;
  c.train.steps = 6;
  return c;
}

}  // namespace

TEST_CASE("token file: relgrad tokenize, then training on the token file gives the text run's batches and losses") {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 40; ++k) text += "Line " + std::to_string(k * 7 % 13) + ": the quick brown fox \xc3\xa9\x01\xff.\n";
  const std::string text_path = dir.file("corpus.txt"), token_path = dir.file("corpus.tokens");
  write_bytes(text_path, text);
  std::string out, err;
  REQUIRE_MESSAGE(cli({"tokenize", text_path, token_path}, &out, &err) == 0, err);
  CHECK(out.find("wrote " + token_path + ": " + std::to_string(text.size()) + " tokens, vocab_size 256") != std::string::npos);
  TokenFile f = read_token_file(token_path);
  REQUIRE(f.tokens.size() == text.size());
  CHECK(f.vocab_size == 256);
  for (size_t i = 0; i < text.size(); ++i) REQUIRE(f.tokens[i] == static_cast<unsigned char>(text[i]));

  RunConfig by_text = tiny_lm_on("text", text_path, dir.file("text_run"));
  RunConfig by_tokens = tiny_lm_on("tokens", token_path, dir.file("token_run"));
  // One run after the other: a Trainer seeds the global generator that dropout draws from.
  std::vector<double> la, lb;
  Trainer a(trainer_options(by_text));
  for (int k = 0; k < 6; ++k) la.push_back(a.train_step());
  Trainer b(trainer_options(by_tokens));
  for (int k = 0; k < 6; ++k) lb.push_back(b.train_step());
  CHECK(b.options().model.config.vocab_size == 256);
  for (Split split : {Split::Train, Split::HeldOut})
    for (int64_t index : {0, 1, 7}) {
      Batch x = a.data().batch(index, split), y = b.data().batch(index, split);
      CHECK(bitwise_equal(x.tokens, y.tokens));
      CHECK(bitwise_equal(x.targets, y.targets));
    }
  CHECK(la == lb);  // bit for bit
  CHECK(la.front() != la.back());  // and training does something
  EvalResult ea = evaluate(a.model(), a.data(), 2), eb = evaluate(b.model(), b.data(), 2);
  CHECK(ea.loss == eb.loss);
  for (size_t k = 0; k < a.model().module->parameters().size(); ++k)
    CHECK(bitwise_equal(a.model().module->parameters()[k], b.model().module->parameters()[k]));

  // A checkpoint of the token run records the data's checksum: a resume on other token data is refused.
  b.save(dir.file("token_run.safetensors"));
  std::vector<int32_t> other = f.tokens;
  other[5] ^= 1;
  write_token_file(token_path, other, 256);
  Trainer c(trainer_options(by_tokens));
  check_throws_with([&] { c.resume(dir.file("token_run.safetensors")); }, "it was trained on a different " + token_path);
  // ... and a vocab_size that differs changes the model itself.
  write_token_file(token_path, f.tokens, 300);
  Trainer d(trainer_options(by_tokens));
  CHECK(d.options().model.config.vocab_size == 300);
  CHECK_THROWS_AS(d.resume(dir.file("token_run.safetensors")), Error);
}

TEST_CASE("token file: bad token data stops a run before anything is written, naming the file") {
  TempDir dir;
  const std::string path = dir.file("bad.tokens");
  RunConfig c = tiny_lm_on("tokens", path, dir.file("run"));
  check_throws_with([&] { Trainer t(trainer_options(c)); }, "[tokens] " + path + ": cannot open");
  write_token_file(path, {1, 2, 3}, 10);
  check_throws_with([&] { Trainer t(trainer_options(c)); }, "'" + path + "' has 3 tokens, which leaves");
  std::string bytes = read_bytes(path);
  bytes.pop_back();
  write_bytes(path, bytes);
  check_throws_with([&] { Trainer t(trainer_options(c)); }, "[tokens] " + path + ": header says 3 tokens of 2 bytes but only 5 bytes follow");
  CHECK_FALSE(std::filesystem::exists(dir.file("run")));
  RunConfig no_path = c;
  no_path.data.token_path = "";
  check_throws_with([&] { no_path.validate(); }, "data.source = \"tokens\" needs data.token_path");
  // The command: a usage error for a missing argument, a runtime error for a missing input.
  std::string err;
  CHECK(cli({"tokenize", dir.file("in.txt")}, nullptr, &err) == 2);
  CHECK(cli({"tokenize", dir.file("missing.txt"), dir.file("out.tokens")}, nullptr, &err) == 1);
  CHECK(err.find("relgrad tokenize: error: [tokenize] " + dir.file("missing.txt") + ": cannot open") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("out.tokens")));
}
