// Held-out evaluation of a decoder-only model through a sliding window (`relgrad eval --window C`):
// Hugging Face's strided perplexity (the Transformers guide "Perplexity of fixed-length models").
// Each held-out row of T tokens is read in windows of at most C tokens that start every S = ⌈C/2⌉
// tokens, [b, min(b + C, T)) for b = 0, S, 2S, …, up to the first window that reaches T; a window
// scores only the tokens that no earlier window scored, so every token is scored once, from at least
// min(p, C − S) and at most C tokens of context (p: its place in the row), and no position past C − 1
// is ever used. The model runs exactly as evaluate() runs it (eval mode, no grad, on its device).
#pragma once
#include <cstdint>
#include <functional>

#include "train/trainer/run.h"

namespace relgrad {

// The windows of a row of T tokens under window C: (begin, end, first scored) each.
struct StridedWindow {
  int64_t begin, end, scored_from;
};
std::vector<StridedWindow> strided_windows(int64_t T, int64_t window);

// evaluate() (train/trainer/run.h) with every row read through strided_windows: the loss and token
// accuracy over the same tokens, each from at most `window` tokens of context (window ≥ 1). Decoder-only
// models only (an Error otherwise). No sequence accuracy: rows_are_examples is false.
EvalResult evaluate_strided(RunModel& model, const Dataset& data, int64_t batches, int64_t window,
                            const std::function<void(int64_t done)>& progress = nullptr);

}  // namespace relgrad
