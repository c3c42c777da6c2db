#include "train/command/cli_args.h"

#include "core/backend/matmul.h"
#include "train/command/cli_commands.h"

namespace relgrad::cli_detail {

bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

Tf32Scope::Tf32Scope(bool on) : before_(backend::allow_tf32()) { backend::set_allow_tf32(on); }
Tf32Scope::~Tf32Scope() { backend::set_allow_tf32(before_); }

}  // namespace relgrad::cli_detail
