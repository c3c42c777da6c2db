// The caching allocator. cudaMalloc and cudaFree are slow (cudaFree synchronises the device), and a
// training step frees and re-allocates the same sizes every iteration, so freed blocks are kept per
// device in a free list keyed by size and handed out again:
//   - every request is rounded up to a multiple of 512 bytes (so near sizes share blocks);
//   - the smallest cached block >= the request is reused if it is less than twice the request
//     (a bigger one would waste more than half of itself), else a new block is cudaMalloc'ed;
//   - on out-of-memory, the cache is returned to the driver and cudaMalloc is tried once more; if
//     that fails too, OutOfMemoryError (a DeviceError) names the bytes requested, held and free.
// Blocks are never split or merged. All kernels run on the default stream, so a block freed here
// can be reused at once: the next kernel that writes it is ordered after the last that read it.
//
// Guard zones (a test aid, set_guard_checking(true)): each new allocation then gets kGuardBytes of
// a known pattern before and after the bytes asked for, and bypasses the cache. check_guards()
// reads every zone back and names the allocation whose zone a kernel overwrote; a block freed with a
// damaged zone is reported at the next check_guards().
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/runtime.h"

namespace relgrad::cuda {

namespace {

constexpr size_t kRounding = 512;
constexpr size_t kGuardBytes = 512;
constexpr unsigned char kGuardPattern = 0xA5;

struct GuardedBlock {
  void* base;        // what cudaMalloc returned; the tensor gets base + kGuardBytes
  size_t requested;  // bytes asked for; the trailing zone starts right after them
  size_t total;      // leading zone + data + trailing zone
  int device;
};

struct Block {
  void* ptr;
  size_t size;  // bytes, a multiple of kRounding
};

struct DeviceCache {
  std::multimap<size_t, void*> free_blocks;  // size -> block, not handed out
  std::unordered_map<void*, size_t> live;    // block -> size, handed out to tensors
  MemoryStats stats;
};

class Allocator {
 public:
  void* malloc(size_t nbytes, int device) {
    check_device(device, "cuda");
    if (nbytes == 0) return nullptr;  // empty tensors own no memory
    size_t size = (nbytes + kRounding - 1) / kRounding * kRounding;
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceCache& c = cache(device);
    if (guards_) return malloc_guarded(c, nbytes, size, device);
    Block b = take_cached(c, size);
    if (b.ptr == nullptr) b = {malloc_from_driver(c, size, nbytes, device), size};
    c.live.emplace(b.ptr, b.size);
    c.stats.allocated_bytes += b.size;
    if (c.stats.allocated_bytes > c.stats.peak_allocated_bytes) c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
    return b.ptr;
  }

  void free(void* ptr, int device) {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (device < 0 || device >= static_cast<int>(caches_.size())) return;
    DeviceCache& c = caches_[device];
    auto g = guarded_.find(ptr);
    if (g != guarded_.end()) {  // checked, then returned to the driver (never cached)
      try {
        std::string damage = damaged_zone(g->first, g->second, device);
        if (!damage.empty()) violations_.push_back(damage);
      } catch (const Error& e) {
        violations_.push_back(e.what());
      }
      c.stats.allocated_bytes -= g->second.total;
      c.live.erase(ptr);
      try {  // free runs from destructors: a failure is recorded for check_guards, never thrown
        DeviceGuard guard(device, "cuda_free");
        if (cudaFree(g->second.base) != cudaSuccess) cudaGetLastError();
      } catch (const Error& e) {
        violations_.push_back(e.what());
      }
      guarded_.erase(g);
      return;
    }
    auto it = c.live.find(ptr);
    if (it == c.live.end()) return;  // not ours: ignore rather than throw from a destructor
    size_t size = it->second;
    c.live.erase(it);
    c.free_blocks.emplace(size, ptr);
    c.stats.allocated_bytes -= size;
    c.stats.cached_bytes += size;
  }

  MemoryStats stats(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device < 0 || device >= static_cast<int>(caches_.size())) return {};
    return caches_[device].stats;
  }

  void set_guards(bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    guards_ = on;
  }

  void check_guards(const char* op) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> found;
    found.swap(violations_);
    for (const auto& [ptr, block] : guarded_) {
      std::string damage = damaged_zone(ptr, block, block.device);
      if (!damage.empty()) found.push_back(damage);
    }
    if (found.empty()) return;
    std::string all;
    for (const std::string& f : found) all += "\n  " + f;
    throw Error(detail::concat("[", op, "] a kernel wrote outside its tensor:", all));
  }

