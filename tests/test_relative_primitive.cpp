// The relative-position primitive: index maps for every alignment and out-of-range policy against a
// direct evaluation of δ = j − π(i); gather/scatter against explicit loops, as adjoints of each other,
// and under gradcheck; clear errors for tables too short and for malformed maps.
#include "op_harness.h"

using namespace relgrad;
using namespace relgrad::testing;

namespace {

// The expected row of the table for (i, j), written out case by case.
int64_t expected_row(int64_t i, int64_t j, int64_t t2, int64_t t1, const RelativeIndexOptions& o) {
  int64_t pi = o.alignment == Alignment::Left ? i : o.alignment == Alignment::Right ? i + t1 - t2 : (i * t1) / t2;
  int64_t delta = j - pi;
  if (o.causal && delta > 0) return -1;
  if (delta < -o.max_past) return o.out_of_range == OutOfRange::Clip ? 0 : -1;
  if (delta > o.max_future) return o.out_of_range == OutOfRange::Clip ? o.table_size() - 1 : -1;
  return delta + o.max_past;
}

}  // namespace

TEST_CASE("relative_index: every alignment and policy over many shapes") {
  for (int64_t t2 : {1, 3, 5, 8})
    for (int64_t t1 : {1, 4, 5, 9})
      for (int64_t t3 : {1, 3, 6, 12})
        for (Alignment a : {Alignment::Left, Alignment::Right, Alignment::Scaled})
          for (OutOfRange p : {OutOfRange::Clip, OutOfRange::Zero})
            for (bool causal : {false, true}) {
              RelativeIndexOptions o;
              o.max_past = t3 - 1;
              o.max_future = causal ? 0 : t3 - 1;
              o.alignment = a;
              o.out_of_range = p;
              o.causal = causal;
              std::vector<int64_t> c = relative_index(t2, t1, o).to_vector<int64_t>();
              for (int64_t i = 0; i < t2; ++i)
                for (int64_t j = 0; j < t1; ++j) REQUIRE(c[i * t1 + j] == expected_row(i, j, t2, t1, o));
            }
}

TEST_CASE("relative_index: alignments, explicit positions, the error policy") {
  CHECK(query_positions(3, 5, Alignment::Left).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2});
  CHECK(query_positions(3, 5, Alignment::Right).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
  CHECK(query_positions(4, 8, Alignment::Scaled).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 6});
  RelativeIndexOptions o;
  o.max_past = 2;
  o.max_future = 2;
  o.query_positions = from_vector<int64_t>({3, 0}, {2});
  // query 0 sits at key position 3: key j reads row j - 3 + 2 (clipped at 0); query 1 at position 0
  o.out_of_range = OutOfRange::Clip;
  std::vector<int64_t> c = relative_index(2, 3, o).to_vector<int64_t>();
  CHECK(c == std::vector<int64_t>{0, 0, 1, 2, 3, 4});
  // the error policy names the pair and the range
  RelativeIndexOptions e;
  e.max_past = 1;
  e.max_future = 1;
  check_throws_with([&] { relative_index(3, 3, e); },
                    "[relative_index] query 0 (position 0) and key 2 are at relative position 2, outside the table's "
                    "range [-1, 1] (3 rows) under the 'error' policy");
  e.causal = true;  // the future is masked: only the past can fall off the table
  check_throws_with([&] { relative_index(3, 3, e); }, "query 2 (position 2) and key 0 are at relative position -2");
  o.query_positions = from_vector<int64_t>({0, 1, 2}, {3});
  check_throws_with([&] { relative_index(2, 3, o); }, "[relative_index] query_positions must have shape (2), got (3)");
  o.query_positions = from_vector<double>({0, 1}, {2});
  check_throws_with([&] { relative_index(2, 3, o); }, "query_positions must be int64, got float64");
}

