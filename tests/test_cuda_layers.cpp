// Layers and whole models on the GPU against the CPU: every positional scheme's attention layer and
// the four model shapes (encoder, decoder with cross-attention, encoder–decoder, decoder-only),
// forward outputs, input gradients and parameter gradients, through check_cuda_parity
// (tests/cuda_testing.h: guard zones on, so a kernel writing past a tensor fails the case).
//
// Both runs use the same weights: each module is built once on the CPU, a second instance is built
// from the same seed, given the first one's state_dict (so the weights are equal even if a
// constructor drew differently) and moved with Module::to; the op picks the instance on its inputs'
// device. A layer that built a tensor on the CPU for a GPU input (a mask, an index map, a sinusoid
// table) would throw DeviceError on the mixed-device op and fail the case.
//
// Without a GPU every case but the first two is skipped (have_gpu()).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "train/trainer/sampler.h"

namespace relgrad::testing {
namespace {

// Compares the parameter gradients of the CPU module and its GPU twin, name by name.
void check_parameter_grads(const Module& cpu, const Module& gpu, double atol, double rtol) {
  auto a = cpu.named_parameters(), b = gpu.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("parameter ", a[i].first);
    REQUIRE(a[i].first == b[i].first);
    CHECK(b[i].second.device().is_cuda());
    CHECK(a[i].second.grad().defined() == b[i].second.grad().defined());
    if (!a[i].second.grad().defined() || !b[i].second.grad().defined()) continue;
    CHECK(b[i].second.grad().device().is_cuda());
    CHECK_CLOSE(b[i].second.grad().to(Device::cpu()), a[i].second.grad(), atol, rtol);
  }
}

// Builds a CPU module and its GPU twin with the same weights (see the file comment).
template <class M>
std::pair<std::shared_ptr<M>, std::shared_ptr<M>> twins(const std::function<std::shared_ptr<M>()>& build, DType dtype) {
  std::shared_ptr<M> cpu = build(), gpu = build();
  cpu->to(dtype);
  gpu->to(dtype);
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(Device::cuda());
  return {cpu, gpu};
}

// One parity case over a module pair: inputs on the CPU, `run` on the instance of their device.
template <class M>
void module_parity(const std::string& name, const std::shared_ptr<M>& cpu, const std::shared_ptr<M>& gpu,
                   const TensorList& inputs, const std::function<TensorList(M&, const TensorList&)>& run, double atol,
                   double rtol) {
  CudaParityCase c;
  c.name = name;
  c.inputs = inputs;
  c.atol = atol;
  c.rtol = rtol;
  c.op = [&](const TensorList& in) -> TensorList {
    M& m = in[0].device().is_cuda() ? *gpu : *cpu;
    return run(m, in);
  };
  cpu->zero_grad();
  gpu->zero_grad();
  REQUIRE(check_cuda_parity(c));
  // A tolerance < 0 means the default of the parameters' dtype, as check_cuda_parity reads it.
  if (atol < 0 || rtol < 0) {
    const Tolerance tol = cuda_tolerance_for(cpu->parameters().front().dtype());
    if (atol < 0) atol = tol.atol;
    if (rtol < 0) rtol = tol.rtol;
  }
  check_parameter_grads(*cpu, *gpu, atol, rtol);
}

struct SchemeCase {
  std::string scheme;
  bool causal, cross;
};

std::vector<SchemeCase> scheme_cases() {
  std::vector<SchemeCase> cases;
  for (const char* s : {"none", "seed", "shaw", "t5", "alibi", "rope"})
    for (bool causal : {false, true}) cases.push_back({s, causal, false});
  cases.push_back({"huang", true, false});
  cases.push_back({"transformer_xl", false, false});
  cases.push_back({"transformer_xl", true, false});
  for (const char* s : {"none", "seed", "shaw", "t5", "alibi", "rope"}) cases.push_back({s, false, true});
  return cases;
}

TransformerConfig small_config(const std::string& enc, const std::string& dec, const std::string& cross) {
  TransformerConfig c;
  c.vocab_size = 11;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 24;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 2;
  c.dropout = 0.0;
  c.encoder_self = PositionalConfig{enc};
  c.decoder_self = PositionalConfig{dec};
  c.cross = PositionalConfig{cross};
  c.cross.max_length = 8;
  c.encoder_self.max_length = 8;
  c.decoder_self.max_length = 8;
  return c;
}

// (B, T) ids in [1, V) from a fixed seed, and a padding mask hiding the last `pad` of row 1.
Tensor some_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<double> u = rand({B * T}, kFloat64, &g).to_vector<double>();
  std::vector<int64_t> ids;
  for (double x : u) ids.push_back(1 + static_cast<int64_t>(x * static_cast<double>(V - 1)));
  return from_vector<int64_t>(ids, {B, T});
}
Tensor padding(int64_t B, int64_t T, int64_t pad) {
  std::vector<bool> m(static_cast<size_t>(B * T), false);
  for (int64_t t = T - pad; t < T; ++t) m[static_cast<size_t>(T + t)] = true;  // row 1
  return from_vector<bool>(m, {B, T});
}

}  // namespace

