// Checkpoints: the file layout and checksums are specified in docs/checkpoint-format.md, 1.1 to 1.3.
#include "train/trainer/checkpoint.h"

#include <charconv>
#include <cstdio>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "core/version.h"

namespace relgrad {

#define CK_CHECK(cond, ...) RG_CHECK(cond, "checkpoint", path, ": ", __VA_ARGS__)

namespace {

const std::string kModelPrefix = "model.";
const std::string kOptimPrefix = "optim.";
const std::string kExtraPrefix = "extra.";
const std::string kHeaderChecksumKey = "header_checksum";

// A contiguous CPU copy (or the tensor itself when it already is one): the bytes that go to disk.
Tensor host_copy(const Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous()) return t;
  Tensor host = empty(t.shape(), TensorOptions(t.dtype()));
  copy_into(host, t, "checkpoint");
  return host;
}

// Strict decimal / hex parsing: the whole string must be the number (no sign games, no spaces).
template <class T>
bool parse_number(const std::string& s, T& out, int base = 10) {
  if (s.empty() || s.size() > 32) return false;
  if (base == 16 && s.size() != 16) return false;  // the checksum is always 16 digits
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

const std::string& meta_string(const std::map<std::string, std::string>& md, const char* key,
                               const std::string& path) {
  auto it = md.find(key);
  CK_CHECK(it != md.end(), "metadata lacks '", key, "' (not a relgrad checkpoint?)");
  return it->second;
}

// Looks up a required metadata key and parses it as T.
template <class T>
T meta_number(const std::map<std::string, std::string>& md, const char* key, const std::string& path) {
  const std::string& text = meta_string(md, key, path);
  T v{};
  CK_CHECK(parse_number(text, v), "metadata '", key, "' is '", text, "', not a ",
           std::is_signed_v<T> ? "" : "non-negative ", "integer");
  return v;
}

}  // namespace

uint64_t checkpoint_checksum(const std::map<std::string, Tensor>& tensors) {
  uint64_t h = fnv1a64(nullptr, 0);
  for (const auto& [name, t] : tensors) {
    Tensor host = host_copy(t);
    h = fnv1a64(host.raw_data(), static_cast<size_t>(host.numel()) * dtype_size(host.dtype()), h);
  }
  return h;
}

uint64_t checkpoint_header_checksum(const std::map<std::string, std::string>& metadata,
                                    const std::map<std::string, Tensor>& tensors) {
  static const unsigned char zero = 0;
  uint64_t h = fnv1a64(nullptr, 0);
  auto add = [&](const std::string& s) { h = fnv1a64(&zero, 1, fnv1a64(s.data(), s.size(), h)); };
  for (const auto& [key, value] : metadata) {
    if (key == kHeaderChecksumKey) continue;
    add(key);
    add(value);
  }
  for (const auto& [name, t] : tensors) {
    add(name);
    switch (t.dtype()) {  // the safetensors names, as the JSON header spells them
      case DType::Float32: add("F32"); break;
      case DType::Float64: add("F64"); break;
      case DType::Int64: add("I64"); break;
      case DType::Bool: add("BOOL"); break;
      case DType::BFloat16: add("BF16"); break;
      case DType::Float16: add("F16"); break;
    }
    std::string dims;
    for (int64_t d : t.shape()) dims += std::to_string(d) + ",";
    add(dims);
  }
  return h;
}

std::string checksum_hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer,
                     const CheckpointMeta& meta) {
  // Writing another version would produce a file this code could not read back as what it claims.
  CK_CHECK(meta.format_version == kCheckpointFormatVersion, "cannot write format_version ", meta.format_version,
           " (this build writes ", kCheckpointFormatVersion, ")");
  std::map<std::string, Tensor> tensors;
  {
    NoGradGuard no_grad;
    // Host copies now: the optimizer's slots are live tensors, and the checksum must describe exactly
    // the bytes written, so both the checksum and the file are made from these copies.
    auto add = [&](const std::vector<std::pair<std::string, Tensor>>& entries, const std::string& prefix,
                   const char* owner, const char* source) {
      for (const auto& [name, t] : entries) {
        CK_CHECK(t.defined(), owner, " entry '", name, "' is undefined");
        CK_CHECK(tensors.emplace(prefix + name, host_copy(t)).second, owner, " entry '", name, "' appears twice in ",
                 source);
      }
    };
    add(model.state_dict(), kModelPrefix, "model", "state_dict()");
    if (optimizer) add(optimizer->state_tensors(), kOptimPrefix, "optimizer", "state_tensors()");
  }

  std::map<std::string, std::string> md;
  md["format_version"] = std::to_string(meta.format_version);
  md["step"] = std::to_string(meta.step);
  md["config"] = meta.config_json;
  md["rng_seed"] = std::to_string(meta.rng_seed);
  md["rng_offset"] = std::to_string(meta.rng_offset);
  md["data_position"] = std::to_string(meta.data_position);
  md["num_threads"] = std::to_string(meta.num_threads);
  md["optimizer"] = optimizer ? optimizer->name() : "";
  md["writer"] = std::string("relgrad ") + version();
  for (const auto& [key, value] : meta.extra) {
    CK_CHECK(!key.empty(), "extra metadata keys must not be empty");
    md[kExtraPrefix + key] = value;  // the prefix keeps user keys from shadowing the fields above
  }
  md["checksum"] = checksum_hex(checkpoint_checksum(tensors));
  md[kHeaderChecksumKey] = checksum_hex(checkpoint_header_checksum(md, tensors));
  // A writer killed mid-save (SIGKILL, OOM killer) leaves its temp file; the next save of the same
  // path cleans it up. Loaders never look at temps, so they are only wasted space until then.
  remove_stale_temps(path);
  save_safetensors(path, tensors, md);
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile file;
  try {
    file = load_safetensors(path);
  } catch (const Error& e) {
    CK_CHECK(false, "cannot read the file: ", e.what());
  }
  const auto& md = file.metadata;
  Checkpoint ck;
  ck.path = path;

  // The version first: a later version may lay out or checksum the file differently.
  auto version = md.find("format_version");
  CK_CHECK(version != md.end(), "metadata lacks 'format_version' (not a relgrad checkpoint?)");
  CK_CHECK(parse_number(version->second, ck.meta.format_version), "format_version '", version->second,
           "' is not an integer");
  CK_CHECK(ck.meta.format_version == kCheckpointFormatVersion, "unsupported format_version ",
           ck.meta.format_version, " (this build reads version ", kCheckpointFormatVersion,
           "; was it written by a newer relgrad?)");

  // The checksum before anything else is interpreted: a corrupt file is reported as corrupt.
  auto verify = [&](const char* key, const char* label, uint64_t computed, const char* corrupt) {
    const std::string& stored_hex = meta_string(md, key, path);
    uint64_t stored = 0;
    CK_CHECK(parse_number(stored_hex, stored, 16), key, " '", stored_hex, "' is not 16 hex digits");
    CK_CHECK(stored == computed, label, " mismatch (stored ", stored_hex, ", computed ", checksum_hex(computed),
             "): the file", corrupt, " is corrupt");
  };
  verify("checksum", "checksum", checkpoint_checksum(file.tensors), "");
  if (md.count(kHeaderChecksumKey))  // absent only in files written before it existed
    verify("header_checksum", "header checksum", checkpoint_header_checksum(md, file.tensors),
           "'s metadata or tensor table");

  ck.meta.step = meta_number<int64_t>(md, "step", path);
  ck.meta.config_json = meta_string(md, "config", path);
  ck.meta.rng_seed = meta_number<uint64_t>(md, "rng_seed", path);
  ck.meta.rng_offset = meta_number<uint64_t>(md, "rng_offset", path);
  ck.meta.data_position = meta_number<int64_t>(md, "data_position", path);
  ck.meta.num_threads = meta_number<int64_t>(md, "num_threads", path);
  ck.optimizer_name = meta_string(md, "optimizer", path);
  if (auto writer = md.find("writer"); writer != md.end()) ck.meta.writer = writer->second;
  CK_CHECK(ck.meta.step >= 0, "step ", ck.meta.step, " is negative");
  CK_CHECK(ck.meta.data_position >= 0, "data_position ", ck.meta.data_position, " is negative");
  CK_CHECK(ck.meta.num_threads >= 0, "num_threads ", ck.meta.num_threads, " is negative");
  static const char* const kKnown[] = {"format_version", "checksum", "header_checksum", "step", "config",
                                       "rng_seed", "rng_offset", "data_position", "num_threads", "optimizer", "writer"};
  for (const auto& [key, value] : md) {
    if (key.compare(0, kExtraPrefix.size(), kExtraPrefix) == 0) {
      ck.meta.extra[key.substr(kExtraPrefix.size())] = value;
      continue;
    }
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    // Refused rather than ignored: a file should mean exactly one thing to this reader.
    CK_CHECK(known, "unexpected metadata key '", key, "'");
  }

  for (auto& [name, t] : file.tensors) {
    if (name.compare(0, kModelPrefix.size(), kModelPrefix) == 0) {
      ck.model.emplace(name.substr(kModelPrefix.size()), t);
    } else if (name.compare(0, kOptimPrefix.size(), kOptimPrefix) == 0) {
      ck.optimizer.emplace(name.substr(kOptimPrefix.size()), t);
    } else {
      CK_CHECK(false, "unexpected tensor '", name, "' (names start with 'model.' or 'optim.')");
    }
  }
  CK_CHECK(ck.optimizer.empty() == ck.optimizer_name.empty(), "metadata 'optimizer' is '", ck.optimizer_name,
           "' but the file holds ", ck.optimizer.size(), " optimizer tensors");
  return ck;
}

