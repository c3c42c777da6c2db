#include "core/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/error.h"

#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

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

// "1073741824 bytes (1.00 GiB)": exact for the record, readable for the user.
std::string bytes_text(size_t n) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 6) v /= 1024.0, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu bytes", n);
  else std::snprintf(buf, sizeof buf, "%zu bytes (%.2f %s)", n, v, units[u]);
  return buf;
}

// Thrown with the lock held: reads the stats directly. No allocation can be made for the message
// only in the rare case that even a few hundred bytes are gone; std::bad_alloc then escapes,
// which callers (the relgrad command) report as out of memory too.
[[noreturn]] void throw_out_of_memory(const State& s, size_t nbytes) {
  throw OutOfMemoryError(detail::concat(
      "[alloc] out of memory: could not allocate ", bytes_text(nbytes), " on the CPU; tensors hold ",
      bytes_text(s.stats.allocated_bytes), " now and held ", bytes_text(s.stats.peak_allocated_bytes),
      " at peak; reduce the batch size, the sequence length or the model size"));
}

// Cached sizes round up to one of eight sizes per doubling, so that near-equal requests share blocks
// at most 1/8 larger than they ask: a step whose shapes vary a little from step to step (the shard
// widths of train.shard_by_length) reuses its blocks. All sizes to a multiple of 64 (aligned_alloc
// requires a multiple of the alignment; kCacheMinBytes / 8 is one).
size_t rounded(size_t nbytes) {
  if (nbytes >= kCacheMinBytes) {
    size_t octave = kCacheMinBytes;  // the largest power of two not above nbytes
    while (octave <= nbytes / 2) octave *= 2;
    const size_t step = octave / 8;
    return (nbytes + step - 1) / step * step;
  }
  return nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64;
}

void release_cache_locked(State& s) {
  for (auto& [size, blocks] : s.free_blocks)
    for (void* p : blocks) std::free(p);
  s.free_blocks.clear();
  s.stats.cached_bytes = 0;
}

}  // namespace

// No single request beyond RAM plus swap can ever be held. Under the kernel's overcommit setting 1
// aligned_alloc would still say yes, and writing the pages would bring the OOM killer (SIGKILL, no
// message) instead of this error.
size_t machine_memory_bytes() {
  static const size_t total = [] {
#if defined(__linux__)
    struct sysinfo info {};
    if (sysinfo(&info) == 0 && info.totalram > 0)
      return static_cast<size_t>(info.totalram + info.totalswap) * info.mem_unit;
#endif
    return std::numeric_limits<size_t>::max();
  }();
  return total;
}

void* allocate(size_t nbytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Beyond half the address space rounding would wrap; beyond the machine's memory it cannot be held.
  if (nbytes > std::numeric_limits<size_t>::max() / 2 || nbytes > machine_memory_bytes())
    throw_out_of_memory(s, nbytes);
  const size_t size = rounded(nbytes);
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
    if (p == nullptr) throw_out_of_memory(s, nbytes);
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
