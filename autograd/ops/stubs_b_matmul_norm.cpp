// TEMPORARY: placeholders until the matmul/norm family lands (delete this file then).
#include "autograd/ops.h"
namespace relgrad {
#define RG_TODO(name) throw Error("[" name "] not implemented yet")
Tensor matmul(const Tensor&, const Tensor&) { RG_TODO("matmul"); }
Tensor bmm(const Tensor&, const Tensor&) { RG_TODO("bmm"); }
Tensor layer_norm(const Tensor&, const Shape&, const Tensor&, const Tensor&, double) { RG_TODO("layer_norm"); }
Tensor rms_norm(const Tensor&, const Shape&, const Tensor&, double) { RG_TODO("rms_norm"); }
}  // namespace relgrad
