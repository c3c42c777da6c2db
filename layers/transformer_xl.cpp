#include "layers/transformer_xl.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace relgrad {

Tensor txl_sinusoid(int64_t max_past, int64_t max_future, int64_t dim, DType dtype) {
  RG_CHECK_T(ShapeError, dim > 0 && dim % 2 == 0, "TransformerXL", "the sinusoid needs an even width, got ", dim);
  const int64_t rows = max_past + max_future + 1, half = dim / 2;
  std::vector<double> r(static_cast<size_t>(rows * dim));
  for (int64_t row = 0; row < rows; ++row) {
    const double p = static_cast<double>(max_past - row);  // p = −δ = π(i) − j
    for (int64_t k = 0; k < half; ++k) {
      const double w = 1.0 / std::pow(10000.0, 2.0 * k / dim);
      r[row * dim + k] = std::sin(p * w);
      r[row * dim + half + k] = std::cos(p * w);
    }
  }
  return from_vector<double>(r, {rows, dim}).to(dtype);
}

TransformerXL::TransformerXL(int64_t embed_dim_, int64_t num_heads_, Generator* init)
    : embed_dim(embed_dim_), num_heads(num_heads_), head_dim(0) {
  const char* op = "TransformerXL";
  RG_CHECK_T(ShapeError, embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0, op, "embed_dim ", embed_dim,
             " must be a positive multiple of num_heads ", num_heads);
  RG_CHECK_T(ShapeError, embed_dim % 2 == 0, op, "embed_dim must be even for the sinusoid, got ", embed_dim);
  head_dim = embed_dim / num_heads;
  r_proj = register_module("r_proj", std::make_shared<Linear>(embed_dim, embed_dim, false, init));
  const double bound = std::sqrt(6.0 / static_cast<double>(num_heads + head_dim));
  NoGradGuard no_grad;
  u = register_parameter("u", rand({num_heads, head_dim}, kFloat32, init) * (2 * bound) - bound);
  v = register_parameter("v", rand({num_heads, head_dim}, kFloat32, init) * (2 * bound) - bound);
}

std::pair<Tensor, Tensor> TransformerXL::content_qk(const Tensor& q, const Tensor& k, const AttentionGeometry&) const {
  RG_CHECK_T(ShapeError, q.dim() == 4 && q.size(1) == num_heads && q.size(3) == head_dim, "TransformerXL", "built for ",
             num_heads, " heads of size ", head_dim, ", got q ", shape_str(q.shape()));
  return {q + u.reshape({1, num_heads, 1, head_dim}), k};  // (a) + (c)
}

Tensor TransformerXL::score_term(const Tensor& q, const AttentionGeometry& g) const {
  const char* op = "TransformerXL";
  RG_CHECK_T(ShapeError, q.dim() == 4 && q.size(1) == num_heads && q.size(3) == head_dim, op, "built for ", num_heads,
             " heads of size ", head_dim, ", got q ", shape_str(q.shape()));
  RG_CHECK_T(ShapeError, g.heads == num_heads, op, "built for ", num_heads, " heads, the attention has ", g.heads);
  // The δ range these lengths reach: keys 0 … t1−1 against every π(i). Covering it exactly keeps
  // every entry in the table (the Error policy only guards against a bug here). Causal attention
  // needs only the past: later keys get no entry and are masked.
  Tensor pos = g.positions();
  std::vector<int64_t> pi = pos.to(Device::cpu()).contiguous().to_vector<int64_t>();
  int64_t lo = 0, hi = 0;
  if (!pi.empty()) {
    lo = *std::min_element(pi.begin(), pi.end());
    hi = *std::max_element(pi.begin(), pi.end());
  }
  RelativeIndexOptions o;
  o.max_past = std::max<int64_t>(0, hi);
  o.max_future = g.causal ? 0 : std::max<int64_t>(0, g.t1 - 1 - lo);
  o.query_positions = pos;
  o.causal = g.causal;
  o.out_of_range = OutOfRange::Error;
  const int64_t R = o.table_size();
  Tensor c = relative_index(g.t2, g.t1, o).to(q.device());                                      // (t2, t1)
  Tensor r = txl_sinusoid(o.max_past, o.max_future, embed_dim, r_proj->weight.dtype()).to(q.device());  // (R, C)
  Tensor rw = r_proj->forward(r).reshape({R, num_heads, head_dim}).permute({1, 0, 2});        // (H, R, D)
  Tensor p = matmul(q + v.reshape({1, num_heads, 1, head_dim}), rw.transpose(-1, -2));        // (B, H, t2, R)
  return relative_gather(p, c, R);                                                            // (b) + (d)
}

}  // namespace relgrad
