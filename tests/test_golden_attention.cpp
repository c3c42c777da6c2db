// Golden attention tests: one relgrad MultiHeadAttention per positional scheme against PyTorch 1.13
// float64, written from each paper's formula (not from relgrad) by tools/gen_golden_attention.py into
// tests/golden/attn_<case>.safetensors. Each file holds the inputs, every parameter under relgrad's
// named_parameters() name and orientation, the output, and the gradients of loss = sum(output * R)
// with respect to the inputs and every parameter. The scheme's options come from the file's metadata.
#include <memory>
#include <set>
#include <string>

#include "core/safetensors.h"
#include "testing.h"

using namespace relgrad;

namespace {

constexpr double kAtol = 1e-10, kRtol = 1e-8;
const char* const kHint =
    "regenerate with /usr/bin/python3 tools/gen_golden_attention.py if the generator changed";

struct GoldenAttention {
  std::string name;
  SafetensorsFile file;

  explicit GoldenAttention(const std::string& case_name)
      : name("attn_" + case_name),
        file(load_safetensors(std::string(RELGRAD_GOLDEN_DIR) + "/attn_" + case_name + ".safetensors")) {
    CHECK(meta("generator") == "tools/gen_golden_attention.py");
  }

  std::string meta(const std::string& key) const {
    auto it = file.metadata.find(key);
    std::string report = name + " has no metadata '" + key + "'; " + kHint;
    REQUIRE_MESSAGE(it != file.metadata.end(), report);
    return it->second;
  }
  int64_t meta_int(const std::string& key) const { return std::stoll(meta(key)); }
  bool has(const std::string& key) const { return file.tensors.count(key) > 0; }

  Tensor at(const std::string& key) const {
    auto it = file.tensors.find(key);
    std::string report = name + " has no tensor '" + key + "'; " + kHint;
    REQUIRE_MESSAGE(it != file.tensors.end(), report);
    return it->second;
  }

  Tensor leaf(const std::string& key) const { return at(key).to(kFloat64).detach().requires_grad_(); }

  void check(const Tensor& actual, const std::string& key) const {
    std::string where = name + ".safetensors '" + key + "' (" + kHint + ")";
    INFO(where);
    REQUIRE_MESSAGE(actual.defined(), "no value (a gradient that did not arrive?)");
    CHECK_CLOSE(actual, at(key), kAtol, kRtol);
  }
};

// The positional scheme the file describes, built with relgrad's constructors.
std::shared_ptr<PositionalScheme> make_scheme(const GoldenAttention& g, int64_t head_dim, int64_t heads) {
  const std::string scheme = g.meta("scheme");
  if (scheme == "none") return nullptr;
  if (scheme == "seed")  // one table shared by the heads, zero beyond |δ| = t3 − 1 (the blog's padding)
    return std::make_shared<SeedRelativeEmbedding>(head_dim, g.meta_int("max_length"), 0, OutOfRange::Zero);
  if (scheme == "huang")  // per-head tables (t2t's default), zero beyond the table
    return std::make_shared<HuangRelativeEmbedding>(head_dim, g.meta_int("max_length"), heads, OutOfRange::Zero);
  if (scheme == "shaw")  // shared w^K and w^V (the paper)
    return std::make_shared<ShawRelativeEmbedding>(head_dim, g.meta_int("clip"), 0, true);
  if (scheme == "t5")
    return std::make_shared<T5RelativeBias>(heads, g.meta_int("num_buckets"), g.meta_int("max_distance"),
                                            g.meta_int("bidirectional") != 0);
  if (scheme == "alibi") return std::make_shared<ALiBi>(heads, false);
  if (scheme == "rope")
    return std::make_shared<RoPE>(head_dim, std::stod(g.meta("base")),
                                  g.meta("pairing") == "interleaved" ? RoPE::Pairing::Interleaved
                                                                     : RoPE::Pairing::HalfSplit);
  if (scheme == "transformer_xl") return std::make_shared<TransformerXL>(head_dim * heads, heads);
  FAIL(g.name << " names an unknown scheme '" << scheme << "'; " << kHint);
  return nullptr;
}

void check_golden_attention(const std::string& case_name) {
  GoldenAttention g(case_name);
  const int64_t C = g.meta_int("embed_dim"), H = g.meta_int("num_heads");
  MultiHeadAttention attention(C, H, make_scheme(g, C / H, H));
  attention.to(kFloat64);

  // Every parameter from the file, and nothing in the file that relgrad does not have.
  std::set<std::string> names;
  {
    NoGradGuard no_grad;
    for (auto& entry : attention.named_parameters()) {
      auto& name = entry.first;
      auto& parameter = entry.second;
      INFO(g.name << ": parameter " << name);
      CHECK(g.at(name).shape() == parameter.shape());
      parameter.copy_(g.at(name));
      names.insert(name);
    }
  }
  for (const auto& [key, tensor] : g.file.tensors) {
    const std::string grad_of = key.rfind("grad.", 0) == 0 ? key.substr(5) : "";
    if (grad_of.empty() || grad_of == "x" || grad_of == "query" || grad_of == "key_value") continue;
    INFO(g.name << " has a gradient for '" << grad_of << "', which is not a parameter of relgrad's layer");
    CHECK(names.count(grad_of) == 1);
  }
  if (g.has("slopes")) {  // ALiBi's fixed slopes are a buffer
    for (auto& [name, buffer] : attention.named_buffers())
      if (name == "positional.slopes") g.check(buffer, "slopes");
  }

  AttentionOptions options;
  options.causal = g.meta_int("causal") != 0;
  if (g.has("key_padding_mask")) options.key_padding_mask = g.at("key_padding_mask");
  const bool cross = g.meta_int("cross") != 0;
  Tensor x, query, key_value, output;
  if (cross) {
    query = g.leaf("query");
    key_value = g.leaf("key_value");
    output = attention.forward(query, key_value, options).output;
  } else {
    x = g.leaf("x");
    output = attention.forward(x, x, options).output;
  }
  sum(output * g.at("R")).backward();

  g.check(output, "output");
  if (cross) {
    g.check(query.grad(), "grad.query");
    g.check(key_value.grad(), "grad.key_value");
  } else {
    g.check(x.grad(), "grad.x");
  }
  for (auto& [name, parameter] : attention.named_parameters()) g.check(parameter.grad(), "grad." + name);
}

}  // namespace

TEST_CASE("golden attention none") { check_golden_attention("none"); }
TEST_CASE("golden attention seed") { check_golden_attention("seed"); }
TEST_CASE("golden attention seed cross") { check_golden_attention("seed_cross"); }
TEST_CASE("golden attention huang") { check_golden_attention("huang"); }
TEST_CASE("golden attention shaw") { check_golden_attention("shaw"); }
TEST_CASE("golden attention t5") { check_golden_attention("t5"); }
TEST_CASE("golden attention t5 causal") { check_golden_attention("t5_causal"); }
TEST_CASE("golden attention t5 cross") { check_golden_attention("t5_cross"); }
TEST_CASE("golden attention alibi") { check_golden_attention("alibi"); }
TEST_CASE("golden attention rope interleaved") { check_golden_attention("rope_interleaved"); }
TEST_CASE("golden attention rope half_split") { check_golden_attention("rope_half_split"); }
TEST_CASE("golden attention rope cross") { check_golden_attention("rope_cross"); }
TEST_CASE("golden attention transformer_xl") { check_golden_attention("transformer_xl"); }
