// libFuzzer target: core/safetensors.h load_safetensors on arbitrary bytes (the checkpoint format).
// Accepted files must not claim more tensor bytes than the input holds (nothing is allocated beyond
// the file size).
#include <cstdint>

#include "core/safetensors.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static relgrad::fuzz::MemFile file;
  const std::string& path = file.set(data, size);
  try {
    relgrad::SafetensorsFile st = relgrad::load_safetensors(path);
    uint64_t bytes = 0;
    for (const auto& [name, t] : st.tensors) {
      if (!t.is_contiguous() || !t.device().is_cpu()) relgrad::fuzz::finding("tensor '" + name + "' not a contiguous CPU tensor");
      bytes += static_cast<uint64_t>(t.numel()) * relgrad::dtype_size(t.dtype());
    }
    if (bytes > size) relgrad::fuzz::finding("tensors hold more bytes than the file");
  } catch (const relgrad::Error&) {
  }
  return 0;
}
