// What the subcommands share (train/command/cli_commands.h).
#include "train/command/cli_commands.h"

#include <cctype>
#include <iomanip>
#include <sstream>

#include "core/backend/matmul.h"
#include "train/trainer/run.h"

namespace relgrad::cli_detail {

bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

Device device_option(const std::string& name) {
  try {
    return resolve_device(name, "--device");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

int64_t parse_window(const std::string& text, const char* command) {
  if (text == "none") return 0;
  bool digits = !text.empty() && text.size() <= 9;  // at most 999,999,999 tokens: no overflow below
  for (char ch : text) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
  const int64_t n = digits ? std::stoll(text) : 0;
  if (n < 1)
    throw UsageError(std::string("[") + command + "] --window must be a number of tokens >= 1 or none, got '" +
                     text + "'");
  return n;
}

Tf32Scope::Tf32Scope(bool on) : before_(backend::allow_tf32()) { backend::set_allow_tf32(on); }
Tf32Scope::~Tf32Scope() { backend::set_allow_tf32(before_); }

}  // namespace relgrad::cli_detail
