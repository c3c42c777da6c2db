// relgrad eval CHECKPOINT [--batches N] [--window C] [--dump-logits FILE [--input ...] [--target ...]] [--data.KEY=VALUE ...]
//              [--model.PLACE.rope_scaling…=VALUE ...]
#include <chrono>
#include <iostream>

#include "autograd/grad_mode.h"
#include "core/safetensors.h"
#include "train/command/checkpoint_overrides.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"

namespace relgrad::cli_detail {
namespace {

constexpr int64_t kMaxEvalBatches = 100000;

// --input / --target of `relgrad eval --dump-logits` as ids, in the data source's reading (token names,
// a text model's bytes); a token the vocabulary lacks is a usage error.
std::vector<int64_t> input_ids(const RunData& data, const std::string& text) {
  try {
    return data.source().input_ids(text, data.vocab(), "eval");
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
}

class EvalCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("checkpoint", checkpoint_, "checkpoint file").required();
    app.add_option("--batches", batches_, "held-out batches");
    app.add_option("--dump-logits", dump_path_, "write logits (and their inputs) to this safetensors file");
    app.add_option("--input", input_, "tokens to dump logits for (default: held-out batch 0)");
    app.add_option("--target", target_, "encoder-decoder: target tokens fed after <bos>");
    app.add_option("--window", window_text_, "decoder-only: also score each token once from at most C tokens of context "
                   "(Hugging Face's strided perplexity, stride C/2), or none (the default)");
    app.add_option("--device", device_, "cpu (default), cuda or cuda:N: where the model runs");
    app.add_flag("--tf32", tf32_, "TF32 for float32 GEMMs on the GPU, as train.tf32 (no effect on the CPU)");
    // --data.KEY=VALUE: the held-out data at other lengths (kEvalDataKeys); --model.PLACE.KEY=VALUE:
    // RoPE scaling (kEvalModelKeys).
    app.allow_extras();
    app.footer("--data.KEY=VALUE evaluates on other held-out data, e.g. --data.max_len=256 (" +
               eval_data_keys_text() + "); --model.PLACE.KEY=VALUE scales RoPE, e.g. " +
               "--model.decoder_self.rope_scaling=yarn (" + eval_model_keys_text() + ")");
  }

