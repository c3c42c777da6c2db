// Host <-> device copies (cuda/runtime.h's counter): a training step after the first copies only its
// batch to the GPU — the masks, index maps, bucket maps, distance and rotary tables, fused-attention
// lookups and scatter-add lists are cached on the device or built there (docs/cuda.md, "Indexing").
// Also the pieces: the counter itself, the CSR lists sorted on the device against the host's
// counting sort, and a cached device index map validated once. GPU only (they skip without one),
// except the counter's answer in a build or machine without a GPU.
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/index.h"
#include "cuda/runtime.h"
#include "file_testing.h"
#include "testing.h"
#include "trainer_testing.h"
#include "train/trainer/trainer.h"

namespace relgrad::testing {
namespace {

// The bytes of every tensor Batch::to copies to the device, in its order.
std::vector<size_t> batch_copies(const Batch& b) {
  std::vector<size_t> out;
  for (const Tensor* t : {&b.src, &b.tgt_in, &b.tgt_out, &b.src_padding_mask, &b.tgt_padding_mask, &b.tgt_positions,
                          &b.tokens, &b.targets, &b.padding_mask})
    if (t->defined() && t->numel() > 0) out.push_back(size_t(t->numel()) * dtype_size(t->dtype()));
  return out;
}

struct StepCase {
  std::string name;
  bool decoder_only = false, fused = false;
  std::string scheme;
};

RunConfig step_config(const StepCase& c, const std::string& out_dir) {
  RunConfig r = tiny_ed(out_dir);
  r.model_type = c.decoder_only ? ModelKind::DecoderOnly : ModelKind::EncoderDecoder;
  r.data.task = TaskKind::Copy;
  r.data.min_len = r.data.max_len = 6;  // every batch the same shapes: the second step is all cache hits
  r.model.dropout = c.fused ? 0.0 : 0.1;  // attention dropout while training would bypass the fused core
  r.model.attention_core = c.fused ? AttentionCore::Fused : AttentionCore::Composite;
  r.train.device = "cuda";
  PositionalConfig p;
  p.scheme = c.scheme;
  p.max_length = 4;  // shorter than the sequences: the Zero policy's no-entry pairs are exercised too
  p.clip = 2;
  p.shaw_values = !c.fused;  // Shaw's value term is composite only
  p.num_buckets = 8;
  p.max_distance = 16;
  r.model.decoder_self = p;
  PositionalConfig enc = p;
  if (c.scheme == "huang") enc.scheme = "seed";  // Huang's table is causal only
  r.model.encoder_self = enc;
  r.model.cross = PositionalConfig{"seed"};
  r.model.cross.max_length = 8;
  return r;
}

}  // namespace

TEST_CASE("cuda transfers: the counter counts each direction's calls and bytes") {
  if (!cuda_available()) {  // nothing can cross: the counter stays at zero
    cuda::reset_transfer_stats();
    const cuda::TransferStats s = cuda::transfer_stats();
    CHECK(s.to_device_calls + s.to_host_calls + s.to_device_bytes + s.to_host_bytes == 0);
  }
  if (!have_gpu()) return;
  const Tensor host = arange(10.0, kFloat32);
  cuda::reset_transfer_stats();
  const Tensor dev = host.to(Device::cuda());
  cuda::TransferStats s = cuda::transfer_stats();
  CHECK(s.to_device_calls == 1);
  CHECK(s.to_device_bytes == 40);
  CHECK(s.to_host_calls == 0);
  const Tensor back = (dev * 2.0 + 1.0).to(Device::cpu());  // scalar operands are filled on the device
  s = cuda::transfer_stats();
  CHECK(s.to_device_calls == 1);
  CHECK(s.to_host_calls == 1);
  CHECK(s.to_host_bytes == 40);
  CHECK(back.to_vector<float>()[3] == 7.0f);
  const Tensor z = zeros({1000}, TensorOptions(kFloat64).device(Device::cuda()));  // no copy either
  CHECK(cuda::transfer_stats().to_device_calls == 1);
  CHECK(sum(z).item() == 0.0);
  // The trace names the caller.
  cuda::reset_transfer_stats();
  cuda::set_transfer_trace(true);
  host.to(Device::cuda());
  cuda::set_transfer_trace(false);
  const std::vector<cuda::TransferRecord> trace = cuda::transfer_trace();
  REQUIRE(trace.size() == 1);
  CHECK(trace[0].to_device);
  CHECK(trace[0].bytes == 40);
  INFO(trace[0].where);
  CHECK(trace[0].where.find("relgrad::") != std::string::npos);
  cuda::reset_transfer_stats();
  CHECK(cuda::transfer_trace().empty());
}

TEST_CASE("cuda transfers: CSR lists sorted on the device are the host counting sort's") {
  if (!have_gpu()) return;
  for (int64_t count : {0, 1, 7, 1000, 70000}) {
    for (int64_t buckets : {1, 5, 300, 100000}) {
      INFO("count ", count, ", buckets ", buckets);
      std::vector<int64_t> keys(static_cast<size_t>(count));
      uint64_t state = 12345 + uint64_t(count) * 31 + uint64_t(buckets);
      for (int64_t& k : keys) {  // a few keys outside [0, buckets): dropped by both
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        k = int64_t((state >> 33) % uint64_t(buckets + 2)) - 1;
      }
      const cuda::Csr host = cuda::csr_by_key(keys.data(), count, buckets);
      const Tensor dkeys = from_vector<int64_t>(keys, {count}).to(Device::cuda());
      Tensor offsets = empty({buckets + 1}, TensorOptions(kInt64).device(Device::cuda()));
      Tensor entries = empty({count}, TensorOptions(kInt64).device(Device::cuda()));
      cuda::csr_by_key_on_device(static_cast<const int64_t*>(dkeys.raw_data()), count, buckets,
                                 static_cast<int64_t*>(offsets.raw_data()), static_cast<int64_t*>(entries.raw_data()), 0);
      CHECK(offsets.to(Device::cpu()).to_vector<int64_t>() == host.offsets);
      std::vector<int64_t> got = entries.to(Device::cpu()).to_vector<int64_t>();
      got.resize(host.entries.size());  // past the kept keys: the dropped ones
      CHECK(got == host.entries);
    }
  }
}

TEST_CASE("cuda transfers: a device index map is validated once, again after it changes") {
  if (!have_gpu()) return;
  const Device gpu = Device::cuda();
  RelativeIndexOptions o;
  o.max_past = 2, o.max_future = 2;
  o.out_of_range = OutOfRange::Clip;
  const Tensor C = relative_index(4, 5, o).to(gpu);
  const Tensor P = uniform({2, 4, 5}, -1, 1, kFloat32, 1).to(gpu).requires_grad_(true);
  cuda::reset_transfer_stats();
  const Tensor s1 = relative_gather(P, C, 5);
  CHECK(cuda::transfer_stats().to_host_calls == 1);  // the first check reads the map
  cuda::reset_transfer_stats();
  const Tensor s2 = relative_gather(P, C, 5);
  sum(s2).backward();  // the backward's relative_scatter reads the same map: no copy either
  CHECK(cuda::transfer_stats().to_host_calls == 0);
  CHECK(cuda::transfer_stats().to_device_calls == 0);
  CHECK(bitwise_equal(s1.to(Device::cpu()), s2.to(Device::cpu())));
  // Changed in place (a version bump): checked again, and a bad entry gives the usual error.
  Tensor changing = C.clone();
  relative_gather(P, changing, 5);
  changing.copy_(full({4, 5}, 7.0, TensorOptions(kInt64).device(gpu)));
  check_throws_with([&] { relative_gather(P, changing, 5); }, "index entry 7 at (0, 0) is outside a table of 5 rows");
  // A CPU map given to a GPU op: checked on the host, uploaded once.
  const Tensor host_map = relative_index(4, 5, o);
  relative_gather(P, host_map, 5);
  cuda::reset_transfer_stats();
  relative_gather(P, relative_index(4, 5, o), 5);  // another tensor, the same values
  CHECK(cuda::transfer_stats().to_device_calls == 0);
}

TEST_CASE("cuda transfers: a training step after the first copies only its batch to the GPU") {
  if (!have_gpu()) return;
  std::vector<StepCase> cases;
  for (bool decoder_only : {true, false})
    for (bool fused : {false, true})
      for (const char* scheme : {"none", "seed", "huang", "shaw", "t5", "alibi", "rope", "transformer_xl"}) {
        if (!decoder_only && std::string(scheme) == "huang") continue;  // covered by the decoder's self-attention
        cases.push_back({std::string(decoder_only ? "decoder-only" : "encoder-decoder") + ", " +
                             (fused ? "fused" : "composite") + ", " + scheme,
                         decoder_only, fused, scheme});
      }
  for (const StepCase& c : cases) {
    INFO(c.name);
    TempDir dir;
    Trainer trainer(trainer_options(step_config(c, dir.file("run"))));
    trainer.train_step();  // warm-up: caches filled, optimizer state made
    const std::vector<size_t> expected = batch_copies(trainer.data().batch(1, Split::Train));
    cuda::reset_transfer_stats();
    cuda::set_transfer_trace(true);
    trainer.train_step();
    cuda::set_transfer_trace(false);
    const std::vector<cuda::TransferRecord> trace = cuda::transfer_trace();
    // The copies to the device, less one per batch tensor of its size: what is left is extra.
    std::multiset<size_t> batch(expected.begin(), expected.end());
    std::ostringstream extra;
    size_t n_extra = 0, to_host = 0;
    for (const cuda::TransferRecord& r : trace) {
      if (!r.to_device) {
        ++to_host;
        continue;
      }
      auto it = batch.find(r.bytes);
      if (it != batch.end()) {
        batch.erase(it);
        continue;
      }
      ++n_extra;
      extra << "\n  " << r.bytes << " bytes from " << r.where;
    }
    INFO("copies to the device beyond the batch's ", expected.size(), ":", extra.str());
    INFO("copies to the host: ", to_host);
    CHECK(n_extra == 0);
    CHECK(batch.empty());  // every batch tensor went up once
    CHECK(cuda::transfer_stats().to_device_calls == expected.size());
  }
}

}  // namespace relgrad::testing
