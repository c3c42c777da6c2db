// The trainer's NaN/Inf diagnosis (train.nonfinite = "stop" | "skip", docs/cli.md): which value of a
// step went non-finite first, named so that a user can act on it.
//
// Checks per step, in this order (each is a scalar or was computed anyway, except the last):
//   1. the loss (a scalar);
//   2. the global gradient norm (clip_grad_norm_ computes it for clipping): finite exactly when every
//      gradient is, barring overflow of the float64 sum of squares;
//   3. after the optimizer update, every parameter (one read of the weights): catches a non-finite
//      optimizer state or an update that overflowed, at the step that caused it.
// Only when a check fails are the tensors scanned one by one for the first non-finite one, in
// Module::named_parameters order.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "core/base/error.h"
#include "core/base/name_table.h"

namespace relgrad {

struct BadTensor {
  std::string name;  // "decoder.layers.1.attn.q_proj.weight grad", "encoder.embed.weight" or "loss"
  Shape shape;
  int64_t numel = 0;
  NonFiniteCount count;
  bool found() const { return count.total() > 0; }
  // "decoder.layers.1.attn.q_proj.weight grad of shape (64, 64): 3 of 4096 values are non-finite (0 NaN, 3 Inf)"
  std::string describe() const;
};

// True when no floating tensor of `tensors` holds a NaN or Inf (check 3 above). CPU tensors are
// scanned in place; GPU tensors are reduced on their device, Σ sum(t · 0), which is 0 exactly when
// every value is finite (Inf · 0 and NaN · 0 are NaN), so a step reads back one scalar per device
// instead of copying the weights to the host.
bool all_finite(const TensorList& tensors);

// The first of `named` whose value (grads = false) or .grad (grads = true) holds a NaN or Inf, in
// order; found() is false when there is none.
BadTensor first_nonfinite(const std::vector<std::pair<std::string, Tensor>>& named, bool grads);

// Why a step's update must not be applied, given its loss and gradient norm: `what` ("the loss is
// nan", "the gradient norm is inf") and `tensor`, the first offending tensor (the loss, a parameter
// holding NaN/Inf already, or a gradient), with `detail` describing it for the user. Empty `what`
// when the loss and the norm are finite.
struct NonFiniteDiagnosis {
  std::string what;
  BadTensor tensor;
  std::string detail;
};
NonFiniteDiagnosis diagnose_step(double loss, double grad_norm,
                                 const std::vector<std::pair<std::string, Tensor>>& named_params);

// The stop/skip decision of train.nonfinite and train.max_skipped_steps, and its messages. Steps are
// named by their index from 0 (the schedule's lr_at(step)); `checkpoint_note` ends a stop message.
// train.nonfinite: what a step with a NaN/Inf loss or gradient does.
enum class NonfinitePolicy { Stop, Skip };
inline constexpr NameTable<NonfinitePolicy, 2> kNonfinitePolicyNames{{{NonfinitePolicy::Stop, "stop"}, {NonfinitePolicy::Skip, "skip"}}};

class NonFiniteSteps {
 public:
  // Step `step` at `lr` cannot be applied (`bad`). With policy Skip and fewer than `max_skipped`
  // skips in a row, counts the skip and returns its warning line ("[train] step 4: ...; the step is
  // skipped, ..."); otherwise throws NonFiniteError.
  std::string on_nonfinite(NonfinitePolicy policy, int64_t max_skipped, int64_t step, double lr,
                           const NonFiniteDiagnosis& bad, const std::string& checkpoint_note);
  void on_applied() { in_a_row_ = 0; }
  int64_t in_a_row() const { return in_a_row_; }
  int64_t total() const { return total_; }

 private:
  int64_t in_a_row_ = 0, total_ = 0;
};

// The error for an update that made parameter `bad` non-finite although loss and gradients were
// finite: the optimizer state or the learning rate is to blame, and the update cannot be undone.
NonFiniteError update_went_nonfinite(int64_t step, double lr, double grad_norm, const BadTensor& bad,
                                     const std::string& checkpoint_note);

}  // namespace relgrad
