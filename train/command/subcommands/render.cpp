// relgrad render FILE.mid [-o OUT.wav] [--soundfont FILE.sf2]
#include "train/command/cli_commands.h"
#include "train/command/subcommand.h"

namespace relgrad::cli_detail {
namespace {

class RenderCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("midi", midi_, "the .mid file").required();
    app.add_option("-o,--output", wav_, "the .wav file (default: next to the .mid)");
    app.add_option("--soundfont", soundfont_, "SoundFont file");
  }
  int run(CommandLine&, std::ostream& out) override { return cmd_render(midi_, wav_, soundfont_, out); }

 private:
  std::string midi_, wav_, soundfont_ = "/usr/share/sounds/sf2/FluidR3_GM.sf2";
};

}  // namespace

std::unique_ptr<Subcommand> make_render_command() { return std::make_unique<RenderCommand>(); }

}  // namespace relgrad::cli_detail
