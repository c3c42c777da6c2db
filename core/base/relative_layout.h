// The relative-position primitive's kernel contract, named once for the three floors that spell it
// (core/cpu/relative.h, cuda/index.h, core/backend/index.h) and the op that fills it
// (autograd/ops/relative.cpp): the scores S (N, t2, t1) and the relative layout P (N, t2, R), linked by
// an index map C (t2, t1) whose entry is the column of P that (query i, key j) reads, or -1 for none.
#pragma once
#include <cstdint>

namespace relgrad {

struct RelativeLayout {
  int64_t N = 1;    // the leading dims of S and P merged: batch × heads
  int64_t t2 = 1;   // queries: rows of S and of P
  int64_t t1 = 1;   // keys: columns of S
  int64_t R = 1;    // columns of P (its rows are unit-stride)
  // Gather only: where row (n, i) of P starts, P + n·batch_stride + i·row_stride, so a P broadcast over
  // queries (row_stride 0) or batches is read in place. The scatter writes P contiguous.
  int64_t batch_stride = 0, row_stride = 0;
};

}  // namespace relgrad
