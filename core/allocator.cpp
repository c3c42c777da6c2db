#include "core/allocator.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/base/error.h"

namespace relgrad::cpu_allocator {

namespace {

struct State {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // rounded size -> blocks, last freed last
  CpuMemoryStats stats;
  size_t cache_limit = size_t(4) << 30;
};

// Never destroyed: tensors that outlive main() may still free into it.
State& state() {
  static State* s = new State();
  return *s;
}

// Large sizes round up to whole pages so that near-equal requests share blocks; all sizes to a
// multiple of 64 (aligned_alloc requires a multiple of the alignment).
size_t rounded(size_t nbytes) {
  if (nbytes >= kCacheMinBytes) return (nbytes + 4095) / 4096 * 4096;
  return nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
}

void release_cache_locked(State& s) {
  for (auto& [size, blocks] : s.free_blocks)
    for (void* p : blocks) std::free(p);
  s.free_blocks.clear();
  s.stats.cached_bytes = 0;
}

}  // namespace

void* allocate(size_t nbytes) {
  State& s = state();
  const size_t size = rounded(nbytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  void* p = nullptr;
  auto it = size >= kCacheMinBytes ? s.free_blocks.find(size) : s.free_blocks.end();
  if (it != s.free_blocks.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    s.stats.cached_bytes -= size;
  } else {
    p = std::aligned_alloc(64, size);
    if (p == nullptr && s.stats.cached_bytes > 0) {  // give the cache back to the system and retry
      release_cache_locked(s);
      p = std::aligned_alloc(64, size);
    }
    RG_CHECK(p != nullptr, "alloc", "out of memory: could not allocate ", nbytes, " bytes on the CPU (",
             s.stats.allocated_bytes, " bytes held by tensors); reduce the batch size or sequence length");
  }
  s.stats.allocated_bytes += size;
  if (s.stats.allocated_bytes > s.stats.peak_allocated_bytes) s.stats.peak_allocated_bytes = s.stats.allocated_bytes;
  return p;
}

void deallocate(void* ptr, size_t nbytes) noexcept {
  if (ptr == nullptr) return;
  State& s = state();
  const size_t size = rounded(nbytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stats.allocated_bytes -= size;
  if (size >= kCacheMinBytes && s.stats.cached_bytes + size <= s.cache_limit) {
    try {
      s.free_blocks[size].push_back(ptr);
      s.stats.cached_bytes += size;
      return;
    } catch (...) {  // no memory for the bookkeeping: free the block instead
    }
  }
  std::free(ptr);
}

CpuMemoryStats stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stats;
}

void empty_cache() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  release_cache_locked(s);
}

void set_cache_limit(size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.cache_limit = bytes;
  if (s.stats.cached_bytes > bytes) release_cache_locked(s);
}

}  // namespace relgrad::cpu_allocator
