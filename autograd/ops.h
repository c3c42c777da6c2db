// The differentiable ops: PyTorch's names and behaviour. Each family lives in one file of
// autograd/ops/ with each op's forward and backward side by side: argument checks, one call to the
// family's backend entry (core/backend/), record(...) and the backward rule.
//
// Autograd never sees a device: no device branch, raw pointer or device index in autograd/; the
// backend entries pick the CPU kernel (core/cpu/) or the CUDA one (cuda/). tests/check_layering.sh
// enforces that autograd/ includes neither cuda/ nor core/cpu/.
//
// Errors: every op throws relgrad::Error (or ShapeError, DTypeError, DeviceError, IndexError)
// whose message starts with "[op_name]" and names the shapes involved.
#pragma once
#include <string>
#include <tuple>
#include <vector>

#include "core/base/activation.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/window.h"

namespace relgrad {

// ---- views (autograd/ops/view.cpp): no data copied, gradients flow back through the view ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1; copies only if the view is impossible
Tensor view(const Tensor& x, const Shape& shape);     // like reshape, but never copies (throws instead)
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);  // clamps like Python
Tensor select(const Tensor& x, int64_t dim, int64_t index);  // removes dim
Tensor expand(const Tensor& x, const Shape& shape);          // -1 keeps a size
Tensor squeeze(const Tensor& x);                              // all size-1 dims
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor clone(const Tensor& x);       // always a fresh contiguous copy
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor to_device(const Tensor& x, Device device);

// ---- elementwise (autograd/ops/elementwise.cpp); binary ops broadcast as NumPy ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rsub(const Tensor& a, double b);  // b - a
Tensor rdiv(const Tensor& a, double b);  // b / a
Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor gelu_erf(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + eˣ), x above 20 (PyTorch's threshold)
// approximate = "none" (exact erf form, PyTorch's default) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
// Comparisons give bool masks (no gradient).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
// where(cond, a, b): a where cond (bool) is true, else b; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);

// ---- matmul (autograd/ops/matmul.cpp) ----
// PyTorch semantics: 1-D operands are promoted and the added dim removed; batch dims broadcast;
// transposed operands (stride-1 along either matrix dim) go to the GEMM without a copy.
Tensor matmul(const Tensor& a, const Tensor& b);
// c + alpha · (a @ b) with c broadcast to the product's shape: torch.addmm / baddbmm (beta = 1) for any
// batch dims. The GEMM accumulates onto a copy of c, so the add costs no extra pass (Linear's bias,
// attention's positional term). a and b at least 2-D.
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor bmm(const Tensor& a, const Tensor& b);  // strictly (B,n,k) @ (B,k,m)

// ---- reductions (autograd/ops/reduce.cpp); dims may be negative; empty dims = all dims ----
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// Population variance with correction = 0, sample variance with correction = 1 (the default).
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
// (values, indices) along one dim; the gradient goes to the first index of each extremum.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

// ---- softmax family (autograd/ops/softmax.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Attention's softmax over the last dim, fused: y = softmax(scale * x + bias) with the positions
// where mask is true set to 0 (a row masked everywhere is all 0). mask (bool) and bias (x's dtype)
// are optional (undefined Tensor()) and broadcast to x. One pass forward and one backward instead of
// the six of its composite twin masked_fill(softmax(masked_fill(scale * x + bias, mask, lowest)), mask, 0).
Tensor masked_softmax(const Tensor& x, const Tensor& mask, double scale = 1.0, const Tensor& bias = Tensor());
enum class Reduction { None, Mean, Sum };
struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::Mean;
  CrossEntropyOptions& set_ignore_index(int64_t v) { ignore_index = v; return *this; }
  CrossEntropyOptions& set_label_smoothing(double v) { label_smoothing = v; return *this; }
  CrossEntropyOptions& set_reduction(Reduction r) { reduction = r; return *this; }
};
// logits (N, C) or (N, C, d1, ...) with int64 targets (N) or (N, d1, ...); fused with log_softmax.
// Mean reduction divides by the number of non-ignored targets (as PyTorch).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& options = {});

// ---- normalisation (autograd/ops/norm.cpp); normalises over the last dims given by `normalized_shape` ----
// weight/bias may be undefined Tensor() (no affine). Saves mean and rstd for backward.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// y = x / sqrt(mean(x^2) + eps) * weight. PyTorch's default eps (None) = machine epsilon of the dtype; -1 selects it.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(), double eps = -1);

