// relgrad train [--config FILE] [--resume CHECKPOINT] [--key=value ...] [--device D] [--dry-run] [--help-config]
#include "train/command/cli_commands.h"
#include "train/command/subcommand.h"
#include "train/config/config.h"

namespace relgrad::cli_detail {
namespace {

class TrainCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("-c,--config", config_path_, "TOML or JSON config (default: the built-in default run)");
    app.add_option("--resume", resume_, "checkpoint to continue from (its config, unless --config is given)");
    app.add_flag("--dry-run", dry_run_, "print the effective config and stop");
    app.add_flag("--help-config", help_config_, "list every config key with type and default");
    app.add_option("--device", device_, "cpu or cuda: shorthand for --train.device=...");
    app.allow_extras();  // the --key=value overrides
  }

  int run(CommandLine& app, std::ostream& out) override {
    if (help_config_) {
      out << config_help();
      return 0;
    }
    std::vector<std::string> overrides = app.remaining();
    for (size_t i = 0; i < overrides.size(); ++i) {
      const std::string& o = overrides[i];
      if (o.rfind("--", 0) == 0 && o.find('=') != std::string::npos) continue;
      std::string hint;
      // "--train.steps 5": a config key with its value after a blank, which CLI11 cannot know.
      if (o.rfind("--", 0) == 0 && is_config_key(o.substr(2)))
        hint = i + 1 < overrides.size() && overrides[i + 1].rfind("--", 0) != 0
                   ? ": write " + o + "=" + overrides[i + 1] + " (a config override takes '=', not a blank)"
                   : ": write " + o + "=VALUE (a config override takes '=')";
      throw UsageError("[config] '" + o + "' is neither an option of relgrad train nor a --key=value override" +
                       hint);
    }
    // After the --key=value overrides, so that it wins over a --train.device given too.
    if (!device_.empty()) overrides.push_back("--train.device=" + device_);
    return cmd_train(config_path_, resume_, overrides, dry_run_, out);
  }

 private:
  std::string config_path_, resume_, device_;
  bool dry_run_ = false, help_config_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace relgrad::cli_detail
