#include "testing.h"
using namespace relgrad;
TEST_CASE("smoke: add and backward") {
  Tensor a = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  Tensor b = from_vector<double>({4, 5, 6}, {3}).requires_grad_();
  Tensor y = (a * b + a).sum();
  y.backward();
  CHECK(y.item() == doctest::Approx(38));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{5, 6, 7});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 2, 3});
}
