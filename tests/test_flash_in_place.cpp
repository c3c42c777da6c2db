// The CPU fused core reads and writes the heads in place (core/cpu/flash_attention.h, HeadLayout): q,
// k, v and the relative query given as the heads of (B, T, H·D) tensors, (B, H, T, D) views with rows
// H·D apart, as MultiHeadAttention holds them, give bitwise the output and gradients of contiguous
// operands, for every scheme kind (table, bias, both with a separate relative query, none), causal and
// not, every alignment, padding, float64 and float32, both backward loop orders, 1 and 3 threads and
// every GEMM library found; the raw kernels with every operand, out included, in (B, T, H, D) memory
// against contiguous buffers; a gradcheck through such views; which operands pass uncopied and which
// layout the gradients take; and that MultiHeadAttention merges the fused output back into (B, t2, H·D)
// as a view.
#include <memory>

#include "core/backend/flash_attention.h"
#include "core/cpu/gemm_library.h"
#include "flash_testing.h"

using namespace relgrad;
using namespace relgrad::testing;
using namespace relgrad::testing::flash;

namespace {

// x (B, H, T, D) as MultiHeadAttention holds its heads: (B, T, H·D) memory, reshaped and transposed.
Tensor heads_of(const Tensor& merged, int64_t H) {
  const int64_t B = merged.size(0), T = merged.size(1), D = merged.size(2) / H;
  return merged.reshape({B, T, H, D}).permute({0, 2, 1, 3});
}
Tensor merged_of(const Tensor& heads) {  // (B, H, T, D) → (B, T, H·D) (a copy unless heads are in place)
  return heads.permute({0, 2, 1, 3}).reshape({heads.size(0), heads.size(2), heads.size(1) * heads.size(3)});
}

// forward_backward's run with q, k, v (and qr) as (B, T, H·D) leaves seen as heads, and the loss on
// the output merged back into (B, t2, H·D), as the layer does (so dout reaches the kernel as a view too).
// Gradients are returned as (B, H, T, D), comparable with forward_backward's.
TensorList forward_backward_in_place(const Case& c, DType dt) {
  const int64_t H = c.g.H;
  const size_t n_heads = c.f.rel_query.defined() ? 4 : 3;  // q, k, v, qr lead Case::leaves
  TensorList leaves, in;
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const Tensor t = c.leaves[i].detach().to(dt);
    leaves.push_back((i < n_heads ? merged_of(t).contiguous() : t.clone()).detach().requires_grad_());
    in.push_back(i < n_heads ? heads_of(leaves.back(), H) : leaves.back());
  }
  const Tensor out = run(c, in, true);
  CHECK(out.stride(2) == H * c.g.D);  // (B, t2, H, D) memory: the merge below is a view
  const Tensor merged = merged_of(out);
  CHECK(merged.raw_data() == out.raw_data());
  const Tensor w = uniform(out.shape(), -1, 1, dt, 77);  // forward_backward's cotangent, merged like out
  sum(mul(merged, merged_of(w).contiguous())).backward();
  TensorList r{out.detach()};
  for (size_t i = 0; i < leaves.size(); ++i)
    r.push_back(i < n_heads ? heads_of(leaves[i].grad(), H) : leaves[i].grad());
  return r;
}

void check_bitwise(const TensorList& a, const TensorList& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string what = i == 0 ? std::string("output") : "gradient of leaf " + std::to_string(i - 1);
    INFO(what);
    CHECK(bitwise_equal(a[i], b[i]));
  }
}

}  // namespace

TEST_CASE("flash in place: heads of (B, T, H·D) give the contiguous operands' bits, every scheme kind and path") {
  const char* kinds[] = {"table + bias", "bias", "table, qr", "none"};
  for (const FlashBackward path : kPaths)
    for (const DType dt : {kFloat64, kFloat32})
      for (const Geometry& geo : geometries())
        for (int which = 0; which < 4; ++which) {
          Geometry g = geo;
          if (which == 1 || which == 3) g.clip_E = 0;
          if (which == 2 || which == 3) g.clip_b = 0;
          if (which == 2) g.separate_query = true;
          INFO(path_name(path), " ", describe(g), " ", kinds[which], dt == kFloat64 ? " float64" : " float32");
          const Case c = make_case(g, kFloat64);
          const ForcePath force(path);
          check_bitwise(forward_backward_in_place(c, dt), forward_backward(c, true, dt));
        }
}