  void empty_cache(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device < 0 || device >= static_cast<int>(caches_.size())) return;
    release_cached(caches_[device], device);
  }

 private:
  DeviceCache& cache(int device) {
    if (caches_.empty()) caches_.resize(device_count());
    return caches_[device];
  }

  void* malloc_guarded(DeviceCache& c, size_t nbytes, size_t size, int device) {
    size_t total = kGuardBytes + size + kGuardBytes;
    void* base = malloc_from_driver(c, total, nbytes, device);
    DeviceGuard guard(device, "cuda_malloc");
    RG_CUDA_CHECK(cudaMemset(base, kGuardPattern, total), "cuda_malloc");
    void* ptr = static_cast<unsigned char*>(base) + kGuardBytes;
    guarded_[ptr] = GuardedBlock{base, nbytes, total, device};
    c.live.emplace(ptr, total);
    c.stats.allocated_bytes += total;
    if (c.stats.allocated_bytes > c.stats.peak_allocated_bytes) c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
    return ptr;
  }

  // "" when both guard zones of the block still hold the pattern; else which bytes changed.
  static std::string damaged_zone(void* ptr, const GuardedBlock& b, int device) {
    DeviceGuard guard(device, "check_guards");
    std::vector<unsigned char> lead(kGuardBytes), tail(b.total - kGuardBytes - b.requested);
    RG_CUDA_CHECK(cudaMemcpy(lead.data(), b.base, lead.size(), cudaMemcpyDeviceToHost), "check_guards");
    RG_CUDA_CHECK(cudaMemcpy(tail.data(), static_cast<unsigned char*>(ptr) + b.requested, tail.size(),
                             cudaMemcpyDeviceToHost),
                  "check_guards");
    for (size_t i = 0; i < lead.size(); ++i)
      if (lead[i] != kGuardPattern)
        return detail::concat("allocation of ", b.requested, " bytes: byte ", static_cast<int64_t>(i) - static_cast<int64_t>(kGuardBytes),
                              " (before its start) was overwritten");
    for (size_t i = 0; i < tail.size(); ++i)
      if (tail[i] != kGuardPattern)
        return detail::concat("allocation of ", b.requested, " bytes: byte ", b.requested + i, " (past its end) was overwritten");
    return "";
  }

  // The smallest cached block that fits, if it is less than twice the request; else {nullptr, 0}.
  // A reused block keeps its own size (up to 2x the request), which is what the stats count.
  static Block take_cached(DeviceCache& c, size_t size) {
    auto it = c.free_blocks.lower_bound(size);
    if (it == c.free_blocks.end() || it->first >= 2 * size) return {nullptr, 0};
    Block b{it->second, it->first};
    c.free_blocks.erase(it);
    c.stats.cached_bytes -= b.size;
    return b;
  }

  void* malloc_from_driver(DeviceCache& c, size_t size, size_t requested, int device) {
    DeviceGuard guard(device, "cuda_malloc");
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // out-of-memory is not sticky: clear it, free the cache, try once more
      size_t cached_before = c.stats.cached_bytes;
      release_cached(c, device);
      err = cudaMalloc(&ptr, size);
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();  // best effort
        throw OutOfMemoryError(detail::concat(
            "[cuda_malloc] out of memory: tried to allocate ", requested, " bytes on cuda:", device,
            " (tensors hold ", c.stats.allocated_bytes, " bytes, ", cached_before, " were cached and are freed; the GPU has ",
            free_bytes, " of ", total_bytes, " bytes free); reduce the batch size, the sequence length or the model size"));
      }
    }
    RG_CUDA_CHECK(err, "cuda_malloc");
    return ptr;
  }

  // Returns every cached block of one device to the driver (cudaFree waits for the device). The
  // cache is emptied even if a cudaFree fails; the first failure is then reported.
  static void release_cached(DeviceCache& c, int device) {
    if (c.free_blocks.empty()) return;
    DeviceGuard guard(device, "empty_cache");
    cudaError_t first_error = cudaSuccess;
    for (const auto& block : c.free_blocks) {
      cudaError_t err = cudaFree(block.second);
      if (first_error == cudaSuccess) first_error = err;
    }
    c.free_blocks.clear();
    c.stats.cached_bytes = 0;
    RG_CUDA_CHECK(first_error, "empty_cache");
  }

  std::mutex mutex_;
  std::vector<DeviceCache> caches_;  // one per device, created on the first allocation
  bool guards_ = false;
  std::unordered_map<void*, GuardedBlock> guarded_;  // live guarded blocks, by the pointer handed out
  std::vector<std::string> violations_;              // damage found when a guarded block was freed
};

// Never destroyed: tensors in static storage may be freed after main returns.
Allocator& allocator() {
  static auto* a = new Allocator();
  return *a;
}

}  // namespace

void* device_malloc(size_t nbytes, int device) { return allocator().malloc(nbytes, device); }
void device_free(void* ptr, int device) { allocator().free(ptr, device); }
MemoryStats memory_stats(int device) { return allocator().stats(device); }
void empty_cache(int device) { allocator().empty_cache(device); }

size_t total_memory_bytes(int device) {
  static std::mutex mutex;
  static std::vector<size_t> known;  // by device, 0 = not read yet
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0) return 0;
  if (known.size() <= static_cast<size_t>(device)) known.resize(static_cast<size_t>(device) + 1, 0);
  if (!known[static_cast<size_t>(device)]) {
    cudaDeviceProp prop{};
    RG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "total_memory_bytes");
    known[static_cast<size_t>(device)] = prop.totalGlobalMem;
  }
  return known[static_cast<size_t>(device)];
}
void set_guard_checking(bool on) { allocator().set_guards(on); }
void check_guards(const char* op) { allocator().check_guards(op); }

}  // namespace relgrad::cuda
