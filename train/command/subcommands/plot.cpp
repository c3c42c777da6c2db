// relgrad plot LOG [-o OUT.svg|OUT.png]
#include <ostream>

#include "core/file_io.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/plot/plot.h"

namespace relgrad::cli_detail {
namespace {

class PlotCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("log", log_, "log.jsonl or log.csv").required();
    app.add_option("-o,--output", out_path_, "output .svg or .png (default: loss.svg next to the log)");
  }

  int run(CommandLine&, std::ostream& out) override {
    if (out_path_.empty()) out_path_ = directory_of(log_) + "/loss.svg";
    refuse_output_over_input("plot", {{"the log", log_}}, {{"-o", out_path_}});
    plot_training_log(log_, out_path_);
    out << "wrote " << out_path_ << "\n";
    return 0;
  }

 private:
  std::string log_, out_path_;
};

}  // namespace

std::unique_ptr<Subcommand> make_plot_command() { return std::make_unique<PlotCommand>(); }

}  // namespace relgrad::cli_detail
