// safetensors: the tensor file format of Hugging Face (github.com/huggingface/safetensors), chosen
// because loading it runs no code (unlike pickle) and every byte of it can be validated.
//
//   [8 bytes: N, little-endian u64] [N bytes: JSON header] [data section: raw little-endian bytes]
//   header = {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//             "__metadata__": {"key": "value", ...}}          (offsets relative to the data section)
//
// Supported dtypes: F32, F64, I64, BOOL (relgrad's four). The loader trusts nothing: every length,
// offset and size is checked against the file size before anything is allocated, tensors must tile
// the data section exactly (no overlap, no gap), duplicate names are rejected, and a malformed file
// gives relgrad::Error("[safetensors] <path>: <what>"), never a crash. Writing is atomic (temp file in
// the same directory, fsync, rename, fsync of the directory), so a crash mid-save keeps the old file.
#pragma once
#include <map>
#include <string>

#include "core/tensor.h"

namespace relgrad {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // contiguous CPU tensors, each with its own storage
  std::map<std::string, std::string> metadata;
};

// Headers longer than this are refused (the reference implementation's limit, against DoS).
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

SafetensorsFile load_safetensors(const std::string& path);

// Any device, dtype in {float32, float64, int64, bool, bfloat16, float16}, any strides (written contiguous).
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace relgrad
