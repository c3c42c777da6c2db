// data.source = "music": performance events (train/music/music.h) of a folder of MIDI files, or of
// synthetic pieces in data.music_styles, for a language model; samples can be written as MIDI files.
#include <algorithm>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "train/config/run_options.h"
#include "train/config/config_fields.h"
#include "train/config/source.h"
#include "train/music/midi.h"

namespace relgrad {

SynthMusicConfig music_synth_config(const RunConfig& c) {
  SynthMusicConfig m;
  m.styles.clear();
  std::string list = c.data.music_styles;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!name.empty()) m.styles.push_back(music_style_from_string(name));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  RG_CHECK(!m.styles.empty(), "config", "data.music_styles names no style");
  m.canon_lag_beats = c.data.canon_lag_beats;
  m.seed = c.data.seed;
  return m;
}

namespace {

std::string seconds_text(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << s;
  return out.str();
}

class MusicSource : public DataSource {
 public:
  std::string name() const override { return "music"; }
  std::vector<config_detail::Field> fields() const override {
    using namespace config_detail;
    using R = RunConfig;
    using D = DataConfig;
    return {member("data.music_dir", "music: folder of .mid files (empty = synthetic pieces)", &R::data, &D::music_dir),
            member("data.music_styles", "music: synthetic styles, comma-separated", &R::data, &D::music_styles),
            member("data.canon_lag_beats", "music: canon follower delay in beats", &R::data, &D::canon_lag_beats)};
  }
  void check_keys(const RunConfig& c) const override {
    try {
      music_synth_config(c);  // checks the style names
    } catch (const Error& e) {
      throw Error(std::string("[config] data.music_styles: ") + e.what());
    }
    config_check(c.data.canon_lag_beats >= 1, "data.canon_lag_beats must be >= 1");
  }
  std::shared_ptr<const Dataset> dataset(const RunConfig& c) const override {
    MusicDatasetConfig m;
    m.folder = c.data.music_dir;
    m.synth = music_synth_config(c);
    m.val_fraction = c.data.val_fraction;
    m.seed = c.data.seed;
    return std::make_shared<MusicData>(m, c.data.batch_size, c.data.context);
  }
  std::pair<std::string, std::string> data_path(const RunConfig& c) const override {
    if (c.data.music_dir.empty()) return {};
    return {"data.music_dir", c.data.music_dir};
  }
  int64_t vocab_size(const RunConfig&) const override { return kMusicVocabSize; }
  std::optional<Vocab> vocab(const RunConfig&) const override { return MusicDataset::vocab(); }

  SampleOptionsTaken sample_options() const override { return {false, true, true}; }

  // Generates from <bos> (plus --input event names or a --prompt-midi file), prints the events and,
  // with --format midi, writes each sample as a format-0 MIDI file (atomically).
  void sample(const SampleRequest& a, LoadedRun& run, const RunData& data, SamplingOptions o,
              std::ostream& out) const override {
    const Vocab& vocab = data.vocab();
    if (!a.prompt.empty())
      throw InputError("[sample] this is a music model: give --input \"NOTE_ON_60 ...\" or --prompt-midi FILE");
    std::vector<int64_t> prompt{kBos};
    if (!a.prompt_midi.empty())
      for (int64_t id : encode_performance(read_midi(a.prompt_midi))) prompt.push_back(id);
    if (!a.input.empty())
      for (int64_t id : token_ids(a.input, vocab, "sample")) prompt.push_back(id);
    warn_if_longer_than_trained("sample", prompt.size(), run.config);
    o.eos = kEos;
    for (int64_t n = 0; n < a.num; ++n) {
      SamplingOptions on = o;
      on.seed = o.seed + static_cast<uint64_t>(n);
      std::vector<int64_t> seq = run.model->generate(ids_row(prompt), on).to_vector<int64_t>();
      std::vector<int64_t> fresh(seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()), seq.end());
      std::vector<Note> notes = decode_notes(seq);
      out << "--- sample " << n << " (seed " << on.seed << "): " << fresh.size() << " new events, " << notes.size()
          << " notes, " << seconds_text(notes.empty() ? 0.0 : notes.back().end) << " s\n";
      if (a.format == "midi") {
        const std::string path = numbered_output(a, n, "sample.mid");
        write_midi(path, decode_performance(seq));
        out << "wrote " << path << "\n";
      } else {
        std::vector<int64_t> shown(fresh.begin(),
                                   fresh.begin() + std::min<std::ptrdiff_t>(64, (std::ptrdiff_t)fresh.size()));
        out << vocab.decode(shown) << (fresh.size() > 64 ? " ..." : "") << "\n";
      }
    }
  }
};

}  // namespace

std::shared_ptr<const DataSource> music_source() { return std::make_shared<MusicSource>(); }

}  // namespace relgrad