TEST_CASE("relative_gather and relative_scatter against explicit loops, adjoint of each other") {
  RelativeIndexOptions o;
  o.max_past = 3;
  o.max_future = 2;
  o.out_of_range = OutOfRange::Zero;
  const int64_t t2 = 4, t1 = 6, R = o.table_size();
  Tensor C = relative_index(t2, t1, o);
  std::vector<int64_t> c = C.to_vector<int64_t>();
  OpCase gather;
  gather.name = "relative_gather";
  gather.shapes = {{2, 3, t2, R}};
  gather.op = [C, R](const TensorList& in) { return relative_gather(in[0], C, R); };
  gather.reference = [c, R](const std::vector<Ref>& in) {
    Ref out({2, 3, t2, t1});
    for (int64_t n = 0; n < 6; ++n)
      for (int64_t i = 0; i < t2; ++i)
        for (int64_t j = 0; j < t1; ++j) {
          int64_t r = c[i * t1 + j];
          out.v[(n * t2 + i) * t1 + j] = r < 0 ? 0.0 : in[0].v[(n * t2 + i) * R + r];
        }
    return out;
  };
  gather.bad_inputs = {
      {"table size mismatch", [C] { relative_gather(zeros({4, 5}), C, 6); }, "[relative_gather] expected P of shape (..., t2, 6)"},
      {"index of the wrong shape", [C, R] { relative_gather(zeros({3, R}), C, R); }, "index of shape (4,6) does not match 3 queries"},
      {"index outside the table", [R] { relative_gather(zeros({1, R}), full({1, 2}, double(R), kInt64), R); }, "index entry 6 at (0, 0) is outside a table of 6 rows"},
      {"float index", [R] { relative_gather(zeros({1, R}), zeros({1, 2}), R); }, "index must be int64, got float32"},
  };
  run_op_case(gather);

  OpCase scatter;
  scatter.name = "relative_scatter";
  scatter.shapes = {{3, t2, t1}};
  scatter.op = [C, R](const TensorList& in) { return relative_scatter(in[0], C, R); };
  scatter.reference = [c, R](const std::vector<Ref>& in) {
    Ref out({3, t2, R});
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < t2; ++i)
        for (int64_t j = 0; j < t1; ++j)
          if (c[i * t1 + j] >= 0) out.v[(n * t2 + i) * R + c[i * t1 + j]] += in[0].v[(n * t2 + i) * t1 + j];
    return out;
  };
  scatter.bad_inputs = {{"zero table", [C] { relative_scatter(zeros({4, 6}), C, 0); }, "[relative_scatter] table_size must be >= 1"}};
  run_op_case(scatter);

  // <gather(P), S> == <P, scatter(S)>: the two ops are adjoint.
  Tensor P = uniform({2, t2, R}, -1, 1, kFloat64, 3), S = uniform({2, t2, t1}, -1, 1, kFloat64, 4);
  double lhs = sum(relative_gather(P, C, R) * S).item(), rhs = sum(P * relative_scatter(S, C, R)).item();
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-14));
}

TEST_CASE("relative_gather with clipping and a broadcast table (a per-head bias expanded over queries)") {
  RelativeIndexOptions o;
  o.max_past = 1;
  o.max_future = 1;
  o.out_of_range = OutOfRange::Clip;
  const int64_t t2 = 5, t1 = 5, R = 3;
  Tensor C = relative_index(t2, t1, o);
  Tensor beta = uniform({2, R}, -1, 1, kFloat64, 9).requires_grad_();  // (H, R)
  Tensor P = beta.unsqueeze(1).expand({2, t2, R});                      // stride 0 over queries
  Tensor S = relative_gather(P, C, R);
  std::vector<double> b = beta.detach().to_vector<double>(), s = S.detach().to_vector<double>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < t2; ++i)
      for (int64_t j = 0; j < t1; ++j) {
        int64_t r = std::min<int64_t>(std::max<int64_t>(j - i, -1), 1) + 1;
        CHECK(s[(h * t2 + i) * t1 + j] == b[h * R + r]);
      }
  // gradient of a broadcast table: each bias sums the scores of its diagonals
  S.sum().backward();
  std::vector<double> g = beta.grad().to_vector<double>();
  CHECK(g == std::vector<double>{10, 5, 10, 10, 5, 10});  // clipped edges collect 4+3+2+1 entries
  GradcheckResult r = gradcheck(
      [C](const TensorList& in) { return relative_gather(in[0].unsqueeze(1).expand({2, 5, 3}), C, 3); },
      {beta.detach().clone().requires_grad_()});
  CHECK_MESSAGE(r.ok, r.message);
}
