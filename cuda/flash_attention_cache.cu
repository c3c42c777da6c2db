// The device copies of the fused attention's small index plans (cuda/flash_attention_common.cuh,
// cached_upload): per query tile bounds and the fold's row lists. A training step asks for the same
// plans every step, so they are kept by content and the steps after the first copy nothing here.
#include <cstring>
#include <list>
#include <mutex>

#include "cuda/flash_attention_common.cuh"

namespace relgrad::cuda::flash {

namespace {

struct Entry {
  int device;
  std::vector<int64_t> host;
  void* dev;
};

// Least recently used last; at most kCacheEntries (a model has a handful of attention geometries).
constexpr size_t kCacheEntries = 32;
std::mutex cache_mutex;
std::list<Entry>& cache() {
  static std::list<Entry>* entries = new std::list<Entry>();  // never destroyed: no cudaFree at exit
  return *entries;
}

}  // namespace

const int64_t* cached_upload(const std::vector<int64_t>& host, int device) {
  if (host.empty()) return nullptr;
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto& entries = cache();
  for (auto it = entries.begin(); it != entries.end(); ++it)
    if (it->device == device && it->host == host) {
      entries.splice(entries.begin(), entries, it);  // most recently used first
      return static_cast<const int64_t*>(entries.front().dev);
    }
  if (entries.size() >= kCacheEntries) {
    // The evicted copy may still be read by a kernel queued on the stream: wait for it first.
    DeviceGuard guard(entries.back().device, kOp);
    RG_CUDA_CHECK(cudaDeviceSynchronize(), kOp);
    RG_CUDA_CHECK(cudaFree(entries.back().dev), kOp);
    entries.pop_back();
  }
  // Not from the caching allocator: these live beside the tensors, and the allocator's statistics
  // (which the tests read) count tensors only.
  void* dev = nullptr;
  const size_t bytes = host.size() * sizeof(int64_t);
  RG_CUDA_CHECK(cudaMalloc(&dev, bytes), kOp);
  memcpy_host_to_device(dev, host.data(), bytes, device);
  entries.push_front(Entry{device, host, dev});
  return static_cast<const int64_t*>(dev);
}

}  // namespace relgrad::cuda::flash
