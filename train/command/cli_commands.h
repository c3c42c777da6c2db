// Internal to the `relgrad` command: the subcommands (cli_commands.cpp), called by run_cli (cli.cpp).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "train/trainer/sampler.h"

namespace relgrad {
struct LoadedRun;  // train/config/run_options.h

namespace cli_detail {

// A usage error: exit code 2 (a runtime Error gives 1).
struct UsageError : Error {
  using Error::Error;
};

struct SampleArgs {
  std::string checkpoint, input, prompt;
  std::string format = "text", output, prompt_midi;
  int64_t num = -1, max_new_tokens = -1, top_k = -1;  // num: 4 held-out inputs, or 1 text / music sample
  double temperature = -1, top_p = -1;
  int64_t seed = -1;
  std::string device = "cpu";  // --device
  int64_t chorale = -1;        // chorale models: --chorale N, the valid chorale to prompt / harmonise (default 0)
  std::string melody;          // chorale harmonisers: --melody FILE.mid, the melody to harmonise
  std::string window;          // --window N | none ("" = the default: train/command/window_option.h)
  std::vector<std::string> model_overrides;  // "--model.PLACE.rope_scaling…=VALUE" (kEvalModelKeys)
};

int cmd_train(const std::string& config_path, const std::string& resume, const std::vector<std::string>& overrides,
              bool dry_run, std::ostream& out);
int cmd_sample(SampleArgs a, std::ostream& out);
struct EvalArgs {
  std::string checkpoint;
  int64_t batches = 8;           // --batches: held-out batches
  std::string dump_path;         // --dump-logits FILE: write the logits instead of evaluating
  std::string input, target;     // --input / --target: the tokens to dump logits for
  std::string device = "cpu";    // --device
  int64_t window = 0;            // --window C: also the strided score, at most C tokens of context (0 = none)
  // "--data.KEY=VALUE" for the keys of kEvalDataKeys (the held-out data at another length, D3 of
  // docs/experiments.md); any other key is a usage error, and so is a value that changes the vocabulary.
  std::vector<std::string> data_overrides;
  // "--model.PLACE.KEY=VALUE" for the keys of kEvalModelKeys: RoPE scaling for a checkpoint trained
  // without it; the rest of the model stays the checkpoint's.
  std::vector<std::string> model_overrides;
};
int cmd_eval(const EvalArgs& a, std::ostream& out);
int cmd_inspect(const std::string& path, std::ostream& out);
int cmd_render(const std::string& midi_path, std::string wav_path, const std::string& soundfont, std::ostream& out);

}  // namespace cli_detail
}  // namespace relgrad
