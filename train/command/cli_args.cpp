#include "train/command/cli_args.h"

#include "core/backend/matmul.h"
#include "train/command/cli_commands.h"

namespace relgrad::cli_detail {

bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

std::vector<std::string> comma_list(const std::string& text, const std::string& option, const std::string& command) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty())
      throw UsageError("[" + command + "] " + option + " " + text + ": an empty item between commas");
    items.push_back(item);
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::vector<uint64_t> seed_list(const std::string& text, const std::string& command) {
  std::vector<uint64_t> seeds;
  for (const std::string& seed : comma_list(text, "--seeds", command)) {
    if (seed.find_first_not_of("0123456789") != std::string::npos || seed.size() > 19)
      throw UsageError("[" + command + "] --seeds " + text + ": '" + seed + "' is not a non-negative integer");
    seeds.push_back(std::stoull(seed));
  }
  return seeds;
}

Tf32Scope::Tf32Scope(bool on) : before_(backend::allow_tf32()) { backend::set_allow_tf32(on); }
Tf32Scope::~Tf32Scope() { backend::set_allow_tf32(before_); }

}  // namespace relgrad::cli_detail
