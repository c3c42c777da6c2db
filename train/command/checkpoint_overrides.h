// What relgrad eval and sample may change in a checkpoint's config (their subcommands take the
// overrides, train/command/subcommands/): the held-out data's lengths and stream for eval, and the
// RoPE scalings for both. Everything else stays the
// checkpoint's, so the model is the one that was trained.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "train/config/run_options.h"

namespace relgrad::cli_detail {

// The data keys relgrad eval and probe may change (kEvalDataKeys): lengths, task parameters that keep
// the vocabulary, batch size, the data seed (the held-out stream) and the data files (a text model on
// another text). "data.min_len, data.max_len, ..." for messages.
std::string eval_data_keys_text();
// The checkpoint's config with eval's "--data.KEY=VALUE" overrides, validated, its vocabulary unchanged;
// a key outside kEvalDataKeys or a value the config refuses is a usage error, under `command`'s name.
// Prints each change.
void apply_eval_data_overrides(RunConfig& config, const std::vector<std::string>& overrides, std::ostream& out,
                               const std::string& command = "eval");

// The model keys relgrad eval and sample may change, after "model.<place>." (kEvalModelKeys): the RoPE
// scalings (layers/rotary.h), which change no parameter, for rope, xpos and p_rope places.
// "model.<place>.rope_scaling, ..." for messages.
std::string eval_model_keys_text();
// Splits a command's --key=value extras: the "--model.<place>.<key>" ones of kEvalModelKeys into
// `model`, the rest returned (for the command to take or refuse).
std::vector<std::string> take_model_overrides(const std::vector<std::string>& extras, const char* command,
                                              std::vector<std::string>& model);
// The checkpoint's run with those model overrides (load_run); prints each change.
LoadedRun load_run_with(const std::string& checkpoint, Device device, const std::vector<std::string>& overrides,
                        const char* command, std::ostream& out);

}  // namespace relgrad::cli_detail
