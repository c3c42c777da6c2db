// relgrad sample CHECKPOINT [--input | --prompt | --prompt-midi | --chorale | --melody] [sampling options] [--window N|none]
//                [--model.PLACE.rope_scaling…=VALUE ...]
// What differs between data sources is asked of the run's source (train/config/source.h).
#include <cctype>

#include "train/command/checkpoint_overrides.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/config/source.h"

namespace relgrad::cli_detail {
namespace {

// The .mid files --format midi may write: -o (default sample.mid, harmony.mid for --melody), numbered
// _1 … _N when -n N > 1 (numbered_output, train/config/source.h).
std::vector<NamedPath> midi_outputs(const SampleRequest& r) {
  if (r.format != "midi" && r.output.empty()) return {};
  const std::string fallback = r.melody.empty() ? "sample.mid" : "harmony.mid";
  std::vector<NamedPath> outputs;
  for (int64_t n = 1; n <= r.num; ++n)
    outputs.push_back({"-o", numbered_output(r, n, fallback)});
  return outputs;
}

bool midi_name(const std::string& path) {  // ends in .mid or .midi, any case
  std::string lower;
  for (char c : path) lower += char(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string ext : {".mid", ".midi"})
    if (lower.size() > ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) return true;
  return false;
}

// The window a decoder-only model samples under (SamplingOptions::window: 0 = every token), by default
// the training context wherever the scheme is not known to extrapolate (default_sample_window,
// train/config/run_options.h), and the line that says which rule ran and why: "window 64 tokens (…): …".
struct SampleWindow {
  int64_t tokens = 0;
  std::string header;
};

SampleWindow described(int64_t tokens, const std::string& why, const std::string& other) {
  if (tokens == 0) return {0, "window none (" + why + "): every token is fed, the KV cache holds them all" + other};
  const std::string w = std::to_string(tokens);
  return {tokens, "window " + w + " tokens (" + why + "): KV cache while the sequence fits, then each step " +
                      "recomputes the last " + w + other};
}

// `option`: what --window said ("" when it was not given). An encoder-decoder takes no window (a usage
// error when one is given); its header is empty.
SampleWindow sample_window(const RunConfig& c, const std::string& option) {
  if (c.model_type != ModelKind::DecoderOnly) {
    if (!option.empty() && option != "none")
      throw UsageError("[sample] --window " + option + " is for decoder-only models: an encoder-decoder's "
                       "target is not windowed");
    return {};
  }
  if (!option.empty()) {
    const int64_t n = parse_window(option, "sample");
    return described(n, n == 0 ? "--window none" : "--window " + std::to_string(n), "");
  }
  const DefaultWindow d = default_sample_window(c);
  return described(d.tokens, d.why, d.tokens == 0 ? "; --window N sets a window" : "; --window none feeds every token");
}

class SampleCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    SampleRequest& r = request_;
    app.add_option("checkpoint", checkpoint_, "checkpoint file").required();
    app.add_option("--input", r.input, "synthetic-task models: source tokens by name, e.g. \"4 1 7\"");
    app.add_option("--prompt", r.prompt, "text models: the prompt");
    app.add_option("-n,--num", num_, "samples (default: 4 held-out inputs for a synthetic task, 1 otherwise)")
        .range(1, 1000);
    app.add_option("--max-new-tokens", max_new_tokens_, "default: the config's sample.max_new_tokens")
        .range(1, 1 << 20);
    app.add_option("--temperature", temperature_, "0 = greedy").range(0.0, 1e6);
    app.add_option("--top-k", top_k_, "0 = off").range(0, 1 << 30);
    app.add_option("--top-p", top_p_, "1 = off").range(0.0, 1.0, Lower::Open);
    app.add_option("--seed", seed_, "sampling seed").range(int64_t(0), INT64_MAX);
    app.add_option("--format", r.format, "text (print) or midi (music and chorale models: write .mid files)")
        .one_of({"text", "midi"});
    app.add_option("-o,--output", r.output,
                   "--format midi: output file, .mid or .midi (default sample.mid; _N added for -n > 1)");
    app.add_option("--prompt-midi", r.prompt_midi, "music models and chorale continuations: continue this .mid file");
    app.add_option("--chorale", r.chorale, "chorale models: the valid chorale to continue or harmonise (default 0)")
        .range(int64_t(0), INT64_MAX);
    app.add_option("--melody", r.melody, "chorale harmonisers: harmonise this .mid file's melody");
    app.add_option("--window", window_, "decoder-only: predict from the last N tokens (default: the training "
                   "context unless the scheme extrapolates), or none: from every token");
    app.add_option("--device", device_, "cpu (default), cuda or cuda:N: where the model runs");
    app.add_flag("--tf32", tf32_, "TF32 for float32 GEMMs on the GPU, as train.tf32 (no effect on the CPU)");
    app.allow_extras();  // --model.PLACE.KEY=VALUE: RoPE scaling (kEvalModelKeys)
    app.footer("--model.PLACE.KEY=VALUE scales RoPE, e.g. --model.decoder_self.rope_scaling=yarn (" +
               eval_model_keys_text() + ")");
  }