TEST_CASE("cuda layers: device_of and Module::to keep handles and gradients (CPU)") {
  Generator init(3);
  Linear lin(4, 3, true, &init);
  CHECK(device_of(lin) == Device::cpu());
  Tensor w = lin.weight;
  sum(lin.forward(uniform({2, 4}, -1, 1, kFloat32, 2))).backward();
  REQUIRE(w.grad().defined());
  Tensor g = w.grad().clone();
  lin.to(Device::cpu());  // same device: nothing moves, the gradient stays
  CHECK(w.grad().defined());
  CHECK(bitwise_equal(w.grad(), g));
  ALiBi alibi(4, true);
  CHECK(device_of(alibi) == Device::cpu());  // a module with buffers only
}

TEST_CASE("cuda layers: without a GPU, moving a model there is a DeviceError, the model unchanged") {
  if (cuda_available()) return;  // the GPU cases below cover the other side
  Generator init(3);
  Linear lin(4, 3, true, &init);
  Tensor before = lin.weight.clone();
  CHECK_THROWS_AS(lin.to(Device::cuda()), DeviceError);
  CHECK(device_of(lin) == Device::cpu());
  CHECK(bitwise_equal(lin.weight.detach(), before));
}

TEST_CASE("cuda layers: Module::to moves parameters, buffers and gradients to the GPU and back") {
  if (!have_gpu()) return;
  auto alibi = std::make_shared<ALiBi>(3, true);
  Tensor slopes_before = alibi->slopes.clone();
  alibi->to(Device::cuda());
  CHECK(alibi->slopes.device().is_cuda());  // a buffer, through the member handle
  CHECK(device_of(*alibi).is_cuda());
  alibi->to(Device::cpu());
  CHECK(bitwise_equal(alibi->slopes, slopes_before));

  Generator init(3);
  Linear lin(4, 3, true, &init);
  Tensor w = lin.weight;  // a handle taken before the move stays valid
  sum(lin.forward(uniform({2, 4}, -1, 1, kFloat32, 2))).backward();
  Tensor g = w.grad().clone();
  lin.to(Device::cuda());
  CHECK(w.device().is_cuda());
  CHECK(lin.bias.device().is_cuda());
  REQUIRE(w.grad().defined());
  CHECK(w.grad().device().is_cuda());
  CHECK(bitwise_equal(w.grad().to(Device::cpu()), g));
}

TEST_CASE("cuda layers: every positional scheme's attention layer matches the CPU, forward and gradients") {
  if (!have_gpu()) return;
  const int64_t C = 16, H = 2, B = 2, t2 = 5, t1 = 7;
  for (const SchemeCase& sc : scheme_cases()) {
    const std::string name = sc.scheme + (sc.cross ? " cross" : sc.causal ? " causal self" : " self");
    INFO(name);
    const std::string place = sc.cross ? "cross" : sc.causal ? "decoder_self" : "encoder_self";
    PositionalConfig pc{sc.scheme};
    pc.max_length = 6;  // seed/huang: some distances fall outside the table
    pc.clip = 3;
    auto build = [&] {
      Generator init(17);
      auto scheme = make_positional(pc, place, C, H, sc.causal, "test", &init);
      return std::make_shared<MultiHeadAttention>(C, H, scheme, 0.0, true, &init);
    };
    auto [cpu, gpu] = twins<MultiHeadAttention>(build, kFloat32);
    // Made whole: gcc 12 at -O3 misreports a push_back onto a one-element list (-Warray-bounds).
    TensorList inputs = sc.cross ? TensorList{uniform({B, t2, C}, -1, 1, kFloat32, 21),
                                              uniform({B, t1, C}, -1, 1, kFloat32, 22), padding(B, t1, 2)}
                                 : TensorList{uniform({B, t2, C}, -1, 1, kFloat32, 21), padding(B, t2, 1)};
    module_parity<MultiHeadAttention>(
        name, cpu, gpu, inputs,
        [&](MultiHeadAttention& m, const TensorList& in) -> TensorList {
          AttentionOptions o;
          o.causal = sc.causal;
          o.need_weights = true;
          o.key_padding_mask = in.back();
          AttentionOutput a = m.forward(in[0], sc.cross ? in[1] : in[0], o);
          return {a.output, a.weights};
        },
        1e-4, 1e-3);
  }
}

