// TEMPORARY: placeholders until the index/where/dropout family lands (delete this file then).
#include "autograd/ops.h"
namespace relgrad {
#define RG_TODO(name) throw Error("[" name "] not implemented yet")
Tensor where(const Tensor&, const Tensor&, const Tensor&) { RG_TODO("where"); }
Tensor masked_fill(const Tensor&, const Tensor&, double) { RG_TODO("masked_fill"); }
Tensor embedding(const Tensor&, const Tensor&, int64_t) { RG_TODO("embedding"); }
Tensor index_select(const Tensor&, int64_t, const Tensor&) { RG_TODO("index_select"); }
Tensor gather(const Tensor&, int64_t, const Tensor&) { RG_TODO("gather"); }
Tensor cat(const TensorList&, int64_t) { RG_TODO("cat"); }
Tensor stack(const TensorList&, int64_t) { RG_TODO("stack"); }
TensorList split(const Tensor&, int64_t, int64_t) { RG_TODO("split"); }
TensorList split(const Tensor&, const Shape&, int64_t) { RG_TODO("split"); }
TensorList chunk(const Tensor&, int64_t, int64_t) { RG_TODO("chunk"); }
Tensor dropout(const Tensor&, double, bool, Generator*) { RG_TODO("dropout"); }
}  // namespace relgrad