// ---- indexing (autograd/ops/index.cpp); index tensors are int64 ----
// weight (V, C), indices any shape (...) → (..., C). Backward: deterministic scatter-add into (V, C).
// padding_idx (>= 0) rows get no gradient, as PyTorch.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);  // index 1-D
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);        // out[..i..] = x[..index[..i..]..]
Tensor cat(const TensorList& tensors, int64_t dim = 0);
Tensor stack(const TensorList& tensors, int64_t dim = 0);
TensorList split(const Tensor& x, int64_t split_size, int64_t dim = 0);  // last chunk may be smaller
TensorList split(const Tensor& x, const Shape& split_sizes, int64_t dim = 0);
TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- dropout (autograd/ops/dropout.cpp) ----
// Zeroes each element with probability p and scales the rest by 1/(1-p) when training; identity
// otherwise. The mask comes from `generator` (the default generator when null).
Tensor dropout(const Tensor& x, double p, bool training, Generator* generator = nullptr);

// ---- relative positions (autograd/ops/relative.cpp): the one index-mapped primitive ----
// Conventions (docs/relative-attention.md): relative position δ = j − π(i), key position minus the
// query's position on the key axis; negative = past. A relative table has rows for
// δ ∈ [−max_past, max_future], row r ↔ δ = r − max_past (past first).
enum class Alignment {
  Left,    // π(i) = i: both sequences start at 0 (the seed's method, self-attention)
  Right,   // π(i) = i + t1 − t2: queries are the last t2 keys (KV-cached decoding)
  Scaled,  // π(i) = ⌊i·t1/t2⌋: sequences at different rates
};
enum class OutOfRange {
  Clip,   // δ beyond the table uses the edge row (Shaw et al.)
  Zero,   // δ beyond the table contributes nothing (the seed's method with left alignment)
  Error,  // δ beyond the table is an error naming the query, key and range
};
struct RelativeIndexOptions {
  int64_t max_past = 0;    // table rows cover δ from −max_past ...
  int64_t max_future = 0;  // ... to +max_future: R = max_past + max_future + 1 rows
  Alignment alignment = Alignment::Left;
  Tensor query_positions;  // optional int64 (t2): explicit π(i), overrides `alignment`
  OutOfRange out_of_range = OutOfRange::Error;
  bool causal = false;     // keys after their query (δ > 0) get no entry: they are masked anyway
  int64_t table_size() const { return max_past + max_future + 1; }
};
// π(i) for i in [0, t2): int64 (t2).
Tensor query_positions(int64_t t2, int64_t t1, Alignment alignment);
// The index map C, int64 (t2, t1): C[i, j] = row of the table for (query i, key j), or −1 for none.
Tensor relative_index(int64_t t2, int64_t t1, const RelativeIndexOptions& options);
// S (..., t2, t1) = P (..., t2, R) gathered through C: S[.., i, j] = P[.., i, C[i, j]] (0 where C < 0).
// P may be a broadcast view (e.g. a per-head bias expanded over queries). Backward: relative_scatter.
Tensor relative_gather(const Tensor& P, const Tensor& index, int64_t table_size);
// The adjoint: P̄ (..., t2, R) with P̄[.., i, r] = Σ_{j: C[i,j] = r} S̄[.., i, j]; row-owned, no atomics.
Tensor relative_scatter(const Tensor& S, const Tensor& index, int64_t table_size);

// ---- products with a window (autograd/ops/window_matmul.cpp; core/window.h) ----
// X (.., R, S) counts only inside the window w (R, S): row i at columns [w->lo[i], w->hi[i]). The products
// skip the rest (on the CPU's float32 kernel about half of a causal product), with the values of the
// composite: masked_fill of X's outside with 0, then matmul. Batch dims broadcast as matmul's; no
// autocast form. MatrixWindow::causal(positions, t1) is causal attention's window.
using WindowPtr = std::shared_ptr<const MatrixWindow>;
// (init + a @ b) ∘ W: a (.., R, k), b (.., k, S), init (optional) broadcast to (.., R, S); zero outside.
Tensor window_scores(const Tensor& a, const Tensor& b, const WindowPtr& w, const Tensor& init = Tensor());
// (x ∘ W) @ b: x (.., R, S), b (.., S, d) → (.., R, d).
Tensor window_apply(const Tensor& x, const Tensor& b, const WindowPtr& w);
// (x ∘ W)ᵀ @ b: x (.., R, S), b (.., R, d) → (.., S, d).
Tensor window_apply_t(const Tensor& x, const Tensor& b, const WindowPtr& w);
// True where these products, with window w, beat the plain product for operands like x: the CPU's
// float32 kernel (relgrad's), no autocast, and a window that leaves whole tiles out (at least 64
// columns, at most 3/4 of the entries inside). Elsewhere they run the composite, slower than a plain
// product, or skip too little to pay for their bookkeeping (a causal 17 × 17: the main job's).
bool window_products_skip(const Tensor& x, const MatrixWindow& w);