TEST_CASE("cuda layers: the four model shapes match the CPU, forward and parameter gradients") {
  if (!have_gpu()) return;
  const int64_t B = 2, t1 = 6, t2 = 5;
  struct ModelCase {
    std::string enc, dec, cross;
  };
  // Every scheme appears in some place; float64 keeps the comparison tight over two layers.
  for (const ModelCase& mc : {ModelCase{"t5", "t5", "none"}, ModelCase{"seed", "huang", "seed"},
                              ModelCase{"shaw", "rope", "shaw"}, ModelCase{"transformer_xl", "alibi", "t5"},
                              ModelCase{"alibi", "transformer_xl", "rope"}}) {
    const TransformerConfig cfg = small_config(mc.enc, mc.dec, mc.cross);
    const std::string name = mc.enc + "/" + mc.dec + "/" + mc.cross;
    INFO(name);
    const Tensor src = some_ids(B, t1, cfg.vocab_size, 1), tgt = some_ids(B, t2, cfg.vocab_size, 2);
    const Tensor src_pad = padding(B, t1, 2), tgt_pad = padding(B, t2, 1);
    auto build_ed = [&] {
      Generator init(9);
      return std::make_shared<EncoderDecoder>(cfg, &init);
    };
    auto [ed_cpu, ed_gpu] = twins<EncoderDecoder>(build_ed, kFloat64);
    // The encoder alone (memory), the decoder with cross-attention on a given memory, and the whole.
    module_parity<EncoderDecoder>("encoder " + name, ed_cpu, ed_gpu, {src, src_pad},
                                  [](EncoderDecoder& m, const TensorList& in) -> TensorList {
                                    return {m.encode(in[0], in[1])};
                                  }, -1, -1);
    module_parity<EncoderDecoder>("decoder " + name, ed_cpu, ed_gpu,
                                  {uniform({B, t1, cfg.d_model}, -1, 1, kFloat64, 5), tgt, src_pad, tgt_pad},
                                  [](EncoderDecoder& m, const TensorList& in) -> TensorList {
                                    return {m.decode(in[1], in[0], in[2], in[3])};
                                  }, -1, -1);
    module_parity<EncoderDecoder>("encoder-decoder " + name, ed_cpu, ed_gpu, {src, tgt, src_pad, tgt_pad},
                                  [](EncoderDecoder& m, const TensorList& in) -> TensorList {
                                    return {m.forward(in[0], in[1], in[2], in[3])};
                                  }, -1, -1);
    auto build_lm = [&] {
      Generator init(10);
      return std::make_shared<DecoderLM>(cfg, &init);
    };
    auto [lm_cpu, lm_gpu] = twins<DecoderLM>(build_lm, kFloat64);
    module_parity<DecoderLM>("decoder-only " + name, lm_cpu, lm_gpu, {tgt, tgt_pad},
                             [](DecoderLM& m, const TensorList& in) -> TensorList { return {m.forward(in[0], in[1])}; },
                             -1, -1);
  }
}

TEST_CASE("cuda layers: greedy decoding with KV caches gives the CPU's tokens") {
  if (!have_gpu()) return;
  SamplingOptions greedy;
  greedy.temperature = 0.0;
  greedy.max_new_tokens = 6;
  greedy.eos = -1;
  for (const char* scheme : {"t5", "rope", "alibi", "huang", "transformer_xl", "shaw"}) {
    INFO(scheme);
    const TransformerConfig cfg = small_config("seed", scheme, "seed");
    auto build_lm = [&] {
      Generator init(4);
      return std::make_shared<DecoderLM>(cfg, &init);
    };
    auto [lm_cpu, lm_gpu] = twins<DecoderLM>(build_lm, kFloat64);
    const Tensor prompt = some_ids(2, 3, cfg.vocab_size, 8);
    Tensor on_gpu = generate(*lm_gpu, prompt, greedy);  // the prompt is moved to the model's device
    CHECK(on_gpu.device().is_cuda());
    CHECK(on_gpu.to_vector<int64_t>() == generate(*lm_cpu, prompt, greedy).to_vector<int64_t>());
    auto build_ed = [&] {
      Generator init(5);
      return std::make_shared<EncoderDecoder>(cfg, &init);
    };
    auto [ed_cpu, ed_gpu] = twins<EncoderDecoder>(build_ed, kFloat64);
    CHECK(generate(*ed_gpu, prompt, Tensor(), greedy).to_vector<int64_t>() ==
          generate(*ed_cpu, prompt, Tensor(), greedy).to_vector<int64_t>());
  }
}

}  // namespace relgrad::testing