  int run(CommandLine& app, std::ostream& out) override {
    refuse_output_over_input("eval", {{"the checkpoint", checkpoint_}}, {{"--dump-logits", dump_path_}});
    if (app.count("--input") && blank(input_))
      throw UsageError("[eval] --input is empty: give tokens, or leave --input out (held-out batch 0)");
    if (app.count("--target") && !app.count("--input"))
      throw UsageError(
          "[eval] --target goes with --input (the source it follows); without --input the logits "
          "are those of held-out batch 0, targets included");
    // "--data.KEY=VALUE" for the keys of kEvalDataKeys (the held-out data at another length, D3 of
    // docs/experiments.md) and "--model.PLACE.KEY=VALUE" for those of kEvalModelKeys (RoPE scaling for a
    // checkpoint trained without it); the rest of the model stays the checkpoint's.
    std::vector<std::string> model_overrides;
    std::vector<std::string> data_overrides = take_model_overrides(app.remaining(), "eval", model_overrides);
    for (const std::string& o : data_overrides)
      if (o.rfind("--data.", 0) != 0 || o.find('=') == std::string::npos)
        throw UsageError("[eval] '" + o + "' is neither an option of relgrad eval nor a --data.KEY=VALUE " +
                         "override (" + eval_data_keys_text() + ") or a --model.PLACE.KEY=VALUE one (" +
                         eval_model_keys_text() + ")");
    if (app.count("--window")) window_ = parse_window(window_text_, "eval");
    Tf32Scope tf32(tf32_);
    if (batches_ < 1) throw UsageError("[eval] --batches must be >= 1, got " + std::to_string(batches_));
    if (batches_ > kMaxEvalBatches)
      throw UsageError("[eval] --batches " + std::to_string(batches_) + " is more than the limit of " +
                       std::to_string(kMaxEvalBatches) +
                       " (held-out batches; a few hundred give a steady estimate)");
    if (dump_path_.empty() && (!input_.empty() || !target_.empty()))
      throw UsageError("[eval] --input / --target only go with --dump-logits FILE");
    if (window_ > 0 && !dump_path_.empty())
      throw UsageError("[eval] --window scores held-out batches; it does not go with --dump-logits FILE");
    LoadedRun run = load_run_with(checkpoint_, device_option(device_), model_overrides, "eval", out);
    apply_eval_data_overrides(run.config, data_overrides, out);
    const std::pair<std::string, std::string> data_file = data_source(run.config).data_path(run.config);
    refuse_output_over_input("eval", {{"--" + data_file.first, data_file.second}}, {{"--dump-logits", dump_path_}});
    RunData data(run.config);
    RunModel& m = *run.model;
    if (window_ > 0 && m.kind() != ModelKind::DecoderOnly)
      throw UsageError("[eval] --window " + std::to_string(window_) +
                       " reads a decoder-only model's tokens through a sliding window; this is an encoder-decoder model");
    if (!dump_path_.empty()) {
      // The tensors that produced the logits go into the file too, so it can be checked on its own.
      std::map<std::string, Tensor> tensors;
      NoGradGuard no_grad;
      m.module->eval();
      Batch b;
      if (input_.empty()) {
        b = data.batch(0, Split::HeldOut);
        if (b.decoder_only()) {
          tensors["tokens"] = b.tokens;
          tensors["targets"] = b.targets;
          if (b.padding_mask.defined()) tensors["padding_mask"] = b.padding_mask;
        } else {
          tensors["src"] = b.src, tensors["tgt_in"] = b.tgt_in, tensors["tgt_out"] = b.tgt_out;
          tensors["src_padding_mask"] = b.src_padding_mask, tensors["tgt_padding_mask"] = b.tgt_padding_mask;
          if (b.tgt_positions.defined()) tensors["tgt_positions"] = b.tgt_positions;
        }
      } else if (m.kind() == ModelKind::DecoderOnly) {
        if (!target_.empty()) throw UsageError("[eval] --target is for encoder-decoder models");
        std::vector<int64_t> ids = input_ids(data, input_);
        warn_if_longer_than_trained("eval", ids.size(), run.config);
        b.tokens = tensors["tokens"] = ids_row(ids);
      } else {
        std::vector<int64_t> src = input_ids(data, input_);
        warn_if_longer_than_trained("eval", src.size(), run.config);
        std::vector<int64_t> tgt_in{kBos};
        if (!target_.empty())
          for (int64_t id : input_ids(data, target_)) tgt_in.push_back(id);
        b.src = tensors["src"] = ids_row(src);
        b.tgt_in = tensors["tgt_in"] = ids_row(tgt_in);
        // An explicitly aligned model: the queries' places as its data gives them.
        if (const auto place = target_positions(run.config)) b.tgt_positions = tensors["tgt_positions"] = place(tgt_in.size());
      }
      tensors["logits"] = m.logits(b).to(Device::cpu());
      // The overrides the logits were made with ("model.decoder_self.rope_scaling=yarn data.max_len=24"; ""
      // for none), so the file says which model and data it holds without the command line.
      std::string made_with;
      for (const auto* list : {&model_overrides, &data_overrides})
        for (const std::string& o : *list) made_with += (made_with.empty() ? "" : " ") + o.substr(2);
      save_safetensors(dump_path_, tensors,
                       {{"checkpoint", checkpoint_}, {"step", std::to_string(run.checkpoint.meta.step)}, {"overrides", made_with}});
      out << "wrote logits " << shape_str(tensors["logits"].shape()) << " to " << dump_path_ << "\n";
      return 0;
    }
    // A long evaluation says how far it is, on stderr every 10 s (stdout keeps only the result).
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    auto last = start;
    EvalResult e = evaluate(m, data.dataset(), batches_, nullptr, [&](int64_t done) {
      const auto now = clock::now();
      if (done == batches_ || now - last < std::chrono::seconds(10)) return;
      last = now;
      const double spent = std::chrono::duration<double>(now - start).count();
      std::cerr << "relgrad eval: " << done << "/" << batches_ << " batches, " << fixed(spent, 0) << " s, about "
                << fixed(spent / double(done) * double(batches_ - done), 0) << " s to go\n";
    });
    out << "step " << run.checkpoint.meta.step << ": held-out loss " << fixed(e.loss, 4) << ", token accuracy "
        << fixed(100 * e.accuracy, 2) << "% (" << e.tokens << " tokens)";
    if (e.rows_are_examples)  // a language model's windows are cut anywhere: no sequence accuracy
      out << ", sequence accuracy " << fixed(100 * e.sequence_accuracy, 2) << "% (" << e.sequences
          << " sequences)";
    out << "\n";
    if (window_ > 0) {  // the same tokens, each from at most C tokens of context (train/trainer/run.h)
      const EvalResult w = evaluate_strided(m, data.dataset(), batches_, window_);
      out << "window " << window_ << " (stride " << (window_ + 1) / 2 << "): held-out loss " << fixed(w.loss, 4)
          << ", token accuracy " << fixed(100 * w.accuracy, 2) << "% (" << w.tokens << " tokens)\n";
    }
    return 0;
  }


 private:
  std::string checkpoint_, dump_path_, input_, target_, device_ = "cpu";
  std::string window_text_;  // --window, as typed
  int64_t batches_ = 8, window_ = 0;  // window_: the strided score's context (0 = none)
  bool tf32_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_eval_command() { return std::make_unique<EvalCommand>(); }

}  // namespace relgrad::cli_detail
