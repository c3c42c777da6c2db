// `relgrad addition-bench`: Zhou et al. 2024 ("Transformers Can Achieve Length Generalization But Not
// Robustly", arXiv 2402.09371) at this machine's size. Decimal addition in the reversed format, with
// index hints or without (train/data/addition_hints.h), trained on operands of up to a few digits and
// tested on longer ones; FIRE at random positions (fire-random: layers/fire.h's position map, drawn as
// length-bench's randomised treatments) against FIRE, RoPE and the other schemes, several seeds, exact
// match per digit-length bucket. docs/addition.md holds the protocol, the table and the paper's numbers.
//
// Each model is one of the synthetic-task benches' (train/instruments/task_models.h): the same recipe,
// trainer_options → Trainer path, one OpenMP thread per model, teacher-forced exact match
// (= greedy decoding's), randomised treatments evaluated at random positions too.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/data/addition_hints.h"
#include "train/instruments/length_bench.h"

namespace relgrad {

struct AdditionBenchOptions {
  bool full = false;                    // the documented run (docs/addition.md); else the CI form
  std::vector<std::string> treatments;  // with index hints; empty = the form's (addition_bench_treatments)
  // Without index hints (the plain format, to show what the hints buy); empty = the form's
  // (addition_bench_plain_treatments); none at all with plain = false.
  std::vector<std::string> plain_treatments;
  bool plain = true;
  std::vector<uint64_t> seeds;  // empty = 1, 2, 3
  int64_t steps = -1;           // training steps per model; -1 = the form's
  std::string out_dir = "runs/addition-bench";  // results.csv, results.md, pictures, checkpoints
};

// The form's size (length-bench's struct: its lengths count digits per operand) with options.steps.
TaskModelSize addition_bench_size(const AdditionBenchOptions& options);
// The form's treatments with hints: full, fire, fire-random, rope, rope-random, t5, alibi, kerple, none,
// learned-random; CI, fire-random and rope. Without hints: full, fire, fire-random, rope; CI, none.
std::vector<std::string> addition_bench_treatments(bool full);
std::vector<std::string> addition_bench_plain_treatments(bool full);
// The task names of the tables: "addition_hints", "addition_plain".
std::string addition_task_name(AdditionFormat format);
// The marker vocabulary of a form: one marker per digit of the longest test sum.
int64_t addition_hint_symbols(const TaskModelSize& size);

// Trains and scores every model (progress lines to `progress`, may be null). InstrumentOptionError
// ("[addition-bench] --treatments 'x': …") for an unknown treatment, an empty list or out_dir.
LengthBenchResult addition_bench_results(const AdditionBenchOptions& options, std::ostream* progress);
// The tables (exact match and per-token by bucket, the first bucket past training seed by seed), per
// format, each with the treatments that ran on it; text for the terminal, markdown for results.md.
std::string addition_bench_table(const LengthBenchResult& result);
std::string addition_bench_markdown(const LengthBenchResult& result, const AdditionBenchOptions& options);
// What the CI form asserts (robust on more seeds than it runs; docs/addition.md gives the margins).
// Empty when all hold; else one line per failure.
std::vector<std::string> addition_bench_failures(const LengthBenchResult& result);

// Runs the bench, writes results.csv, results.md and the pictures into out_dir, prints the tables;
// returns 0 when every model trained (and, in the CI form, its checks held), else 1.
int run_addition_bench(const AdditionBenchOptions& options, std::ostream& out);

}  // namespace relgrad
