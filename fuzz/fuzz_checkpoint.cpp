// libFuzzer target: train/trainer/checkpoint.h load_checkpoint on arbitrary bytes. A mutated file almost
// always fails the checksums, which would hide the metadata checks behind them from the fuzzer, so
// when the safetensors layer accepts the input and its "checksum" value is spelled plainly in the
// header, that value is replaced by the correct one (same length, so nothing else moves), and so is
// "header_checksum" when present, before loading; the unpatched input is loaded too, for the
// mismatch paths.
#include <cstdint>
#include <map>
#include <string>

#include "core/safetensors.h"
#include "fuzz/fuzz_common.h"
#include "train/trainer/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static relgrad::fuzz::MemFile file;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)relgrad::load_checkpoint(file.set(bytes));
  } catch (const relgrad::Error&) {
  }
  try {
    relgrad::SafetensorsFile st = relgrad::load_safetensors(file.set(bytes));
    auto it = st.metadata.find("checksum");
    if (it == st.metadata.end()) return 0;
    std::map<std::string, relgrad::Tensor> tensors(st.tensors.begin(), st.tensors.end());
    const std::string good = relgrad::checksum_hex(relgrad::checkpoint_checksum(tensors));
    const std::string spelled = "\"checksum\":\"" + it->second + "\"";
    size_t at = bytes.find(spelled);
    if (it->second.size() != good.size() || at == std::string::npos) return 0;
    bytes.replace(at + 12, good.size(), good);
    auto hit = st.metadata.find("header_checksum");
    if (hit != st.metadata.end()) {
      std::map<std::string, std::string> meta = st.metadata;
      meta["checksum"] = good;
      const std::string good_header = relgrad::checksum_hex(relgrad::checkpoint_header_checksum(meta, tensors));
      const std::string spelled_header = "\"header_checksum\":\"" + hit->second + "\"";
      size_t hat = bytes.find(spelled_header);
      if (hit->second.size() == good_header.size() && hat != std::string::npos)
        bytes.replace(hat + spelled_header.size() - 1 - good_header.size(), good_header.size(), good_header);
    }
    relgrad::Checkpoint ck = relgrad::load_checkpoint(file.set(bytes));
    if (ck.meta.step < 0 || ck.meta.data_position < 0 || ck.meta.num_threads < 0)
      relgrad::fuzz::finding("load_checkpoint accepted a negative step, data_position or num_threads");
  } catch (const relgrad::Error&) {
  }
  return 0;
}
