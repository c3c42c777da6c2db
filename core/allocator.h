// The CPU allocator behind every Storage: 64-byte aligned blocks, with a cache of large blocks.
//
// Why a cache: a training step allocates the same large activation and gradient buffers every
// step. Fresh large allocations are mmap'ed by glibc and page-fault on first touch (one fault per
// 4 KiB page), and even reused heap memory comes back at alternating addresses that are cold in the
// CPU caches. Handing the block freed last back to the next request of the same size removes both
// costs (docs/benchmarks.md measures them). Blocks under 4 KiB go straight to the C library.
#pragma once
#include <cstddef>

namespace relgrad {

struct CpuMemoryStats {
  size_t allocated_bytes = 0;       // held by tensors now (rounded block sizes)
  size_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes
  size_t cached_bytes = 0;          // freed blocks kept for reuse
};

namespace cpu_allocator {

// Blocks of at least this many bytes are cached; smaller ones are freed at once. Not 64 KiB, as it
// was: with the default run's shards padded to their own lengths many activations are 4-64 KiB and
// vary from step to step; freed to the C library, they left the heap's top free at each step's end,
// which it returned to the system, and the next step's first touches page-faulted (170,000 minor
// faults in the run against 14,000 with these cached, 1.2 s against 0.4 s of system time).
inline constexpr size_t kCacheMinBytes = size_t(1) << 12;

// A 64-byte aligned block of at least nbytes. When memory runs out (after returning the cache to the
// system and trying again) throws OutOfMemoryError naming the bytes requested, the bytes tensors
// hold now and at peak, and what to reduce.
void* allocate(size_t nbytes);
// Physical memory plus swap in bytes (SIZE_MAX where the system does not say): allocate refuses any
// single request above it, which overcommitting kernels would grant and then kill the process for.
size_t machine_memory_bytes();
// Returns a block from allocate(nbytes) (the same nbytes). Never throws.
void deallocate(void* ptr, size_t nbytes) noexcept;
CpuMemoryStats stats();
// Returns every cached block to the system.
void empty_cache();
// The most bytes the cache may hold (default 4 GiB); beyond it freed blocks go back to the system.
void set_cache_limit(size_t bytes);

}  // namespace cpu_allocator
}  // namespace relgrad
