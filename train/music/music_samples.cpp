// The sample a music run prints after training (MusicData, train/music/music.h).
#include <ostream>

#include "train/music/midi.h"
#include "train/music/music.h"

namespace relgrad {

void MusicData::print_samples(SampleModel& model, int64_t, const std::string& out_dir, std::ostream& out) const {
  std::vector<int64_t> seq = model.continue_prompt({kBos}, true);
  const std::string path = out_dir + "/sample.mid";
  MidiFile midi = decode_performance(seq);
  write_midi(path, midi);
  out << "sampled " << seq.size() - 1 << " events (" << decode_notes(seq).size() << " notes) from <bos>: " << path << "\n";
}

}  // namespace relgrad
