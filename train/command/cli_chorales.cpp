// `relgrad sample` for chorale models (data.source = "chorales", train/music/chorales.h): a decoder-only
// model continues a prompt of the four voices; an encoder–decoder harmonises a soprano line with alto,
// tenor and bass. Both print the voices as note names and, with --format midi, write a MIDI file
// (chorale_midi: one channel per voice).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "train/command/cli_commands.h"
#include "train/config/run_options.h"
#include "train/music/chorales.h"
#include "train/music/midi.h"
#include "train/trainer/distributed.h"

namespace relgrad {
namespace cli_detail {
namespace {

constexpr int64_t kPromptSteps = 8;  // a continuation's default prompt: a valid chorale's first 8 steps
const char* const kVoiceNames[kChoraleVoices] = {"soprano", "alto", "tenor", "bass"};

// The valid chorale --chorale names (0 when not given), with a usage error naming the valid range.
const Chorale& valid_chorale(const RunData& data, int64_t index) {
  const std::vector<Chorale>& valid = data.chorales()->valid;
  if (index < 0) index = 0;
  if (valid.empty()) throw Error("[sample] the chorale file has no valid chorales to start from");
  if (index >= static_cast<int64_t>(valid.size()))
    throw UsageError("[sample] --chorale " + std::to_string(index) + ": the file holds " +
                     std::to_string(valid.size()) + " valid chorales (0 .. " +
                     std::to_string(valid.size() - 1) + ")");
  return valid[static_cast<size_t>(index)];
}

// One line per voice: "soprano  C5 C5 D5 REST ...", each step one name.
std::string voices_text(const Chorale& chorale, const Vocab& vocab) {
  std::string text;
  for (int v = 0; v < kChoraleVoices; ++v) {
    std::string line = kVoiceNames[v];
    line.resize(9, ' ');
    for (const auto& step : chorale.steps) line += vocab.name(chorale_token(step[v])) + " ";
    if (!chorale.steps.empty()) line.pop_back();
    text += line + "\n";
  }
  return text;
}

// -o PATH for sample n of `count` (PATH_n.mid when there are several), default `fallback`.
std::string output_path(const SampleArgs& a, int64_t n, const std::string& fallback) {
  const std::string base = a.output.empty() ? fallback : a.output;
  if (a.num <= 1) return base;
  const size_t dot = base.find_last_of('.');
  return (dot == std::string::npos ? base : base.substr(0, dot)) + "_" + std::to_string(n) +
         (dot == std::string::npos ? ".mid" : base.substr(dot));
}

// A learned absolute position table has max_positions rows: longer sequences are an error there, so
// they are refused before any work, naming what to change.
void check_positions(const RunConfig& c, int64_t longest, const std::string& what) {
  if (c.model.absolute_position != "learned" || longest <= c.model.max_positions) return;
  throw UsageError("[sample] " + what + " makes sequences of " + std::to_string(longest) +
                   " tokens, but the model's learned position table has model.max_positions = " +
                   std::to_string(c.model.max_positions) + " rows");
}

int continue_chorale(const SampleArgs& a, LoadedRun& run, const RunData& data, SamplingOptions o,
                     std::ostream& out) {
  if (!a.melody.empty())
    throw UsageError(
        "[sample] --melody is for harmonisers (data.chorale_task = \"harmonize\"); this model "
        "continues chorales: give --chorale N or --prompt-midi FILE");
  if (!a.prompt_midi.empty() && a.chorale >= 0)
    throw UsageError("[sample] give --chorale N or --prompt-midi FILE, not both (the prompt is one of them)");
  const Vocab& vocab = data.vocab();
  Chorale prompt_chorale;
  std::string origin;
  if (!a.prompt_midi.empty()) {
    prompt_chorale = chorale_from_midi(read_midi(a.prompt_midi));
    origin = a.prompt_midi;
  } else {
    const Chorale& c = valid_chorale(data, a.chorale);
    const size_t steps = std::min<size_t>(kPromptSteps, c.steps.size());
    prompt_chorale.steps.assign(c.steps.begin(), c.steps.begin() + static_cast<std::ptrdiff_t>(steps));
    origin = "the first " + std::to_string(steps) + " steps of valid chorale " +
             std::to_string(std::max<int64_t>(0, a.chorale));
  }
  if (prompt_chorale.steps.empty())
    throw UsageError("[sample] the prompt " + origin + " holds no 16th steps");
  std::vector<int64_t> prompt = chorale_tokens(prompt_chorale);
  prompt.pop_back();  // the EOS: the model goes on from the prompt's last bass
  const int64_t longest = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  check_positions(run.config, longest,
                  "the prompt (" + std::to_string(prompt.size()) + " tokens) and --max-new-tokens " +
                      std::to_string(o.max_new_tokens));
  if (longest > run.config.data.context && world().is_root())
    std::cerr << "relgrad sample: warning: [sample] the prompt and the new tokens make " << longest
              << " tokens, more than the " << run.config.data.context
              << " the model was trained on (data.context): it never saw the positions beyond\n";
  o.eos = kEos;
  out << "prompt: " << origin << " (" << prompt_chorale.steps.size() << " steps)\n";
  for (int64_t n = 0; n < a.num; ++n) {
    SamplingOptions on = o;
    on.seed = o.seed + static_cast<uint64_t>(n);
    const Tensor p = from_vector<int64_t>(prompt, {1, static_cast<int64_t>(prompt.size())});
    const std::vector<int64_t> seq = generate(*run.model.decoder_lm, p, on).to_vector<int64_t>();
    const Chorale result = chorale_from_tokens(seq);
    out << "--- sample " << n << " (seed " << on.seed << "): " << result.steps.size() << " steps, "
        << result.steps.size() - std::min(result.steps.size(), prompt_chorale.steps.size()) << " new\n"
        << voices_text(result, vocab);
    if (a.format == "midi") {
      const std::string path = output_path(a, n, "sample.mid");
      write_midi(path, chorale_midi(result));
      out << "wrote " << path << "\n";
    }
  }
  return 0;
}

int harmonize(const SampleArgs& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) {
  if (!a.prompt_midi.empty())
    throw UsageError(
        "[sample] --prompt-midi is for chorale continuations; a harmoniser takes --melody FILE.mid "
        "(or --chorale N)");
  if (!a.melody.empty() && a.chorale >= 0)
    throw UsageError("[sample] give --chorale N or --melody FILE, not both (the melody is one of them)");
  if (a.max_new_tokens >= 0)
    throw UsageError(
        "[sample] --max-new-tokens does not apply to a harmoniser: it writes three notes (alto, "
        "tenor, bass) for each 16th of the melody");
  const Vocab& vocab = data.vocab();
  std::vector<int64_t> soprano;
  std::string origin;
  if (!a.melody.empty()) {
    for (int pitch : melody_from_midi(read_midi(a.melody))) soprano.push_back(chorale_token(pitch));
    origin = a.melody;
  } else {
    soprano = soprano_tokens(valid_chorale(data, a.chorale));
    origin = "the soprano of valid chorale " + std::to_string(std::max<int64_t>(0, a.chorale));
  }
  const int64_t steps = static_cast<int64_t>(soprano.size());
  check_positions(run.config, 3 * steps + 1, "a melody of " + std::to_string(steps) + " steps");
  if (steps > run.config.data.harmony_steps && world().is_root())
    std::cerr << "relgrad sample: warning: [sample] the melody has " << steps << " steps, more than the "
              << run.config.data.harmony_steps
              << " the model was trained on (data.harmony_steps): it never saw the positions beyond\n";
  // Exactly three tokens per step: no stop token, and anything but a note or a rest reads as a rest.
  o.eos = -1;
  o.max_new_tokens = 3 * steps;
  const std::function<Tensor(int64_t)> place = target_positions(run.config);
  const Tensor positions = place ? place(1 + o.max_new_tokens) : Tensor();
  out << "melody: " << origin << " (" << steps << " steps)\n";
  const Tensor src = from_vector<int64_t>(soprano, {1, steps});
  for (int64_t n = 0; n < a.num; ++n) {
    SamplingOptions on = o;
    on.seed = o.seed + static_cast<uint64_t>(n);
    const std::vector<int64_t> seq =
        generate(*run.model.encoder_decoder, src, Tensor(), on, true, positions).to_vector<int64_t>();
    std::vector<int64_t> lower(seq.begin() + 1, seq.end());  // after the BOS
    int64_t unusable = 0;
    for (int64_t& id : lower)
      if (id < kChoraleRest || id >= kChoraleVocabSize) id = kChoraleRest, ++unusable;
    const Chorale result = chorale_from_parts(soprano, lower);
    out << "--- harmony " << n << " (seed " << on.seed << ")";
    if (unusable > 0)
      out << ": " << unusable << " of " << lower.size() << " tokens were not notes (shown as rests)";
    out << "\n" << voices_text(result, vocab);
    if (a.format == "midi") {
      const std::string path = output_path(a, n, "harmony.mid");
      write_midi(path, chorale_midi(result));
      out << "wrote " << path << "\n";
    }
  }
  return 0;
}

}  // namespace

int sample_chorales(const SampleArgs& a, LoadedRun& run, SamplingOptions sampling, std::ostream& out) {
  if (!a.input.empty() || !a.prompt.empty())
    throw UsageError(std::string("[sample] this is a chorale model: --") +
                     (a.input.empty() ? "prompt" : "input") +
                     " does not apply; give --chorale N (a valid chorale), or " +
                     (run.config.data_places_targets() ? "--melody FILE.mid" : "--prompt-midi FILE.mid"));
  RunData data(run.config);
  if (run.config.data_places_targets()) return harmonize(a, run, data, sampling, out);
  return continue_chorale(a, run, data, sampling, out);
}

}  // namespace cli_detail
}  // namespace relgrad
