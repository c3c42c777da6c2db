// Module::state_dict / load_state_dict: order and names (parameters, buffers, children; shared
// tensors once), a round trip through safetensors into a differently initialised model, every
// problem reported in one message with the model left bit-for-bit unchanged, strict = false, and
// dtype conversion on load.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "file_testing.h"
#include "testing.h"

using namespace relgrad;
using namespace relgrad::testing;
namespace fs = std::filesystem;

namespace {

// Two linear layers with an ALiBi attention between them: parameters, a buffer and nested children.
struct Net : Module {
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<MultiHeadAttention> attn;
  Tensor scale;  // own parameter, registered before the children
  explicit Net(uint64_t seed) {
    Generator g(seed);
    scale = register_parameter("scale", rand({4}, kFloat32, &g));
    fc1 = register_module("fc1", std::make_shared<Linear>(3, 4, true, &g));
    attn = register_module("attn", std::make_shared<MultiHeadAttention>(4, 2, std::make_shared<ALiBi>(2), 0.0, true, &g));
    fc2 = register_module("fc2", std::make_shared<Linear>(4, 2, true, &g));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = mul((*fc1)(x), scale);
    AttentionOptions o;
    o.causal = true;
    return (*fc2)(attn->forward(h, h, o).output);
  }
};

// Every tensor of the state as raw bytes, for bitwise comparison.
std::map<std::string, std::string> snapshot(const Module& m) {
  std::map<std::string, std::string> out;
  for (auto& [name, t] : m.state_dict()) {
    Tensor c = t.to(Device::cpu()).contiguous();
    out[name] = std::string(static_cast<const char*>(c.raw_data()), c.numel() * dtype_size(c.dtype()));
  }
  return out;
}

std::map<std::string, Tensor> as_map(const std::vector<std::pair<std::string, Tensor>>& sd) {
  return {sd.begin(), sd.end()};
}

Tensor input() { return uniform({2, 5, 3}, -1, 1, kFloat32, 7); }

}  // namespace

TEST_CASE("state_dict: own parameters, then buffers, then children — dotted names — detached aliases") {
  Net net(1);
  auto sd = net.state_dict();
  std::vector<std::string> names;
  for (auto& [n, _] : sd) names.push_back(n);
  std::vector<std::string> expected = {"scale",
                                       "fc1.weight", "fc1.bias",
                                       "attn.q_proj.weight", "attn.q_proj.bias", "attn.k_proj.weight", "attn.k_proj.bias",
                                       "attn.v_proj.weight", "attn.v_proj.bias", "attn.out_proj.weight", "attn.out_proj.bias",
                                       "attn.positional.slopes",
                                       "fc2.weight", "fc2.bias"};
  CHECK(names == expected);
  for (auto& entry : sd) {
    auto& n = entry.first;
    auto& t = entry.second;
    CHECK_MESSAGE(!t.requires_grad(), n);
  }
  // An alias: writing through it writes into the model.
  {
    NoGradGuard no_grad;
    sd[0].second.fill_(3.0);
  }
  CHECK(net.scale.to_vector<float>() == std::vector<float>(4, 3.0f));
}

TEST_CASE("state_dict: a shared tensor appears once, at its named_parameters name — any alias loads it") {
  // Share by registering the same Linear twice.
  struct Shared : Module {
    std::shared_ptr<Linear> enc, dec;
    Shared() {
      enc = register_module("enc", std::make_shared<Linear>(2, 3));
      dec = register_module("dec", enc);
    }
  };
  Shared m;
  auto sd = m.state_dict();
  REQUIRE(sd.size() == 2);
  CHECK(sd[0].first == "enc.weight");
  CHECK(sd[1].first == "enc.bias");
  CHECK(m.named_parameters()[0].first == "enc.weight");
  m.load_state_dict(sd);  // loading its own state is a no-op

  // The second name is known (not unexpected) and satisfies the entry.
  std::map<std::string, Tensor> alias = {{"dec.weight", full({3, 2}, 2.0)}, {"dec.bias", full({3}, 5.0)}};
  m.load_state_dict(alias);
  CHECK(m.enc->weight.to_vector<float>() == std::vector<float>(6, 2.0f));
  CHECK(m.dec->bias.to_vector<float>() == std::vector<float>(3, 5.0f));
}

TEST_CASE("load_state_dict: a safetensors round trip into a differently initialised model gives identical outputs") {
  TempDir dir;
  Net a(1), b(2);
  a.eval();
  b.eval();
  Tensor x = input();
  NoGradGuard no_grad;
  Tensor ya = a.forward(x), yb = b.forward(x);
  CHECK_FALSE(compare(yb, ya, 0, 0).empty());  // different init, different outputs

  save_safetensors(dir.file("net.safetensors"), as_map(a.state_dict()));
  Tensor w_handle = b.fc1->weight;  // handles taken before the load stay valid
  b.load_state_dict(load_safetensors(dir.file("net.safetensors")).tensors);
  CHECK(snapshot(b) == snapshot(a));
  CHECK(w_handle.same(b.fc1->weight));
  CHECK(w_handle.requires_grad());
  CHECK_CLOSE(b.forward(x), ya, 0, 0);
}