TEST_CASE("flash in place: bitwise at 1 and 3 threads, with several waves of table buffers, every GEMM library") {
  const cpu::GemmLibrary saved = cpu::gemm_library();
  Geometry g;
  g.B = 2, g.H = 3, g.t2 = 200, g.t1 = 190, g.align = Align::Scaled, g.pad = true, g.separate_query = true;
  for (const cpu::GemmLibrary library : cpu::kGemmLibraries) {
    if (!cpu::gemm_library_available(library)) continue;
    cpu::set_gemm_library(library);
    for (const FlashBackward path : kPaths)
      for (const Geometry& geo : {g, waves_geometry(path)}) {
        INFO(cpu::gemm_library_name(library), " ", path_name(path), " ", describe(geo));
        const Case c = make_case(geo, kFloat32);
        const ForcePath force(path);
        const TensorList ref = forward_backward(c, true, kFloat32);
        for (int threads : {1, 3}) {
          const ThreadCount n(threads);
          INFO(threads, " threads");
          check_bitwise(forward_backward_in_place(c, kFloat32), ref);
        }
      }
  }
  cpu::set_gemm_library(saved);
}

TEST_CASE("flash in place: the raw kernels, every operand and out in (B, T, H, D) memory, give the contiguous bits") {
  Geometry g;
  g.t2 = 70, g.t1 = 131, g.align = Align::Right, g.causal = true, g.pad = true, g.separate_query = true;
  const Case c = make_case(g, kFloat64);
  const int64_t B = g.B, H = g.H, t2 = g.t2, t1 = g.t1, D = g.D;
  const std::vector<int64_t> rows = c.f.rel_rows.to_vector<int64_t>(), brows = c.f.bias_rows.to_vector<int64_t>();
  const std::vector<bool> pad_v = c.f.key_padding_mask.to_vector<bool>();
  const std::unique_ptr<bool[]> pad(new bool[pad_v.size()]);
  std::copy(pad_v.begin(), pad_v.end(), pad.get());
  const std::vector<double> E = c.leaves[4].to_vector<double>(), bias = c.leaves[5].to_vector<double>();
  const Tensor dout = uniform({B, H, t2, D}, -1, 1, kFloat64, 8);
  const cpu::HeadLayout s2{t2 * H * D, D, H * D}, s1{t1 * H * D, D, H * D};  // (B, T, H, D) memory
  for (const FlashBackward path : kPaths) {
    INFO(path_name(path));
    const ForcePath force(path);
    std::vector<TensorList> results;
    for (bool in_place : {false, true}) {
      // An operand's memory: (B, H, T, D) contiguous, or (B, T, H, D); results are read back as (B, H, T, D).
      auto memory = [&](const Tensor& t) { return (in_place ? merged_of(t) : t).contiguous().to_vector<double>(); };
      auto read = [&](const std::vector<double>& x, int64_t T) {
        return in_place ? heads_of(from_vector(x, {B, T, H * D}), H) : from_vector(x, {B, H, T, D});
      };
      const std::vector<double> q = memory(c.leaves[0]), k = memory(c.leaves[1]), v = memory(c.leaves[2]),
                                qr = memory(c.leaves[3]), dO = memory(dout);
      cpu::FlashProblem<double> p;
      p.B = B, p.H = H, p.t2 = t2, p.t1 = t1, p.D = D, p.scale = 1.0 / std::sqrt(double(D)), p.causal = true;
      p.pos = c.pos.data(), p.q = q.data(), p.k = k.data(), p.v = v.data(), p.qr = qr.data();
      p.E = E.data(), p.E_heads = H, p.R = c.leaves[4].size(1), p.rel_rows = rows.data();
      p.bias = bias.data(), p.bias_heads = H, p.Rb = c.leaves[5].size(1), p.bias_rows = brows.data();
      p.min_delta = c.f.min_delta, p.W = static_cast<int64_t>(rows.size()), p.pad = pad.get();
      p.layout = in_place ? cpu::FlashLayout{s2, s1, s1, s2, s2, s2, s2, s1, s1, s2}
                          : cpu::FlashLayout::contiguous(H, t2, t1, D);
      std::vector<double> out(q.size()), lse(static_cast<size_t>(B * H * t2)), dq(q.size()), dk(k.size()),
          dv(v.size()), dqr(q.size()), dE(E.size()), db(bias.size());
      cpu::flash_forward(p, out.data(), lse.data());
      cpu::flash_backward(p, out.data(), lse.data(), dO.data(), dq.data(), dk.data(), dv.data(), dqr.data(), dE.data(),
                          db.data());
      results.push_back({read(out, t2), from_vector(lse, {B, H, t2}), read(dq, t2), read(dk, t1), read(dv, t1),
                         read(dqr, t2), from_vector(dE, {static_cast<int64_t>(dE.size())}),
                         from_vector(db, {static_cast<int64_t>(db.size())})});
    }
    check_bitwise(results[1], results[0]);
    CHECK(largest(results[0][6]) > 0);  // the tables' gradients are exercised
    CHECK(largest(results[0][7]) > 0);
  }
}

