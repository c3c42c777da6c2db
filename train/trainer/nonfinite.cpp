#include "train/trainer/nonfinite.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace relgrad {

std::string BadTensor::describe() const {
  return detail::concat(name, " of shape ", shape_str(shape), ": ", count.total(), " of ", numel,
                        " values are non-finite (", count.nan, " NaN, ", count.inf, " Inf)");
}

bool all_finite(const TensorList& tensors) {
  NoGradGuard no_grad;
  Tensor partial;  // float64 () on one GPU: Σ sum(t · 0) of the tensors seen there so far
  auto flush = [&] {
    const bool ok = !partial.defined() || std::isfinite(partial.item());
    partial = Tensor();
    return ok;
  };
  for (const Tensor& t : tensors) {
    if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) continue;
    if (t.device().is_cpu()) {
      if (count_nonfinite(t).total() > 0) return false;
      continue;
    }
    if (partial.defined() && partial.device() != t.device() && !flush()) return false;
    Tensor z = sum(mul(t.detach(), 0.0)).to(kFloat64);  // 0, or NaN when t holds a NaN or Inf
    partial = partial.defined() ? add(partial, z) : z;
  }
  return flush();
}

BadTensor first_nonfinite(const std::vector<std::pair<std::string, Tensor>>& named, bool grads) {
  for (const auto& [name, p] : named) {
    Tensor t = grads ? p.grad() : p;
    if (!t.defined()) continue;
    NonFiniteCount c = count_nonfinite(t);
    if (c.total() > 0) return {grads ? name + " grad" : name, t.shape(), t.numel(), c};
  }
  return {};
}

namespace {
std::string number(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }
}  // namespace

NonFiniteDiagnosis diagnose_step(double loss, double grad_norm,
                                 const std::vector<std::pair<std::string, Tensor>>& named_params) {
  NonFiniteDiagnosis d;
  if (!std::isfinite(loss)) {
    d.what = "the loss is " + number(loss);
    // A parameter that is already NaN/Inf is the cause; gradients computed from it say less.
    d.tensor = first_nonfinite(named_params, /*grads=*/false);
    if (d.tensor.found()) {
      d.detail = "parameter " + d.tensor.describe();
    } else {
      d.tensor = BadTensor{"loss", {}, 1, std::isnan(loss) ? NonFiniteCount{1, 0} : NonFiniteCount{0, 1}};
      d.detail = "the loss (every parameter is finite, so an op of the forward pass overflowed; "
                 "train.detect_anomaly = true names it)";
    }
  } else if (!std::isfinite(grad_norm)) {
    d.what = "the gradient norm is " + number(grad_norm);
    d.tensor = first_nonfinite(named_params, /*grads=*/true);
    if (d.tensor.found()) {
      d.detail = d.tensor.describe();
    } else {
      d.tensor = BadTensor{"grad_norm", {}, 1, NonFiniteCount{0, 1}};
      d.detail = "none: every gradient is finite, their float64 sum of squares overflowed";
    }
  }
  return d;
}

namespace {
std::string lr_text(double lr) {
  std::ostringstream s;
  s << std::setprecision(6) << lr;
  return s.str();
}
}  // namespace

std::string NonFiniteSteps::on_nonfinite(NonfinitePolicy policy, int64_t max_skipped, int64_t step, double lr,
                                         const NonFiniteDiagnosis& bad, const std::string& checkpoint_note) {
  const std::string head = detail::concat("[train] step ", step, ": ", bad.what, " at lr ", lr_text(lr),
                                          "; first non-finite tensor: ", bad.detail);
  if (policy != NonfinitePolicy::Skip || in_a_row_ >= max_skipped) {
    std::string repeated;
    if (policy == NonfinitePolicy::Skip)
      repeated = detail::concat("; that is ", in_a_row_ + 1, " non-finite steps in a row, more than ",
                                "train.max_skipped_steps = ", max_skipped);
    throw NonFiniteError(detail::concat(head, repeated, ". The run diverged: try a lower optim.lr, or optim.clip > 0. ",
                                        checkpoint_note));
  }
  ++in_a_row_;
  ++total_;
  return detail::concat(head, "; the step is skipped, weights and optimizer state are unchanged (", in_a_row_,
                        " in a row, train.max_skipped_steps = ", max_skipped, ")");
}

NonFiniteError update_went_nonfinite(int64_t step, double lr, double grad_norm, const BadTensor& bad,
                                     const std::string& checkpoint_note) {
  return NonFiniteError(detail::concat(
      "[train] step ", step, ": the optimizer update made a parameter non-finite at lr ", lr_text(lr),
      " (the loss and gradients were finite, gradient norm ", grad_norm, "); first non-finite tensor: parameter ",
      bad.describe(), ". The optimizer state or the learning rate is to blame (try a lower optim.lr). ",
      checkpoint_note));
}

}  // namespace relgrad
