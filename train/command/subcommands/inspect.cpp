// relgrad inspect CHECKPOINT
#include "train/command/cli_commands.h"
#include "train/command/subcommand.h"

namespace relgrad::cli_detail {
namespace {

class InspectCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override { app.add_option("checkpoint", path_, "checkpoint file").required(); }
  int run(CommandLine&, std::ostream& out) override { return cmd_inspect(path_, out); }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Subcommand> make_inspect_command() { return std::make_unique<InspectCommand>(); }

}  // namespace relgrad::cli_detail
