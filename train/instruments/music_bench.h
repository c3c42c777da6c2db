// `relgrad music-bench`: the Music Transformer's JSB Chorales comparison (Huang et al. 2019, Table 1)
// reproduced at this machine's budget, and the harmonisation comparison of cross-attention alignments.
// Decoder-only models of one size and budget, one per positional treatment and seed, trained on the
// serialised chorales (train/music/chorales.h); note-wise NLL (nats per token) on the whole valid and
// test chorales; then encoder–decoder harmonisers (soprano → alto, tenor, bass) under left, scaled and
// explicit cross-attention alignment; then the probe's view of the trained heads. docs/music.md
// holds the table the full run printed, next to the paper's.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace relgrad {

struct MusicBenchOptions {
  bool full = false;                     // the documented run (about an hour on 2 cores); else the CI form
  std::vector<std::string> treatments;   // empty = all: none, sinusoidal, learned, shaw, huang, t5, alibi, rope, seed
  std::vector<uint64_t> seeds;           // empty = 1, 2, 3
  int64_t steps = -1;                    // training steps per model; -1 = the form's default
  bool harmony = true;                   // also the harmonisation comparison
  std::string chorales_path;             // empty = the shipped file
  std::string out_dir = "runs/music-bench";  // results.csv, results.md, pictures, checkpoints
};

// Runs the bench, prints progress and the tables to `out`; returns 0 when every model trained (and,
// in the CI form, the robust outcome it asserts held), 1 otherwise. Errors throw relgrad::Error.
int run_music_bench(const MusicBenchOptions& options, std::ostream& out);

}  // namespace relgrad
