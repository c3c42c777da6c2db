#include "layers/transformer_xl.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "layers/schemes.h"

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

Tensor TransformerXL::sinusoid(int64_t max_past, int64_t max_future, Device device) const {
  const DType dtype = r_proj->weight.dtype();
  return sinusoid_tables.get(CacheKey{{max_past, max_future, embed_dim}, dtype, device},
                        [&] { return txl_sinusoid(max_past, max_future, embed_dim, dtype).to(device); });
}

Tensor TransformerXL::content_query(const Tensor& q, const AttentionGeometry&) const {
  RG_CHECK_T(ShapeError, q.dim() == 4 && q.size(1) == num_heads && q.size(3) == head_dim, "TransformerXL", "built for ",
             num_heads, " heads of size ", head_dim, ", got q ", shape_str(q.shape()));
  return q + u.reshape({1, num_heads, 1, head_dim});  // (a) + (c)
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
  Tensor c = cached_relative_map(g, o, q.device(), /*trim=*/false).index;  // (t2, t1), cached by geometry
  Tensor r = sinusoid(o.max_past, o.max_future, q.device());      // (R, C)
  Tensor rw = r_proj->forward(r).reshape({R, num_heads, head_dim}).permute({1, 0, 2});        // (H, R, D)
  Tensor p = matmul(q + v.reshape({1, num_heads, 1, head_dim}), rw.transpose(-1, -2));        // (B, H, t2, R)
  return relative_gather(p, c, R);                                                            // (b) + (d)
}

bool TransformerXL::fuse(FusedCall& call, const AttentionGeometry& g) const {
  const Tensor& q = call.q;
  if (g.heads != num_heads || q.dim() != 4 || q.size(1) != num_heads || q.size(3) != head_dim)
    return false;  // the composite path reports the mismatch
  const int64_t pmin = *std::min_element(call.positions.begin(), call.positions.end());
  const int64_t pmax = *std::max_element(call.positions.begin(), call.positions.end());
  // (b) + (d): (q + v)·(W_r R)ᵀ over exactly the distances these lengths reach, as score_term.
  RelativeIndexOptions o;
  o.max_past = std::max<int64_t>(0, pmax);
  o.max_future = g.causal ? 0 : std::max<int64_t>(0, g.t1 - 1 - pmin);
  o.causal = g.causal;
  o.out_of_range = OutOfRange::Error;
  const int64_t R = o.max_past + o.max_future + 1;
  Tensor r = sinusoid(o.max_past, o.max_future, q.device());  // (R, C)
  call.options.rel_table = r_proj->forward(r).reshape({R, num_heads, head_dim}).permute({1, 0, 2});  // (H, R, D)
  call.options.rel_query = q + v.reshape({1, num_heads, 1, head_dim});
  call.options.rel_rows = fused_table_rows(o, call, g.t1, "TransformerXL");
  std::tie(call.q, call.k) = content_qk(call.q, call.k, g);  // (a) + (c): q + u
  return true;
}

std::vector<std::vector<double>> TransformerXL::response(const ResponseInput& in, int64_t reach) const {
  const int64_t H = num_heads, D = head_dim, C = embed_dim;
  Tensor sin_rows = txl_sinusoid(reach, reach, C, r_proj->weight.dtype()).to(r_proj->weight.device());  // (2R+1, C)
  std::vector<double> r = host_values(r_proj->forward(sin_rows));  // (2R+1, C) = (2R+1, H, D): row n ↔ δ = n − R
  std::vector<double> qbar = mean_query(in), vh = host_values(v);
  const double scale = logit_scale(D);
  std::vector<std::vector<double>> out(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t n = 0; n <= 2 * reach; ++n) {
      double s = 0.0;
      for (int64_t d = 0; d < D; ++d) s += (qbar[h * D + d] + vh[h * D + d]) * r[(n * H + h) * D + d];
      out[h].push_back(s * scale);
    }
  return out;
}

// ---- the registry's check (layers/schemes.cpp) ----

std::string TransformerXL::check(const SchemeCheck& c) {
  if (c.d_model <= 0 || c.d_model % 2 == 0) return "";
  return c.scheme_key() + " needs an even model.d_model (its sinusoid), got " + std::to_string(c.d_model);
}

SchemeEntry transformer_xl_scheme() {
  SchemeEntry e{"transformer_xl", {}, [](const SchemeContext& c) {
                  return std::make_shared<TransformerXL>(c.d_model, c.n_heads, c.init);
                }};
  e.self_only = true;
  e.check = TransformerXL::check;
  e.extrapolates = true;  // holds its loss to 16 × the training context (docs/extrapolation.md)
  e.summary = "relative, Transformer-XL (sinusoids with u and v)";
  return e;
}

}  // namespace relgrad