TEST_CASE("load_state_dict: the buffer (ALiBi slopes) is saved and loaded") {
  Net a(1), b(1);
  {
    NoGradGuard no_grad;
    a.attn->positional->named_buffers()[0].second.fill_(0.25);
  }
  auto sd = a.state_dict();
  bool found = false;
  for (auto& [n, t] : sd)
    if (n == "attn.positional.slopes") found = true;
  CHECK(found);
  b.load_state_dict(sd);
  auto slopes = static_cast<ALiBi&>(*b.attn->positional).slopes;
  CHECK(slopes.to_vector<float>() == std::vector<float>{0.25f, 0.25f});
  CHECK(snapshot(b) == snapshot(a));
}

TEST_CASE("load_state_dict: every problem in one message, and the model unchanged") {
  Net net(3);
  const auto before = snapshot(net);
  auto good = as_map(Net(4).state_dict());

  SUBCASE("missing") {
    auto s = good;
    s.erase("fc1.weight");
    check_throws_with([&] { net.load_state_dict(s); }, "[load_state_dict] 1 problem: missing 'fc1.weight'");
  }
  SUBCASE("unexpected") {
    auto s = good;
    s["fc3.weight"] = zeros({2});
    check_throws_with([&] { net.load_state_dict(s); }, "[load_state_dict] 1 problem: unexpected 'fc3.weight'");
  }
  SUBCASE("shape") {
    auto s = good;
    s["fc2.bias"] = zeros({3});
    check_throws_with([&] { net.load_state_dict(s); },
                      "[load_state_dict] 1 problem: 'fc2.bias' has shape (3) but the model expects (2)");
  }
  SUBCASE("dtype category") {
    auto s = good;
    s["attn.positional.slopes"] = zeros({2}, kInt64);
    check_throws_with([&] { net.load_state_dict(s); },
                      "'attn.positional.slopes' has dtype int64 but the model expects float32");
  }
  SUBCASE("undefined") {
    auto s = good;
    s["scale"] = Tensor();
    check_throws_with([&] { net.load_state_dict(s); }, "'scale' is an undefined tensor");
  }
  SUBCASE("duplicate") {
    auto v = net.state_dict();
    v.push_back(v.front());
    check_throws_with([&] { net.load_state_dict(v); }, "duplicate 'scale'");
  }
  SUBCASE("all at once, valid entries not applied either") {
    auto s = good;
    s.erase("fc1.weight");
    s.erase("attn.positional.slopes");
    s["extra"] = zeros({1});
    s["fc2.bias"] = zeros({3});
    s["fc2.weight"] = zeros({2, 4}, kBool);
    check_throws_with([&] { net.load_state_dict(s); },
                      "[load_state_dict] 5 problems: missing 'fc1.weight'; missing 'attn.positional.slopes'; "
                      "unexpected 'extra'; 'fc2.bias' has shape (3) but the model expects (2); "
                      "'fc2.weight' has dtype bool but the model expects float32");
  }
  SUBCASE("strict = false still rejects a shape mismatch") {
    auto s = good;
    s.erase("fc1.weight");
    s["extra"] = zeros({1});
    s["fc1.bias"] = zeros({5});
    check_throws_with([&] { net.load_state_dict(s, false); },
                      "[load_state_dict] 1 problem: 'fc1.bias' has shape (5) but the model expects (4)");
  }
  CHECK(snapshot(net) == before);
}

TEST_CASE("load_state_dict: strict = false skips missing and unexpected entries, loads the rest") {
  Net net(5), src(6);
  const auto before = snapshot(net), wanted = snapshot(src);
  auto s = as_map(src.state_dict());
  s.erase("fc1.weight");
  s["not.in.model"] = zeros({7});
  net.load_state_dict(s, false);
  auto after = snapshot(net);
  for (auto& entry : after) {
    auto& name = entry.first;
    auto& bytes = entry.second;
    if (name == "fc1.weight")
      CHECK_MESSAGE(bytes == before.at(name), name);
    else
      CHECK_MESSAGE(bytes == wanted.at(name), name);
  }
}

TEST_CASE("load_state_dict: a float64 file loads into a float32 model, converted") {
  TempDir dir;
  Net a(1), b(2);
  std::map<std::string, Tensor> f64;
  for (auto& [n, t] : a.state_dict()) f64[n] = t.to(kFloat64);
  save_safetensors(dir.file("f64.safetensors"), f64);
  auto loaded = load_safetensors(dir.file("f64.safetensors")).tensors;
  CHECK(loaded.at("fc1.weight").dtype() == kFloat64);
  b.load_state_dict(loaded);
  for (auto& entry : b.state_dict()) {
    auto& n = entry.first;
    auto& t = entry.second;
    CHECK_MESSAGE(t.dtype() == kFloat32, n);
  }
  CHECK(snapshot(b) == snapshot(a));  // float32 → float64 → float32 is exact
  NoGradGuard no_grad;
  CHECK_CLOSE(b.forward(input()), a.forward(input()), 0, 0);
}

TEST_CASE("load_state_dict: a float32 model converted to float64 loads a float32 checkpoint") {
  Net a(1), b(2);
  b.to(kFloat64);
  b.load_state_dict(a.state_dict());
  for (auto& entry : b.state_dict()) {
    auto& n = entry.first;
    auto& t = entry.second;
    CHECK_MESSAGE(t.dtype() == kFloat64, n);
  }
  CHECK_CLOSE(b.fc2->weight, a.fc2->weight.to(kFloat64), 0, 0);
}