  int run(CommandLine& app, std::ostream& out) override {
    SampleRequest& r = request_;
    if (num_ > 0) r.num = num_;  // without -n: 1 for the outputs' names now, the source's count below
    refuse_output_over_input("sample",
                             {{"the checkpoint", checkpoint_}, {"--prompt-midi", r.prompt_midi}, {"--melody", r.melody}},
                             midi_outputs(r));
    std::vector<std::string> model_overrides;
    const std::vector<std::string> rest = take_model_overrides(app.remaining(), "sample", model_overrides);
    if (!rest.empty())
      throw UsageError("[sample] '" + rest.front() + "' is neither an option of relgrad sample nor a " +
                       "--model.PLACE.KEY=VALUE override (" + eval_model_keys_text() + ")");
    // Options given but meaningless are refused rather than ignored without a word.
    if (app.count("--input") && blank(r.input))
      throw UsageError("[sample] --input is empty: give tokens (\"4 1 7\"), or leave --input out");
    if (app.count("--prompt") && r.prompt.empty())
      throw UsageError("[sample] --prompt is empty: give some text, or leave --prompt out");
    // A MIDI file under another name (x.wav) is refused. -o x.mid alone is refused below too: the
    // format is said, not guessed from a name, as for every other output.
    if (app.count("--output") && r.format == "midi" && !midi_name(r.output))
      throw UsageError("[sample] -o " + r.output + ": --format midi writes a MIDI file; name it .mid or .midi");
    if (app.count("--output") && r.format != "midi")
      throw UsageError("[sample] -o " + r.output +
                       " only goes with --format midi (music models write .mid "
                       "files); samples are otherwise printed on stdout (redirect it: > FILE)");
    if (app.count("--window")) parse_window(window_, "sample");  // a bad value before the checkpoint loads
    Tf32Scope tf32(tf32_);
    LoadedRun run = load_run_with(checkpoint_, device_option(device_), model_overrides, "sample", out);
    RunData data(run.config);
    data.vocab();  // first: its errors (a synthetic task is built for it) come before the options' checks
    SamplingOptions o = sampling_options(run.config.sample);  // the options given override the config
    if (max_new_tokens_ >= 0) o.max_new_tokens = max_new_tokens_;
    if (temperature_ >= 0) o.temperature = temperature_;
    if (top_k_ >= 0) o.top_k = top_k_;
    if (top_p_ >= 0) o.top_p = top_p_;
    if (seed_ >= 0) o.seed = static_cast<uint64_t>(seed_);
    const SampleWindow window = sample_window(run.config, window_);
    o.window = window.tokens;
    try {
      check_sampling_options(o);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    // What the data source does not take is refused here, naming the sources that do.
    const DataSource& source = data.source();
    const SampleOptionsTaken takes = source.sample_options();
    if (num_ < 0) r.num = source.default_sample_count();
    if (!takes.chorale && (r.chorale >= 0 || !r.melody.empty()))
      throw UsageError(std::string("[sample] ") + (r.melody.empty() ? "--chorale" : "--melody") +
                       " needs a chorale model (data.source = \"chorales\")");
    if (!takes.midi_out && r.format == "midi")
      throw UsageError("[sample] --format midi needs a music model or a chorale model "
                       "(data.source = \"music\" or \"chorales\")");
    if (!takes.midi_prompt && !r.prompt_midi.empty())
      throw UsageError("[sample] --prompt-midi needs a music model or a chorale continuation");
    r.max_new_tokens_given = max_new_tokens_ >= 0;
    if (!window.header.empty()) out << window.header << "\n";  // which rule the samples below ran under
    try {
      source.sample(r, run, data, o, out);
    } catch (const InputError& e) {
      throw UsageError(e.what());
    }
    return 0;
  }

 private:
  SampleRequest request_;
  std::string checkpoint_, device_ = "cpu", window_;  // --window N | none ("" = the default)
  int64_t num_ = -1;  // -n; -1: not given, the source's default_sample_count()
  int64_t max_new_tokens_ = -1, top_k_ = -1, seed_ = -1;  // -1: not given, the config's
  double temperature_ = -1, top_p_ = -1;
  bool tf32_ = false;
};

}  // namespace

std::unique_ptr<Subcommand> make_sample_command() { return std::make_unique<SampleCommand>(); }

}  // namespace relgrad::cli_detail
