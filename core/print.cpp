// Printing in PyTorch's style: tensor([[1.0000, 2.0000], ...], dtype=float64). Large tensors show
// their first and last 3 entries per dim.
#include <iomanip>
#include <ostream>
#include <sstream>

#include "core/tensor.h"

namespace relgrad {

namespace {
void print_rec(std::ostream& out, const Tensor& t, const std::vector<double>& v, int64_t dim, int64_t base,
               int indent) {
  if (t.dim() == 0) {
    out << v[0];
    return;
  }
  const int64_t n = t.shape()[dim];
  const int64_t inner = shape_numel(Shape(t.shape().begin() + dim + 1, t.shape().end()));
  out << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (n > 6 && i == 3) {
      out << "...";
      i = n - 4;
      out << (dim + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
      continue;
    }
    if (dim + 1 == t.dim()) out << v[base + i];
    else print_rec(out, t, v, dim + 1, base + i * inner, indent + 1);
    if (i + 1 < n) out << (dim + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  out << "]";
}
}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "tensor(undefined)";
  std::vector<double> v = copy_as(t, TensorOptions(kFloat64)).to_vector<double>();
  std::ostringstream body;
  if (is_floating(t.dtype())) body << std::fixed << std::setprecision(4);
  print_rec(body, t, v, 0, 0, 7);
  out << "tensor(" << body.str();
  if (t.dtype() != kFloat32) out << ", dtype=" << dtype_name(t.dtype());
  if (t.device().is_cuda()) out << ", device=" << t.device().str();
  if (t.requires_grad()) out << (t.grad_fn() ? ", grad_fn" : ", requires_grad=True");
  return out << ")";
}

std::string to_string(const Tensor& t) {
  std::ostringstream s;
  s << t;
  return s.str();
}

}  // namespace relgrad
