// Exercise 04 (after stop 14): the relative index map C.
//
// A relative scheme reads, for query i and key j, the row of its table for δ = j − π(i). Here the
// queries sit where their keys do, π(i) = i (Alignment::Left), and the table has rows for δ from
// −max_past (row 0) to +max_future (row max_past + max_future). Write
//
//   my_relative_index(t2, t1, max_past, max_future, causal): C, t2 × t1 row-major, C[i·t1 + j] = the
//   row for (i, j), or −1 when there is none: δ outside the table (OutOfRange::Zero: no term), or a
//   key after its query (δ > 0) under causal attention.
//
// Then S = relative_gather(Q·Eᵀ, C) is the relative term of example 06, for any lengths.
//
// The check: your C against the library's relative_index on 12 geometries (t2 = t1 and not, tables
// shorter and longer than the lengths, causal or not), entry by entry. The map has no backward of its
// own (the gather's is the scatter, stop 14), so a gradcheck could not see a wrong entry: the values
// are compared instead. Then example 06's 4 × 4 head is scored through your map and gradchecked.
//
// Run: ./build/exercises/04_relative_index   The library's own: autograd/ops/relative.cpp, relative_index.
#include "exercises/exercise.h"

using namespace relgrad;

std::vector<int64_t> my_relative_index(int64_t t2, int64_t t1, int64_t max_past, int64_t max_future, bool causal) {
#ifdef RELGRAD_EXERCISE_REFERENCE
  RelativeIndexOptions o;
  o.max_past = max_past;
  o.max_future = max_future;
  o.out_of_range = OutOfRange::Zero;
  o.causal = causal;
  return relative_index(t2, t1, o).contiguous().to_vector<int64_t>();
#else
  // ---- YOUR CODE (replace the line below) ----
  (void)max_past, (void)max_future, (void)causal;
  return std::vector<int64_t>(static_cast<size_t>(t2 * t1), -1);
  // ---- END OF YOUR CODE ----
#endif
}

std::string compare(int64_t t2, int64_t t1, int64_t past, int64_t future, bool causal) {
  RelativeIndexOptions o;
  o.max_past = past;
  o.max_future = future;
  o.out_of_range = OutOfRange::Zero;
  o.causal = causal;
  const std::vector<int64_t> want = relative_index(t2, t1, o).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> got = my_relative_index(t2, t1, past, future, causal);
  if (got.size() != want.size())
    return "C has " + std::to_string(got.size()) + " entries, expected t2·t1 = " + std::to_string(want.size());
  for (size_t k = 0; k < want.size(); ++k)
    if (got[k] != want[k])
      return "C[" + std::to_string(k / t1) + "][" + std::to_string(k % t1) + "] (delta " +
             std::to_string(int64_t(k % t1) - int64_t(k / t1)) + ") is " + std::to_string(got[k]) + ", expected " +
             std::to_string(want[k]);
  return "";
}

int main() {
  struct Case { int64_t t2, t1, past, future; bool causal; };
  const std::vector<Case> cases = {{4, 4, 3, 3, false}, {4, 4, 3, 3, true}, {4, 4, 1, 1, false}, {4, 4, 1, 2, true},
                                   {1, 1, 0, 0, false}, {5, 3, 2, 2, false}, {3, 5, 2, 2, false}, {3, 5, 4, 1, true},
                                   {6, 6, 2, 0, true},  {6, 6, 0, 2, false}, {2, 7, 6, 6, false}, {7, 2, 6, 6, true}};
  std::vector<std::pair<std::string, exercise::Check>> checks;
  for (const Case& c : cases)
    checks.push_back({"C for t2 " + std::to_string(c.t2) + ", t1 " + std::to_string(c.t1) + ", past " +
                          std::to_string(c.past) + ", future " + std::to_string(c.future) + (c.causal ? ", causal" : ""),
                      [c] { return compare(c.t2, c.t1, c.past, c.future, c.causal); }});
  // Example 06's head: S = relative_gather(Q·Eᵀ, C), gradchecked in Q and E through your map.
  checks.push_back({"example 06's relative term through your C, gradchecked", [] {
                      Generator gen(4);
                      std::vector<int64_t> C = my_relative_index(4, 4, 3, 3, false);
                      Tensor index = from_vector(C, {4, 4});
                      return exercise::gradchecked(
                          [index](const TensorList& in) { return relative_gather(matmul(in[0], in[1].transpose(0, 1)), index, 7); },
                          {exercise::leaf({4, 2}, gen), exercise::leaf({7, 2}, gen)});
                    }});
  return exercise::run("exercise 04: the relative index map", checks);
}
