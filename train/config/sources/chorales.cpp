// data.source = "chorales": the Bach chorales (train/music/chorales.h, the shipped file unless
// data.chorales_path names one), either continued by a language model over the four voices
// (data.chorale_task = "continue") or harmonised by an encoder–decoder, soprano → alto, tenor, bass
// ("harmonize"). `relgrad sample` prints the voices as note names and, with --format midi, writes a
// MIDI file (chorale_midi: one channel per voice).
#include <algorithm>
#include <iostream>
#include <ostream>

#include "train/config/run_options.h"
#include "train/config/config_fields.h"
#include "train/config/source.h"
#include "train/music/chorales.h"
#include "train/music/midi.h"
#include "train/trainer/distributed.h"

namespace relgrad {

ChoraleDataConfig chorale_data_config(const RunConfig& c) {
  ChoraleDataConfig d;
  d.path = c.data.chorales_path;
  d.seed = c.data.seed;
  d.batch_size = c.data.batch_size;
  d.context = c.data.context;
  d.harmony_steps = c.data.harmony_steps;
  return d;
}

namespace {

bool harmonizes(const RunConfig& c) { return c.data.chorale_task == ChoraleTask::Harmonize; }

const char* const kVoiceNames[kChoraleVoices] = {"soprano", "alto", "tenor", "bass"};

// The valid chorale --chorale names (0 when not given), with a usage error naming the valid range.
const Chorale& valid_chorale(const RunData& data, int64_t index) {
  const std::vector<Chorale>& valid = data.chorales()->valid;
  if (index < 0) index = 0;
  if (valid.empty()) throw Error("[sample] the chorale file has no valid chorales to start from");
  if (index >= static_cast<int64_t>(valid.size()))
    throw InputError("[sample] --chorale " + std::to_string(index) + ": the file holds " +
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

// A learned absolute position table has max_positions rows: longer sequences are an error there, so
// they are refused before any work, naming what to change.
void check_positions(const RunConfig& c, int64_t longest, const std::string& what) {
  if (c.model.absolute_position != AbsolutePositionKind::Learned || longest <= c.model.max_positions) return;
  throw InputError("[sample] " + what + " makes sequences of " + std::to_string(longest) +
                   " tokens, but the model's learned position table has model.max_positions = " +
                   std::to_string(c.model.max_positions) + " rows");
}

void continue_chorale(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
                     std::ostream& out) {
  if (!a.melody.empty())
    throw InputError(
        "[sample] --melody is for harmonisers (data.chorale_task = \"harmonize\"); this model "
        "continues chorales: give --chorale N or --prompt-midi FILE");
  if (!a.prompt_midi.empty() && a.chorale >= 0)
    throw InputError("[sample] give --chorale N or --prompt-midi FILE, not both (the prompt is one of them)");
  const Vocab& vocab = data.vocab();
  Chorale prompt_chorale;
  std::string origin;
  if (!a.prompt_midi.empty()) {
    prompt_chorale = chorale_from_midi(read_midi(a.prompt_midi));
    origin = a.prompt_midi;
  } else {
    prompt_chorale = chorale_opening(valid_chorale(data, a.chorale));
    origin = "the first " + std::to_string(prompt_chorale.steps.size()) + " steps of valid chorale " +
             std::to_string(std::max<int64_t>(0, a.chorale));
  }
  if (prompt_chorale.steps.empty())
    throw InputError("[sample] the prompt " + origin + " holds no 16th steps");
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
    const std::vector<int64_t> seq = run.model->generate(p, on).to_vector<int64_t>();
    const Chorale result = chorale_from_tokens(seq);
    out << "--- sample " << n << " (seed " << on.seed << "): " << result.steps.size() << " steps, "
        << result.steps.size() - std::min(result.steps.size(), prompt_chorale.steps.size()) << " new\n"
        << voices_text(result, vocab);
    if (a.format == "midi") {
      const std::string path = numbered_output(a, n, "sample.mid");
      write_midi(path, chorale_midi(result));
      out << "wrote " << path << "\n";
    }
  }
}

void harmonize(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) {
  if (!a.prompt_midi.empty())
    throw InputError(
        "[sample] --prompt-midi is for chorale continuations; a harmoniser takes --melody FILE.mid "
        "(or --chorale N)");
  if (!a.melody.empty() && a.chorale >= 0)
    throw InputError("[sample] give --chorale N or --melody FILE, not both (the melody is one of them)");
  if (a.max_new_tokens_given)
    throw InputError(
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
    const std::vector<int64_t> seq = run.model->generate(src, on, positions).to_vector<int64_t>();
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
      const std::string path = numbered_output(a, n, "harmony.mid");
      write_midi(path, chorale_midi(result));
      out << "wrote " << path << "\n";
    }
  }
}


class ChoraleSource : public DataSource {
 public:
  std::string name() const override { return "chorales"; }
  std::vector<config_detail::Field> fields() const override {
    using namespace config_detail;
    using R = RunConfig;
    using D = DataConfig;
    return {member("data.chorales_path", "chorales: the chorale file (empty = the shipped one)", &R::data, &D::chorales_path),
            choice2("data.chorale_task", "chorales: continue (decoder-only) or harmonize (encoder-decoder)",
                    kChoraleTaskNames, &R::data, &D::chorale_task),
            member("data.harmony_steps", "chorales, harmonize: 16th steps per window", &R::data, &D::harmony_steps)};
  }