// ---- fused relative attention (autograd/ops/flash_attention.cpp; kernels core/cpu/flash_attention.h,
// cuda/flash_attention_forward.cu, cuda/flash_attention_backward.cu) ----
// out (B,H,t2,D) = softmax(s)·v without any (t2, t1) tensor in memory (flash-style tiles, online
// softmax, backward recomputed from the saved per-row logsumexp), for query i at π(i), key j, δ = j − π(i):
//   s_ij = scale · (q_i·k_j + rel_query_i · rel_table[rel_rows(δ)]) + bias_table[bias_rows(δ)]
//   hidden (weight 0) when causal and j > π(i), or key j is padding; a row with no visible key is 0.
// The per-distance lookups rel_rows / bias_rows (int64 (W), entry w for δ = min_delta + w, −1 = no term)
// encode every scheme: a skewed full-range table (row = δ + max_past), Shaw's clip, T5 buckets, ALiBi
// (bias_table (H, W) of −slope·distance with the identity lookup). W must cover every δ of a visible
// pair. No dropout and no value term: the attention layer falls back to the composite path for those.
struct FlashAttentionOptions {
  double scale = -1;        // < 0: 1/√D
  bool causal = false;
  Tensor query_positions;   // int64 (t2): π(i); undefined = i (left alignment)
  Tensor rel_table;         // optional (R, D), (1, R, D) shared or (H, R, D) per head
  Tensor rel_query;         // optional (B, H, t2, D): the relative term's query (Transformer-XL's q + v); undefined = q
  Tensor rel_rows;          // int64 (W), with rel_table
  Tensor bias_table;        // optional (Rb), (1, Rb) or (H, Rb): added after scaling
  Tensor bias_rows;         // int64 (W), with bias_table
  int64_t min_delta = 0;    // δ of lookup entry 0
  Tensor key_padding_mask;  // optional bool (B, t1), true = padding
};
// q (B,H,t2,D), k and v (B,H,t1,D), float32 or float64, CPU or CUDA. Differentiable in q, k, v,
// rel_query, rel_table and bias_table.
Tensor flash_relative_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                const FlashAttentionOptions& options = {});
// Whether flash_relative_attention trains faster than the composite ops for B·H heads over t1 keys on
// `device`, by this machine's kernels (core/backend/flash_attention.h says when).
bool flash_attention_faster(int64_t B, int64_t H, int64_t t1, const Device& device);

// ---- random factories (core/rng.h declares the Generator; these live in autograd/ops/random.cpp) ----
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);   // U[0,1)
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);  // N(0,1)
// Uniform integers in [low, high); int64 unless options say otherwise.
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = TensorOptions(kInt64),
               Generator* generator = nullptr);

// ---- fused elementwise chains of a transformer block (autograd/ops/fused.cpp) ----
// Each is one kernel per direction in place of a chain of small ones, and gives the numbers of its
// composite twin (the same bits on the CPU). Inputs must match exactly (no broadcasting).
// y = act(x + bias), x (..., N), bias (N): the twin act(add(x, bias)); Linear + activation as
// bias_activation(matmul(x, weightᵀ), bias, act) (layers/feed_forward.cpp). Backward gives dx and
// dbias (a fixed-order sum over rows) in one pass.
Tensor bias_activation(const Tensor& x, const Tensor& bias, Activation activation);
// sum = residual + branch and out = layer_norm(sum, ...) / rms_norm(sum, ...), residual and branch of
// one shape (..., *normalized_shape): a pre-norm block keeps `sum` as its residual stream and feeds
// `out` to the next sublayer; a post-norm block keeps `out`. One forward kernel; the backward is
// layer_norm's (or rms_norm's) fused backward on `sum`, which reaches residual and branch unchanged.
struct ResidualNorm {
  Tensor sum, out;
};
ResidualNorm residual_layer_norm(const Tensor& residual, const Tensor& branch, const Shape& normalized_shape,
                                 const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5);
ResidualNorm residual_rms_norm(const Tensor& residual, const Tensor& branch, const Shape& normalized_shape,
                               const Tensor& weight = Tensor(), double eps = -1);

}  // namespace relgrad
