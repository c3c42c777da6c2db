// Example 01: what a tensor is. A tensor is a view: shape, strides (in elements) and an offset
// over a shared, ref-counted storage (core/tensor.h). Element (i, j) lives at
//   storage[offset + i * strides[0] + j * strides[1]]
// so transpose, narrow, select, expand and most reshapes only change those numbers: nothing is
// copied, and writing through a view changes the base. Only when the numbers cannot describe the
// new layout (reshaping a transposed tensor, asking for contiguous()) are the elements copied.
// Broadcasting is the same trick: a size-1 dim is expanded with stride 0, so (3,1) + (1,4) reads
// the same column element four times without ever making the (3,4) copy of it.
//
// Run: ./build/examples/01_tensors   (every claim is checked; exits 1 if one does not hold)
// expect: x: +shape \(3,4\) strides \(4,1\) offset 0 contiguous yes
// expect: x\.t\(\): +shape \(4,3\) strides \(1,4\) offset 0 contiguous no shares storage: yes
// expect: x\.narrow\(1, 1, 2\): +shape \(3,2\) strides \(4,1\) offset 1 contiguous no shares storage: yes
// expect: x\.select\(0, 2\): +shape \(4\) strides \(1\) offset 8 contiguous yes shares storage: yes
// expect: writing -1 through the narrow view changed x: yes
// expect: x\.t\(\)\.reshape\(.12.\): .* shares storage: no
// expect: col\.expand\(.3, 4.\): +shape \(3,4\) strides \(1,0\) offset 0 contiguous no shares storage: yes
// expect: \(3,1\) \+ \(1,4\) -> \(3,4\), every element right: yes
// expect: all [0-9]+ checks passed
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "relgrad.h"

using namespace relgrad;

namespace {

int checks = 0, failures = 0;

// Every claim the example makes goes through here, so the output cannot say more than is true.
void check(bool holds, const std::string& claim) {
  ++checks;
  if (!holds) {
    ++failures;
    std::printf("CLAIM FAILED: %s\n", claim.c_str());
  }
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

// One line per view: its geometry, and whether it reads the same storage as `base`.
void describe(const std::string& name, const Tensor& t, const Tensor& base) {
  std::printf("%-22s shape %s strides %s offset %lld contiguous %s", (name + ":").c_str(),
              shape_str(t.shape()).c_str(), shape_str(t.strides()).c_str(),
              static_cast<long long>(t.offset()), t.is_contiguous() ? "yes" : "no");
  if (!t.same(base)) std::printf(" shares storage: %s", shares_storage(t, base) ? "yes" : "no");
  std::printf("\n");
}

float at(const Tensor& t, int64_t i, int64_t j) {  // reads through the strides, as a kernel does
  return t.data_ptr<float>()[i * t.stride(0) + j * t.stride(1)];
}

}  // namespace

int main() {
  try {
    // ---- views: new shape/strides/offset, same storage ----
    Tensor x = arange(12).reshape({3, 4});  // 0 1 2 3 / 4 5 6 7 / 8 9 10 11
    std::cout << "x =\n" << x << "\n";
    describe("x", x, x);
    Tensor xt = x.t(), cols = x.narrow(1, 1, 2), row = x.select(0, 2), flat = x.reshape({2, 6});
    describe("x.t()", xt, x);
    describe("x.narrow(1, 1, 2)", cols, x);
    describe("x.select(0, 2)", row, x);
    describe("x.reshape({2, 6})", flat, x);
    check(xt.strides() == Shape{1, 4} && shares_storage(xt, x), "transpose swaps strides, no copy");
    check(cols.offset() == 1 && cols.strides() == Shape{4, 1} && shares_storage(cols, x),
          "narrow moves the offset");
    check(row.offset() == 8 && row.dim() == 1 && shares_storage(row, x),
          "select drops a dim, adds to the offset");
    check(shares_storage(flat, x), "reshape of a contiguous tensor is a view");
    check(at(xt, 3, 1) == 7.0f, "x.t()[3][1] is x[1][3]");

    // ---- a view writes through to its base ----
    cols.fill_(-1);  // in place, on columns 1 and 2 of x
    std::cout << "after x.narrow(1, 1, 2).fill_(-1), x =\n" << x << "\n";
    bool changed = at(x, 0, 1) == -1.0f && at(x, 2, 2) == -1.0f && at(x, 1, 0) == 4.0f && at(x, 1, 3) == 7.0f;
    std::printf("writing -1 through the narrow view changed x: %s\n", changed ? "yes" : "no");
    check(changed, "the view and x are one storage");
    check(flat.to_vector<float>()[1] == -1.0f, "every other view of x sees the write too");

    // ---- what copies: a layout the strides cannot express ----
    // x.t() read in row-major order jumps around in memory: no (stride) for a flat (12) view exists.
    Tensor flat_t = xt.reshape({12});
    describe("x.t().reshape({12})", flat_t, x);
    check(!shares_storage(flat_t, x) && flat_t.is_contiguous(), "reshape of a transposed tensor copies");
    check(flat_t.to_vector<float>()[1] == 4.0f, "the copy holds the transposed order: 0 4 8 ...");
    Tensor packed = xt.contiguous();
    describe("x.t().contiguous()", packed, x);
    check(!shares_storage(packed, x), "contiguous() of a non-contiguous tensor copies");
    check(x.contiguous().same(x), "contiguous() of a contiguous tensor is the tensor itself");
    std::printf("x.contiguous() is x itself (no copy): %s\n", x.contiguous().same(x) ? "yes" : "no");

    // ---- broadcasting: stride 0 instead of a copy ----
    Tensor col = arange(3).reshape({3, 1});         // 0 1 2 as a column
    Tensor line = arange(4).reshape({1, 4}) * 10;   // 0 10 20 30 as a row
    Tensor wide = col.expand({3, 4});               // what the add reads: every row's element 4 times
    describe("col.expand({3, 4})", wide, col);
    check(wide.strides() == Shape{1, 0} && shares_storage(wide, col), "expand is stride 0, no copy");
    Tensor sum = col + line;
    std::cout << "col + line =\n" << sum << "\n";
    bool right = sum.shape() == Shape{3, 4};
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) right = right && at(sum, i, j) == static_cast<float>(i + 10 * j);
    std::printf("(3,1) + (1,4) -> %s, every element right: %s\n", shape_str(sum.shape()).c_str(),
                right ? "yes" : "no");
    check(right, "broadcasting adds col[i] + line[j]");

    if (failures > 0) {
      std::printf("%d of %d checks failed\n", failures, checks);
      return 1;
    }
    std::printf("all %d checks passed\n", checks);
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
