// relgrad inspect CHECKPOINT: a checkpoint's header, tensors, config and checksum, or what another
// safetensors file is (a --dump-logits file, say).
#include <algorithm>
#include <iomanip>

#include "core/safetensors.h"
#include "train/command/subcommand.h"
#include "train/config/config.h"
#include "train/trainer/checkpoint.h"

namespace relgrad::cli_detail {
namespace {

// A long metadata value (a music model's extra.vocab is a JSON list of 5,000 characters) in lines of at
// most 100 characters, cut after a comma or a space where there is one, each further line indented by
// `indent` to sit under the first.
std::string wrapped(const std::string& value, size_t indent) {
  constexpr size_t kWidth = 100;
  std::string text;
  size_t start = 0;
  while (value.size() - start > kWidth) {
    size_t cut = value.find_last_of(", ", start + kWidth - 1);
    cut = cut == std::string::npos || cut < start ? start + kWidth : cut + 1;
    text += value.substr(start, cut - start) + "\n" + std::string(indent, ' ');
    start = cut;
  }
  return text + value.substr(start);
}

// Shows a checkpoint even when its checksum is wrong (that is when one wants to look), then exits 1.
int inspect(const std::string& path, std::ostream& out) {
  SafetensorsFile file = load_safetensors(path);
  auto meta = [&](const std::string& k) {
    auto it = file.metadata.find(k);
    return it == file.metadata.end() ? std::string("(missing)") : it->second;
  };
  auto row = [&](const std::string& k, const std::string& v) {  // a longer key keeps two spaces before its value
    out << std::left << std::setw(int(std::max<size_t>(16, k.size() + 2))) << k << v << "\n";
  };
  auto tensor_rows = [&] {  // a long name keeps two spaces
    out << "\ntensors\n";
    for (const auto& [name, t] : file.tensors)
      out << "  " << std::left << std::setw(int(std::max<size_t>(52, name.size() + 2))) << name << std::setw(9)
          << dtype_name(t.dtype()) << shape_str(t.shape()) << "\n";
  };
  out << "file            " << path << "\n";
  // A safetensors file with neither a format version nor a checksum is no checkpoint, damaged or
  // whole: `relgrad eval --dump-logits` writes such files (logits and the tensors that made them, no
  // checksum by design), as do other programs. Said as such, not as a checksum mismatch.
  if (!file.metadata.count("format_version") && !file.metadata.count("checksum")) {
    const bool logits = file.tensors.count("logits") && file.metadata.count("checkpoint");
    out << "kind            "
        << (logits ? "logits written by relgrad eval --dump-logits from " + meta("checkpoint") + " at step " +
                         meta("step")
                   : std::string("a safetensors file that is not a relgrad checkpoint"))
        << " (no checksum: such files carry none)\n";
    for (const auto& [k, v] : file.metadata) row(k, v);
    tensor_rows();
    out << file.tensors.size() << " tensors\n";
    return 0;
  }
  for (const char* k :
       {"format_version", "writer", "step", "optimizer", "data_position", "num_threads", "rng_seed", "rng_offset"})
    row(k, meta(k));
  for (const auto& [k, v] : file.metadata)
    if (k.rfind("extra.", 0) == 0) row(k, wrapped(v, 16));
  int64_t params = 0;
  for (const auto& [name, t] : file.tensors)
    if (name.rfind("model.", 0) == 0) params += t.numel();
  tensor_rows();
  out << file.tensors.size() << " tensors, " << params << " model values\n";
  std::string config = meta("config");
  if (config != "(missing)") {
    RunConfig c = RunConfig::defaults();
    try {
      load_config_json_text(c, config, "config");
      out << "\nconfig\n" << config_to_toml(c);
    } catch (const Error& e) {
      out << "\nconfig (not usable: " << e.what() << ")\n" << config << "\n";
    }
  }
  const std::string hex = checksum_hex(checkpoint_checksum(file.tensors));
  const std::string stored = meta("checksum");
  if (stored == hex) {
    out << "\nchecksum        " << stored << " (ok: matches the data section)\n";
    load_checkpoint(path);  // the full verification (version, metadata values, names) as sample/eval would
    return 0;
  }
  out << "\nchecksum        MISMATCH: stored " << stored << ", data section hashes to " << hex << "\n";
  throw Error("[inspect] " + path + ": checksum mismatch, the data section is corrupt (stored " + stored +
              ", computed " + hex + ")");
}

class InspectCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override { app.add_option("checkpoint", path_, "checkpoint file").required(); }
  int run(CommandLine&, std::ostream& out) override { return inspect(path_, out); }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Subcommand> make_inspect_command() { return std::make_unique<InspectCommand>(); }

}  // namespace relgrad::cli_detail
