// Full Jacobian check: column j of the numerical Jacobian from (f(x + eps e_j) - f(x - eps e_j)) / 2eps,
// row i of the analytical one from backward with a one-hot output gradient; compared entry by entry
// with |a - n| <= atol + rtol |n| (torch.allclose), reporting the worst entry.
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace relgrad {

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs,
                          const GradcheckOptions& opt) {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].defined() && inputs[k].requires_grad())
      RG_CHECK_T(DTypeError, inputs[k].dtype() == kFloat64 && inputs[k].is_leaf(), "gradcheck", "input ", k,
                 " must be a float64 leaf (got ", dtype_name(inputs[k].dtype()), ")");
  // Work on private contiguous copies so perturbing them touches nothing of the caller's.
  TensorList xs;
  for (const Tensor& t : inputs) {
    if (!t.defined()) { xs.push_back(t); continue; }
    Tensor c = t.detach().clone();
    if (t.requires_grad()) c.requires_grad_(true);
    xs.push_back(c);
  }
  Tensor y0;
  {
    NoGradGuard no_grad;
    y0 = f(xs);
  }
  RG_CHECK_T(DTypeError, y0.dtype() == kFloat64, "gradcheck", "f must return float64, got ", dtype_name(y0.dtype()));
  const int64_t ny = y0.numel();

  // Analytical Jacobian rows: J_a[k][i][j] = d y_i / d x_k[j].
  std::vector<std::vector<std::vector<double>>> analytical(xs.size());
  TensorList diff_inputs;
  std::vector<size_t> diff_index;
  for (size_t k = 0; k < xs.size(); ++k)
    if (xs[k].defined() && xs[k].requires_grad()) {
      diff_inputs.push_back(xs[k]);
      diff_index.push_back(k);
      analytical[k].assign(ny, std::vector<double>(xs[k].numel(), 0.0));
    }
  Tensor y = f(xs);
  for (int64_t i = 0; i < ny; ++i) {
    std::vector<double> onehot(ny, 0.0);
    onehot[i] = 1.0;
    if (!y.requires_grad()) break;  // nothing differentiable reached: analytical stays zero
    TensorList g = grad(y, diff_inputs, from_vector(onehot, y.shape(), kFloat64), /*retain_graph=*/true);
    for (size_t m = 0; m < g.size(); ++m)
      if (g[m].defined()) analytical[diff_index[m]][i] = g[m].contiguous().to_vector<double>();
  }

  GradcheckResult result;
  double worst_excess = -1;
  NoGradGuard no_grad;
  for (size_t k : diff_index) {
    double* data = xs[k].data_ptr<double>();
    for (int64_t j = 0; j < xs[k].numel(); ++j) {
      const double saved = data[j];
      data[j] = saved + opt.eps;
      std::vector<double> plus = f(xs).contiguous().to_vector<double>();
      data[j] = saved - opt.eps;
      std::vector<double> minus = f(xs).contiguous().to_vector<double>();
      data[j] = saved;
      for (int64_t i = 0; i < ny; ++i) {
        double numerical = (plus[i] - minus[i]) / (2 * opt.eps);
        double a = analytical[k][i][j];
        double err = std::fabs(a - numerical);
        double excess = err - (opt.atol + opt.rtol * std::fabs(numerical));
        if (!std::isfinite(a) || !std::isfinite(numerical)) excess = INFINITY;
        result.max_abs_error = std::max(result.max_abs_error, err);
        if (excess > worst_excess) {
          worst_excess = excess;
          std::ostringstream msg;
          msg << "input " << k << " element " << j << ", output element " << i << ": analytical " << a
              << ", numerical " << numerical << " (|diff| " << err << ")";
          result.message = msg.str();
        }
      }
    }
  }
  result.ok = worst_excess <= 0;
  result.message = std::string(result.ok ? "[gradcheck] ok; worst " : "[gradcheck] Jacobian mismatch at ") + result.message;
  return result;
}

}  // namespace relgrad
