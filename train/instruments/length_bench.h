// `relgrad length-bench`: length generalisation of positional treatments on synthetic algorithmic
// tasks (copy, reverse, addition, sorting, parity; train/data/length_tasks.h), after Kazemnejad et al.
// 2023 (NoPE vs APE, T5, ALiBi, RoPE), Delétang et al. 2023 (train on short inputs, test on longer
// ones, accuracy per test length) and Ruoss et al. 2023 (randomised positions). Decoder-only models,
// one per task, treatment and seed, trained on inputs of the training range only; whole-answer exact
// match and per-token accuracy (greedy-free: teacher-forced argmax over the answer) per test-length
// bucket. docs/length-generalisation.md holds the protocol, the table and the papers' numbers.
//
// Every model trains through the path `relgrad train` takes (trainer_options → Trainer, as
// train/instruments/music_bench.h describes), one OpenMP thread per run.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace relgrad {

struct LengthBenchOptions {
  bool full = false;                    // the documented run (about an hour on 2 cores); else the CI form
  std::vector<std::string> tasks;       // empty = the form's default (full: copy, reverse, addition, sorting, parity)
  std::vector<std::string> treatments;  // empty = the form's default (full: none, learned, sinusoidal, t5,
                                        // alibi, rope, seed, shaw, huang, learned-random, rope-random)
  std::vector<uint64_t> seeds;          // empty = 1, 2, 3
  int64_t steps = -1;                   // training steps per model; -1 = the form's default
  std::string out_dir = "runs/length-bench";  // results.csv, results.md, pictures, checkpoints
};

// Runs the bench, prints progress and the tables to `out`; returns 0 when every model trained (and,
// in the CI form, the robust outcome it asserts held), 1 otherwise. Errors (an unknown task or
// treatment, an empty seed list entry) throw relgrad::Error.
int run_length_bench(const LengthBenchOptions& options, std::ostream& out);

}  // namespace relgrad
