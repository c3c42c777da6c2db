// `relgrad addition-bench`: Zhou et al. 2024 ("Transformers Can Achieve Length Generalization But Not
// Robustly", arXiv 2402.09371) at this machine's size. Decimal addition in the reversed format, with
// index hints or without (train/data/addition_hints.h), trained on operands of up to a few digits and
// tested on longer ones; FIRE at random positions (fire-random: layers/fire.h's position map, drawn as
// length-bench's randomised treatments) against FIRE, RoPE and the other schemes, several seeds, exact
// match per digit-length bucket. docs/addition.md holds the protocol, the table and the paper's numbers.
//
// Each model is one of the synthetic-task benches' (train/instruments/task_models.h), and the result
// length-bench's, its tasks the two formats.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "train/data/addition_hints.h"
#include "train/instruments/length_bench.h"

namespace relgrad {

// `treatments` run with index hints, `plain_treatments` without (to show what the hints buy), none at
// all with plain = false; empty lists are the form's. With hints: full, fire, fire-random, rope,
// rope-random, t5, alibi, kerple, none, learned-random; CI, fire-random and rope. Without hints: full,
// fire, fire-random, rope; CI, none.
struct AdditionBenchOptions : StudyOptions {
  AdditionBenchOptions() { out_dir = "runs/addition-bench"; }
  std::vector<std::string> plain_treatments;
  bool plain = true;
};

// The form's size (length-bench's struct: its lengths count digits per operand) with options.steps.
TaskModelSize addition_bench_size(const AdditionBenchOptions& options);
// The tables (exact match and per-token by bucket, the first bucket past training seed by seed), per
// format, each with the treatments that ran on it; text for the terminal, markdown for results.md.
std::string addition_bench_table(const LengthBenchResult& result);
std::string addition_bench_markdown(const LengthBenchResult& result, const AdditionBenchOptions& options);
// What the CI form asserts (robust on more seeds than it runs; docs/addition.md gives the margins).
// Empty when all hold; else one line per failure.
std::vector<std::string> addition_bench_failures(const LengthBenchResult& result);

// Runs the bench, writes results.csv, results.md and the pictures into out_dir, prints the tables;
// returns 0 when every model trained (and, in the CI form, its checks held), else 1.
// InstrumentOptionError ("[addition-bench] --treatments 'x': …") for an unknown treatment or an empty out_dir.
int run_addition_bench(const AdditionBenchOptions& options, std::ostream& out);

}  // namespace relgrad
