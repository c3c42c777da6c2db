// relgrad sample CHECKPOINT [--input | --prompt | --prompt-midi | --chorale | --melody] [sampling options] [--window N|none]
//                [--model.PLACE.rope_scaling…=VALUE ...]
#include <algorithm>
#include <cctype>

#include "train/command/checkpoint_overrides.h"
#include "train/command/cli_args.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/command/window_option.h"
#include "train/config/source.h"

namespace relgrad::cli_detail {
namespace {

// The .mid files --format midi may write: -o (default sample.mid, harmony.mid for --melody), numbered
// _1 … _N when -n N > 1 (numbered_output, train/config/source.h).
std::vector<NamedPath> midi_outputs(const SampleArgs& a) {
  if (a.format != "midi" && a.output.empty()) return {};
  SampleRequest request;
  request.output = a.output, request.num = a.num;
  const std::string fallback = a.melody.empty() ? "sample.mid" : "harmony.mid";
  std::vector<NamedPath> outputs;
  for (int64_t n = 1; n <= std::max<int64_t>(1, a.num); ++n)
    outputs.push_back({"-o", numbered_output(request, n, fallback)});
  return outputs;
}

bool midi_name(const std::string& path) {  // ends in .mid or .midi, any case
  std::string lower;
  for (char c : path) lower += char(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string ext : {".mid", ".midi"})
    if (lower.size() > ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) return true;
  return false;
}

class SampleCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    SampleArgs& a = args_;
    app.add_option("checkpoint", a.checkpoint, "checkpoint file").required();
    app.add_option("--input", a.input, "synthetic-task models: source tokens by name, e.g. \"4 1 7\"");
    app.add_option("--prompt", a.prompt, "text models: the prompt");
    app.add_option("-n,--num", a.num, "samples (default: 4 held-out inputs for a synthetic task, 1 otherwise)")
        .range(1, 1000);
    app.add_option("--max-new-tokens", a.max_new_tokens, "default: the config's sample.max_new_tokens")
        .range(1, 1 << 20);
    app.add_option("--temperature", a.temperature, "0 = greedy").range(0.0, 1e6);
    app.add_option("--top-k", a.top_k, "0 = off").range(0, 1 << 30);
    app.add_option("--top-p", a.top_p, "1 = off").range(0.0, 1.0, Lower::Open);
    app.add_option("--seed", a.seed, "sampling seed").range(int64_t(0), INT64_MAX);
    app.add_option("--format", a.format, "text (print) or midi (music and chorale models: write .mid files)")
        .one_of({"text", "midi"});
    app.add_option("-o,--output", a.output,
                   "--format midi: output file, .mid or .midi (default sample.mid; _N added for -n > 1)");
    app.add_option("--prompt-midi", a.prompt_midi, "music models and chorale continuations: continue this .mid file");
    app.add_option("--chorale", a.chorale, "chorale models: the valid chorale to continue or harmonise (default 0)")
        .range(int64_t(0), INT64_MAX);
    app.add_option("--melody", a.melody, "chorale harmonisers: harmonise this .mid file's melody");
    app.add_option("--window", a.window, "decoder-only: predict from the last N tokens (default: the training "
                   "context unless the scheme extrapolates), or none: from every token");
    app.add_option("--device", a.device, "cpu (default), cuda or cuda:N: where the model runs");
    app.add_flag("--tf32", tf32_, "TF32 for float32 GEMMs on the GPU, as train.tf32 (no effect on the CPU)");
    app.allow_extras();  // --model.PLACE.KEY=VALUE: RoPE scaling (kEvalModelKeys)
    app.footer("--model.PLACE.KEY=VALUE scales RoPE, e.g. --model.decoder_self.rope_scaling=yarn (" +
               eval_model_keys_text() + ")");
  }

  int run(CommandLine& app, std::ostream& out) override {
    SampleArgs& a = args_;
    refuse_output_over_input("sample",
                             {{"the checkpoint", a.checkpoint}, {"--prompt-midi", a.prompt_midi}, {"--melody", a.melody}},
                             midi_outputs(a));
    const std::vector<std::string> rest = take_model_overrides(app.remaining(), "sample", a.model_overrides);
    if (!rest.empty())
      throw UsageError("[sample] '" + rest.front() + "' is neither an option of relgrad sample nor a " +
                       "--model.PLACE.KEY=VALUE override (" + eval_model_keys_text() + ")");
    // Options given but meaningless are refused rather than ignored without a word.
    if (app.count("--input") && blank(a.input))
      throw UsageError("[sample] --input is empty: give tokens (\"4 1 7\"), or leave --input out");
    if (app.count("--prompt") && a.prompt.empty())
      throw UsageError("[sample] --prompt is empty: give some text, or leave --prompt out");
    // A MIDI file under another name (x.wav) is refused. -o x.mid alone is refused below too: the
    // format is said, not guessed from a name, as for every other output.
    if (app.count("--output") && a.format == "midi" && !midi_name(a.output))
      throw UsageError("[sample] -o " + a.output + ": --format midi writes a MIDI file; name it .mid or .midi");
    if (app.count("--output") && a.format != "midi")
      throw UsageError("[sample] -o " + a.output +
                       " only goes with --format midi (music models write .mid "
                       "files); samples are otherwise printed on stdout (redirect it: > FILE)");
    if (app.count("--window")) parse_window(a.window, "sample");  // a bad value before the checkpoint loads
    Tf32Scope tf32(tf32_);
    return cmd_sample(a, out);
  }

 private:
  SampleArgs args_;
  bool tf32_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_sample_command() { return std::make_unique<SampleCommand>(); }

}  // namespace relgrad::cli_detail