  // The task decides the model: a continuation is a language model, a harmonisation a translation.
  void check_model(const RunConfig& c) const override {
    const bool harmonize = harmonizes(c);
    config_check(harmonize == (c.model_type == ModelKind::EncoderDecoder),
                 "data.chorale_task = \"" + std::string(kChoraleTaskNames.name(c.data.chorale_task)) + "\" trains " +
                     (harmonize ? "an encoder-decoder (soprano → alto, tenor, bass): set model.type = \"encoder-decoder\""
                                : "a language model over the four voices: set model.type = \"decoder-only\"") +
                     " (or data.chorale_task = \"" + (harmonize ? "continue" : "harmonize") + "\")");
    config_check(harmonize || c.data.context % kChoraleVoices == 0,
                 "data.context must be a multiple of 4 for chorales (four voices per 16th step), got " +
                     std::to_string(c.data.context));
    config_check(c.data.harmony_steps >= 1 && c.data.harmony_steps <= kMaxHarmonySteps,
                 "data.harmony_steps must be in [1, " + std::to_string(kMaxHarmonySteps) + "], got " +
                     std::to_string(c.data.harmony_steps));
  }
  std::string settings_text(const RunConfig& c) const override {
    return DataSource::settings_text(c) + ", data.chorale_task = \"" + kChoraleTaskNames.name(c.data.chorale_task) + "\"";
  }

  // A harmonisation's target: BOS + alto, tenor, bass per step; a continuation's window: data.context.
  int64_t longest_sequence(const RunConfig& c) const override {
    return harmonizes(c) ? 3 * c.data.harmony_steps + 1 : c.data.context;
  }
  std::string longest_sequence_keys(const RunConfig& c) const override {
    return harmonizes(c) ? "3 · data.harmony_steps + 1" : "data.context";
  }
  // At their shortest, a harmonisation's rows are a chorale of one step: its soprano; BOS + 3 voices.
  ShortestRow shortest_row(const RunConfig& c) const override {
    if (harmonizes(c)) return {1.0, 4.0, 4.0};
    return DataSource::shortest_row(c);
  }
  InputLimit trained_input(const RunConfig& c) const override {
    if (harmonizes(c)) return {c.data.harmony_steps, "data.harmony_steps"};
    return DataSource::trained_input(c);
  }
  bool places_targets(const RunConfig& c) const override { return harmonizes(c); }
  // The harmonisation target: alto, tenor, bass of step k at queries 3k + 1 .. 3k + 3 after the BOS,
  // so query i sits at step ⌊i / 3⌋ (harmony_query_positions); a prefix of t2 queries is that prefix.
  std::function<Tensor(int64_t)> target_positions(const RunConfig& c) const override {
    if (!harmonizes(c)) return {};
    return [](int64_t t2) { return harmony_query_positions((t2 + 2) / 3).narrow(0, 0, t2).contiguous(); };
  }

  std::shared_ptr<const Dataset> dataset(const RunConfig& c) const override {
    if (harmonizes(c)) return std::make_shared<HarmonyData>(chorale_data_config(c));
    return std::make_shared<ChoraleData>(chorale_data_config(c));
  }
  std::pair<std::string, std::string> data_path(const RunConfig& c) const override {
    if (c.data.chorales_path.empty()) return {};
    return {"data.chorales_path", c.data.chorales_path};
  }
  // One vocabulary for the soprano source and the target.
  int64_t vocab_size(const RunConfig&) const override { return kChoraleVocabSize; }
  std::optional<Vocab> vocab(const RunConfig&) const override { return chorale_vocab(); }

  SampleOptionsTaken sample_options() const override { return {true, true, true}; }
  // A continuation of a valid chorale's first steps or of a --prompt-midi file, or the harmonisation
  // of a valid chorale's soprano or of a --melody file.
  void sample(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) const override {
    if (!a.input.empty() || !a.prompt.empty())
      throw InputError(std::string("[sample] this is a chorale model: --") + (a.input.empty() ? "prompt" : "input") +
                       " does not apply; give --chorale N (a valid chorale), or " +
                       (harmonizes(run.config) ? "--melody FILE.mid" : "--prompt-midi FILE.mid"));
    if (harmonizes(run.config)) return harmonize(a, run, data, o, out);
    continue_chorale(a, run, data, o, out);
  }
};

}  // namespace

std::shared_ptr<const DataSource> chorales_source() { return std::make_shared<ChoraleSource>(); }

// Either task's chorales: the run's dataset is the one this entry made, a HarmonyData when it
// harmonises, else a ChoraleData.
DataOf<ChoraleSet> RunData::chorales() const {
  return {source().name() == "chorales", [this]() -> const ChoraleSet* {
            if (harmonizes(config())) return &static_cast<const HarmonyData&>(dataset()).chorales();
            return &static_cast<const ChoraleData&>(dataset()).chorales();
          }};
}

}  // namespace relgrad
