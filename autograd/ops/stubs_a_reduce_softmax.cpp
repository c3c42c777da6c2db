// TEMPORARY: placeholders until the reduce/softmax family lands (delete this file then).
#include "autograd/ops.h"
namespace relgrad {
#define RG_TODO(name) throw Error("[" name "] not implemented yet")
Tensor var(const Tensor&, const Shape&, int64_t, bool) { RG_TODO("var"); }
Tensor logsumexp(const Tensor&, const Shape&, bool) { RG_TODO("logsumexp"); }
Tensor amax(const Tensor&, const Shape&, bool) { RG_TODO("amax"); }
Tensor amin(const Tensor&, const Shape&, bool) { RG_TODO("amin"); }
Tensor max(const Tensor&) { RG_TODO("max"); }
Tensor min(const Tensor&) { RG_TODO("min"); }
std::tuple<Tensor, Tensor> max(const Tensor&, int64_t, bool) { RG_TODO("max"); }
std::tuple<Tensor, Tensor> min(const Tensor&, int64_t, bool) { RG_TODO("min"); }
Tensor argmax(const Tensor&, int64_t, bool) { RG_TODO("argmax"); }
Tensor argmin(const Tensor&, int64_t, bool) { RG_TODO("argmin"); }
Tensor softmax(const Tensor&, int64_t) { RG_TODO("softmax"); }
Tensor log_softmax(const Tensor&, int64_t) { RG_TODO("log_softmax"); }
Tensor cross_entropy(const Tensor&, const Tensor&, const CrossEntropyOptions&) { RG_TODO("cross_entropy"); }
}  // namespace relgrad
