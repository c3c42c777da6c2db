// relgrad eval CHECKPOINT [--batches N] [--window C] [--dump-logits FILE [--input ...] [--target ...]] [--data.KEY=VALUE ...]
//              [--model.PLACE.rope_scaling…=VALUE ...]
#include "train/command/checkpoint_overrides.h"
#include "train/command/cli_args.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/command/window_option.h"

namespace relgrad::cli_detail {
namespace {

class EvalCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    EvalArgs& a = args_;
    app.add_option("checkpoint", a.checkpoint, "checkpoint file").required();
    app.add_option("--batches", a.batches, "held-out batches");
    app.add_option("--dump-logits", a.dump_path, "write logits (and their inputs) to this safetensors file");
    app.add_option("--input", a.input, "tokens to dump logits for (default: held-out batch 0)");
    app.add_option("--target", a.target, "encoder-decoder: target tokens fed after <bos>");
    app.add_option("--window", window_, "decoder-only: also score each token once from at most C tokens of context "
                   "(Hugging Face's strided perplexity, stride C/2), or none (the default)");
    app.add_option("--device", a.device, "cpu (default), cuda or cuda:N: where the model runs");
    app.add_flag("--tf32", tf32_, "TF32 for float32 GEMMs on the GPU, as train.tf32 (no effect on the CPU)");
    // --data.KEY=VALUE: the held-out data at other lengths (kEvalDataKeys); --model.PLACE.KEY=VALUE:
    // RoPE scaling (kEvalModelKeys).
    app.allow_extras();
    app.footer("--data.KEY=VALUE evaluates on other held-out data, e.g. --data.max_len=256 (" +
               eval_data_keys_text() + "); --model.PLACE.KEY=VALUE scales RoPE, e.g. " +
               "--model.decoder_self.rope_scaling=yarn (" + eval_model_keys_text() + ")");
  }

  int run(CommandLine& app, std::ostream& out) override {
    EvalArgs& a = args_;
    refuse_output_over_input("eval", {{"the checkpoint", a.checkpoint}}, {{"--dump-logits", a.dump_path}});
    if (app.count("--input") && blank(a.input))
      throw UsageError("[eval] --input is empty: give tokens, or leave --input out (held-out batch 0)");
    if (app.count("--target") && !app.count("--input"))
      throw UsageError(
          "[eval] --target goes with --input (the source it follows); without --input the logits "
          "are those of held-out batch 0, targets included");
    a.data_overrides = take_model_overrides(app.remaining(), "eval", a.model_overrides);
    for (const std::string& o : a.data_overrides)
      if (o.rfind("--data.", 0) != 0 || o.find('=') == std::string::npos)
        throw UsageError("[eval] '" + o + "' is neither an option of relgrad eval nor a --data.KEY=VALUE " +
                         "override (" + eval_data_keys_text() + ") or a --model.PLACE.KEY=VALUE one (" +
                         eval_model_keys_text() + ")");
    if (app.count("--window")) a.window = parse_window(window_, "eval");
    Tf32Scope tf32(tf32_);
    return cmd_eval(a, out);
  }

 private:
  EvalArgs args_;
  bool tf32_ = false;
  std::string window_;  // --window, as typed
};

}  // namespace

std::unique_ptr<Subcommand> make_eval_command() { return std::make_unique<EvalCommand>(); }

}  // namespace relgrad::cli_detail
