// Small bounded caches for the structural tensors a layer or op derives from shapes and settings
// (relative index maps, masks, bucket maps, distance and rotary tables, fused-attention lookups):
// built once per key, on the device they are used on, instead of on the host and copied at every
// call. A key holds everything the content depends on (shapes, the scheme's settings, explicit
// positions by value, the device and dtype), so a changed setting or position is a miss, never stale
// data; the device in the key makes a module moved between devices miss too.
//
// LruCache keeps the `capacity` most recently used entries (a training run sees a few shapes: one per
// batch length, plus evaluation's). Entries are shared tensors: evicting one while a caller still holds
// it is safe. Thread-safe (one mutex); make() runs under it, so it must not use the same cache.
#pragma once
#include <cstdint>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace relgrad {

template <class Key, class Value>
class LruCache {
 public:
  explicit LruCache(size_t capacity = 8) : capacity_(capacity < 1 ? 1 : capacity) {}
  // Copies start empty: a module copied is a new module with its own cache.
  LruCache(const LruCache& other) : capacity_(other.capacity_) {}
  LruCache& operator=(const LruCache& other) {
    if (this != &other) {
      std::lock_guard<std::mutex> lock(mutex_);
      capacity_ = other.capacity_;
      entries_.clear();
    }
    return *this;
  }

  // The value for `key`; on a miss make() builds it and the least recently used entry beyond the
  // capacity is dropped.
  template <class Make>
  Value get(const Key& key, Make make) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!(it->first == key)) continue;
      ++hits_;
      if (it != entries_.begin()) entries_.splice(entries_.begin(), entries_, it);  // most recent first
      return entries_.front().second;
    }
    ++misses_;
    entries_.emplace_front(key, make());
    if (entries_.size() > capacity_) entries_.pop_back();
    return entries_.front().second;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }
  size_t capacity() const { return capacity_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::pair<Key, Value>> entries_;  // most recently used first
  uint64_t hits_ = 0, misses_ = 0;
};

// The key most caches use: every integer the content depends on, in a fixed order per cache
// (variable-length parts preceded by their length), and where the tensor lives.
struct CacheKey {
  std::vector<int64_t> values;
  DType dtype = kInt64;
  Device device;
  bool operator==(const CacheKey& o) const { return dtype == o.dtype && device == o.device && values == o.values; }
};

// An int64 host array as a tensor of `shape` on `device`, cached by content (process-wide, the 16
// most recent): the fused attention's per-distance lookups and positions, and relative index maps
// given on the host to an op on a GPU. On the CPU it is a fresh tensor (a copy costs no transfer).
Tensor cached_index_upload(const std::vector<int64_t>& values, const Shape& shape, Device device);

}  // namespace relgrad
