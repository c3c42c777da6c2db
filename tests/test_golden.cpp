// Golden tests: relgrad against values and gradients computed by PyTorch 1.13 in float64, stored in
// tests/golden/*.safetensors by tools/gen_golden.py. The op tests check each op on its own; the chain
// tests check that the ops compose (linear → layer_norm → gelu → cross_entropy), in float64 and float32.
#include <string>

#include "core/safetensors.h"
#include "testing.h"

using namespace relgrad;

namespace {

constexpr double kAtol64 = 1e-10, kRtol64 = 1e-8;
constexpr double kAtol32 = 1e-5, kRtol32 = 1e-4;
const char* const kHint = "regenerate with /usr/bin/python3 tools/gen_golden.py if the generator changed";

// One golden file: its tensors by name, and checks that name the file, the tensor and the hint.
struct Golden {
  std::string name;
  SafetensorsFile file;

  explicit Golden(const std::string& file_name)
      : name(file_name), file(load_safetensors(std::string(RELGRAD_GOLDEN_DIR) + "/" + file_name + ".safetensors")) {
    CHECK(meta("generator") == "tools/gen_golden.py");
  }

  std::string meta(const std::string& key) const {
    auto it = file.metadata.find(key);
    std::string report = name + " has no metadata '" + key + "'; " + kHint;
    REQUIRE_MESSAGE(it != file.metadata.end(), report);
    return it->second;
  }

  Tensor at(const std::string& key) const {
    auto it = file.tensors.find(key);
    std::string report = name + " has no tensor '" + key + "'; " + kHint;
    REQUIRE_MESSAGE(it != file.tensors.end(), report);
    return it->second;
  }

  // An input as a fresh leaf of dtype `dt` that requires grad.
  Tensor leaf(const std::string& key, DType dt = kFloat64) const {
    return at(key).to(dt).detach().requires_grad_();
  }

  void check(const Tensor& actual, const std::string& key, double atol = kAtol64, double rtol = kRtol64) const {
    std::string where = name + ".safetensors '" + key + "' (" + kHint + ")";
    INFO(where);
    REQUIRE_MESSAGE(actual.defined(), "no value (a gradient that did not arrive?)");
    CHECK_CLOSE(actual, at(key), atol, rtol);
  }
};

// x (4,8) @ W (8,6) + b → layer_norm over 6 → gelu → cross_entropy (mean), values and gradients.
void check_chain(const std::string& file_name, DType dt, double atol, double rtol) {
  Golden g(file_name);
  CAPTURE(dtype_name(dt));
  Tensor x = g.leaf("x", dt), W = g.leaf("W", dt), b = g.leaf("b", dt);
  Tensor ln_weight = g.leaf("ln_weight", dt), ln_bias = g.leaf("ln_bias", dt);
  Tensor targets = g.at("targets");
  CrossEntropyOptions options;
  options.set_label_smoothing(std::stod(g.meta("label_smoothing"))).set_ignore_index(std::stoll(g.meta("ignore_index")));

  Tensor linear = matmul(x, W) + b;                                                         // (4, 6)
  Tensor ln = layer_norm(linear, {6}, ln_weight, ln_bias, std::stod(g.meta("eps")));        // (4, 6)
  Tensor act = gelu(ln, g.meta("gelu_approximate"));                                        // (4, 6)
  Tensor loss = cross_entropy(act, targets, options);                                       // ()
  loss.backward();

  g.check(linear, "linear", atol, rtol);
  g.check(ln, "ln", atol, rtol);
  g.check(act, "gelu", atol, rtol);
  g.check(loss, "loss", atol, rtol);
  g.check(x.grad(), "grad_x", atol, rtol);
  g.check(W.grad(), "grad_W", atol, rtol);
  g.check(b.grad(), "grad_b", atol, rtol);
  g.check(ln_weight.grad(), "grad_ln_weight", atol, rtol);
  g.check(ln_bias.grad(), "grad_ln_bias", atol, rtol);
}

}  // namespace

TEST_CASE("golden chain: linear, layer_norm, gelu (erf), cross_entropy") {
  SUBCASE("float64") { check_chain("chain_gelu_erf", kFloat64, kAtol64, kRtol64); }
  SUBCASE("float32") { check_chain("chain_gelu_erf", kFloat32, kAtol32, kRtol32); }
}

TEST_CASE("golden chain: gelu (tanh), cross_entropy with label smoothing and an ignored target") {
  SUBCASE("float64") { check_chain("chain_gelu_tanh_smoothing", kFloat64, kAtol64, kRtol64); }
  SUBCASE("float32") { check_chain("chain_gelu_tanh_smoothing", kFloat32, kAtol32, kRtol32); }
}

TEST_CASE("golden softmax dim=-1") {
  Golden g("op_softmax");
  Tensor x = g.leaf("x");
  Tensor y = softmax(x, -1);
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(x.grad(), "grad_x");
}

TEST_CASE("golden log_softmax dim=0") {
  Golden g("op_log_softmax");
  Tensor x = g.leaf("x");
  Tensor y = log_softmax(x, 0);
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(x.grad(), "grad_x");
}

TEST_CASE("golden rms_norm") {
  Golden g("op_rms_norm");
  Tensor x = g.leaf("x"), weight = g.leaf("weight");
  double eps = std::stod(g.meta("eps"));
  Tensor y;
  SUBCASE("composite of elementwise ops") { y = x * rsqrt(mean(x * x, {-1}, true) + eps) * weight; }
  SUBCASE("rms_norm op") { y = rms_norm(x, {6}, weight, eps); }
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(x.grad(), "grad_x");
  g.check(weight.grad(), "grad_weight");
}

TEST_CASE("golden var dim=1 unbiased") {
  Golden g("op_var");
  Tensor x = g.leaf("x");
  Tensor y = var(x, {1}, /*correction=*/1);
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(x.grad(), "grad_x");
}

TEST_CASE("golden logsumexp dim=1") {
  Golden g("op_logsumexp");
  Tensor x = g.leaf("x");  // one row is offset by 100
  Tensor y = logsumexp(x, {1});
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(x.grad(), "grad_x");
}

TEST_CASE("golden matmul batched with broadcasting") {
  Golden g("op_matmul_batched");
  Tensor a = g.leaf("a"), b = g.leaf("b");  // (2,1,3,4) @ (5,4,2) → (2,5,3,2)
  Tensor y = matmul(a, b);
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(a.grad(), "grad_a");
  g.check(b.grad(), "grad_b");
}

TEST_CASE("golden embedding with repeated indices") {
  Golden g("op_embedding");
  Tensor weight = g.leaf("weight");  // (7,4), indices (2,5)
  Tensor y = embedding(weight, g.at("indices"));
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(weight.grad(), "grad_weight");
}

TEST_CASE("golden gather dim=1 with repeated indices") {
  Golden g("op_gather");
  Tensor x = g.leaf("x");
  Tensor y = gather(x, 1, g.at("index"));
  y.backward(g.at("grad_y"));
  g.check(y, "y");
  g.check(x.grad(), "grad_x");
}

TEST_CASE("golden elementwise silu, sigmoid, tanh") {
  Golden g("op_unary");
  Tensor (*ops[])(const Tensor&) = {silu, sigmoid, tanh};
  const char* names[] = {"silu", "sigmoid", "tanh"};
  for (int k = 0; k < 3; ++k) {
    CAPTURE(names[k]);
    Tensor x = g.leaf("x");
    Tensor y = ops[k](x);
    y.backward(g.at("grad_y"));
    g.check(y, std::string(names[k]) + ".y");
    g.check(x.grad(), std::string(names[k]) + ".grad_x");
  }
}