void restore(const Checkpoint& checkpoint, Module& model, Optimizer* optimizer, Generator* rng) {
  const std::string& path = checkpoint.path;
  if (optimizer) {
    CK_CHECK(!checkpoint.optimizer_name.empty(), "holds no optimizer state, but an ", optimizer->name(),
             " optimizer was given to restore");
    CK_CHECK(checkpoint.optimizer_name == optimizer->name(), "holds ", checkpoint.optimizer_name,
             " state, but the optimizer to restore is ", optimizer->name());
  }

  // The model's current values, so that a refused optimizer state can leave the model as it was.
  std::vector<std::pair<std::string, Tensor>> previous;
  if (optimizer) {
    NoGradGuard no_grad;
    for (const auto& [name, t] : model.state_dict()) previous.emplace_back(name, t.clone());
  }
  try {
    model.load_state_dict(checkpoint.model, /*strict=*/true);
  } catch (const Error& e) {
    CK_CHECK(false, "model state does not fit this model: ", e.what());
  }
  if (optimizer) {
    try {
      optimizer->load_state_tensors({checkpoint.optimizer.begin(), checkpoint.optimizer.end()});
    } catch (const Error& e) {
      model.load_state_dict(previous, /*strict=*/true);
      CK_CHECK(false, "optimizer state does not fit this optimizer: ", e.what());
    }
  }
  if (rng) rng->set_state(checkpoint.meta.rng_seed, checkpoint.meta.rng_offset);
}

#undef CK_CHECK

}  // namespace relgrad
