// libFuzzer target: train/data/token_file.h parse_token_file on arbitrary bytes. A mutated payload
// almost always fails the checksum, which would hide the per-token checks from the fuzzer, so the
// input is parsed as it is and then once more with the checksum field (bytes 32..39) set to the
// payload's real checksum.
#include <cstdint>

#include "core/file_io.h"
#include "fuzz/fuzz_common.h"
#include "train/data/token_file.h"

namespace {

void parse(const std::string& bytes) {
  try {
    relgrad::TokenFile tf = relgrad::parse_token_file(bytes, "fuzz");
    const uint64_t payload = bytes.size() - relgrad::kTokenFileHeaderBytes;
    if (tf.tokens.empty() ? payload != 0 : payload % tf.tokens.size() != 0)
      relgrad::fuzz::finding("token count does not divide the payload");
    for (int32_t id : tf.tokens)
      if (id < 0 || id >= tf.vocab_size) relgrad::fuzz::finding("accepted a token id outside [0, vocab_size)");
  } catch (const relgrad::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  parse(bytes);
  const size_t header = relgrad::kTokenFileHeaderBytes;
  if (bytes.size() >= header) {
    uint64_t sum = relgrad::fnv1a64(bytes.data() + header, bytes.size() - header);
    for (int k = 0; k < 8; ++k) bytes[32 + k] = static_cast<char>(sum >> (8 * k));
    parse(bytes);
  }
  return 0;
}