TEST_CASE("flash in place: gradcheck through heads of (B, T, H·D) leaves") {
  for (const FlashBackward path : kPaths) {
    INFO(path_name(path));
    Geometry g;
    g.B = 2, g.H = 2, g.t2 = 5, g.t1 = 67, g.D = 2, g.causal = true, g.align = Align::Explicit, g.pad = true;
    g.separate_query = true;
    const Case c = make_case(g, kFloat64);
    TensorList in;
    for (size_t i = 0; i < c.leaves.size(); ++i)
      in.push_back((i < 4 ? merged_of(c.leaves[i]).contiguous() : c.leaves[i]).detach().clone().requires_grad_());
    const ForcePath force(path);
    GradcheckResult r = gradcheck(
        [&](const TensorList& x) {
          TensorList heads = x;
          for (size_t i = 0; i < 4; ++i) heads[i] = heads_of(x[i], g.H);
          return merged_of(run(c, heads, true));
        },
        in);
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("flash in place: operands pass uncopied, gradients come in the operands' layout") {
  Geometry g;
  g.t2 = 37, g.t1 = 70, g.separate_query = true;
  const Case c = make_case(g, kFloat64);
  // flash_operand: the heads of a (B, T, H·D) tensor and contiguous heads pass as they are; a view
  // with a non-unit stride along D, or rows overlapping (broadcast along T), is copied.
  const Tensor merged = merged_of(c.leaves[0]).contiguous();
  const Tensor heads = heads_of(merged, g.H), broadcast = c.leaves[0].narrow(2, 0, 1).expand(c.leaves[0].shape());
  CHECK(backend::flash_operand(heads).raw_data() == heads.raw_data());
  CHECK(backend::flash_operand(c.leaves[0]).raw_data() == c.leaves[0].raw_data());
  for (const Tensor& t : {c.leaves[0].transpose(2, 3).contiguous().transpose(2, 3), broadcast}) {
    const Tensor copy = backend::flash_operand(t);
    CHECK(copy.is_contiguous());
    CHECK(copy.raw_data() != t.raw_data());
    CHECK(bitwise_equal(copy, t));
  }
  // The backward's gradients: q's and qr's in (B, t2, H, D) memory like q, k's contiguous like k, v's
  // in (B, t1, H, D) memory like v.
  auto heads_leaf = [&](const Tensor& t) { return heads_of(merged_of(t).contiguous().requires_grad_(), g.H); };
  TensorList in{heads_leaf(c.leaves[0]), c.leaves[1].detach().requires_grad_(), heads_leaf(c.leaves[2]),
                heads_leaf(c.leaves[3]), c.leaves[4], c.leaves[5]};
  const Tensor out = run(c, in, true);
  const TensorList d = out.grad_fn()->backward(heads_of(merged_of(uniform(out.shape(), -1, 1, kFloat64, 4)), g.H));
  const int64_t HD = g.H * g.D;
  CHECK(d[0].strides() == Shape{g.t2 * HD, g.D, HD, 1});
  CHECK(d[1].is_contiguous());
  CHECK(d[2].strides() == Shape{g.t1 * HD, g.D, HD, 1});
  CHECK(d[3].strides() == Shape{g.t2 * HD, g.D, HD, 1});
}

TEST_CASE("MultiHeadAttention: the fused core's heads merge back into (B, t2, H·D) without a copy") {
  // The output projection's input is the fused output permuted and reshaped, a view: the graph from
  // the layer's output runs reshape → permute → flash_relative_attention (a copy would add a clone).
  Generator init(3);
  MultiHeadAttention m(16, 2, nullptr, 0.0, true, &init);
  m.core = AttentionCore::Fused;
  const Tensor x = uniform({2, 9, 16}, -1, 1, kFloat32, 5).requires_grad_();
  AttentionOptions o;
  o.causal = true;
  const Tensor y = m.forward(x, x, o).output;
  REQUIRE(m.last_call_fused);
  struct Visit {
    std::shared_ptr<Node> node;
    std::string by, by_by;  // the nodes that took its output, and theirs
  };
  std::vector<Visit> todo{{y.grad_fn(), "", ""}};
  int found = 0;
  while (!todo.empty()) {
    const Visit v = todo.back();
    todo.pop_back();
    if (std::string(v.node->name) == "flash_relative_attention") {
      ++found;
      CHECK(v.by == "permute");
      CHECK(v.by_by == "reshape");
    }
    for (const Edge& e : v.node->inputs)
      if (e.node) todo.push_back({e.node, v.node->name, v.by});
  }
  CHECK(found == 1);
}
