#include "buffer.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace tbdfs::block_cache {

namespace {

constexpr size_t kHeader = 64;            // keeps the payload 64-byte aligned
constexpr int kMinCachedClass = 16;       // blocks of 64 KiB and more are cached
constexpr int kClasses = 48;
constexpr size_t kMaxPerClass = 16;
// The cache exists for the few-megabyte arrays of training batches.  One huge batch must not
// pin its blocks for the life of the process: blocks above kMaxCachedClass go straight back
// to the system, and at most kMaxCachedBytes stay parked in all.
constexpr int kMaxCachedClass = 26;  // 64 MiB
constexpr size_t kMaxCachedBytes = size_t{256} << 20;

struct Header {
  int size_class;  // -1: not cached, freed directly
};

struct Cache {
  std::mutex mu;
  std::vector<void*> free_blocks[kClasses];
  size_t bytes = 0;
};

// Never destroyed: numpy may hand blocks back while the interpreter shuts down.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

int class_of(size_t bytes) {
  int c = 0;
  while ((size_t{1} << c) < bytes) ++c;
  return c;
}

}  // namespace

void* allocate(size_t bytes) {
  const int c = class_of(bytes);
  const bool cached = c >= kMinCachedClass && c <= kMaxCachedClass;
  if (cached) {
    Cache& k = cache();
    std::lock_guard<std::mutex> lock(k.mu);
    auto& list = k.free_blocks[c];
    if (!list.empty()) {
      void* base = list.back();
      list.pop_back();
      k.bytes -= size_t{1} << c;
      return static_cast<char*>(base) + kHeader;
    }
  }
  const size_t payload = cached ? (size_t{1} << c) : ((bytes + kHeader - 1) / kHeader) * kHeader;
  void* base = std::aligned_alloc(kHeader, payload + kHeader);
  if (!base) throw std::bad_alloc();
  static_cast<Header*>(base)->size_class = cached ? c : -1;
  return static_cast<char*>(base) + kHeader;
}

void release(void* p) noexcept {
  if (!p) return;
  void* base = static_cast<char*>(p) - kHeader;
  const int c = static_cast<Header*>(base)->size_class;
  if (c >= 0) {
    Cache& k = cache();
    std::lock_guard<std::mutex> lock(k.mu);
    const size_t bytes = size_t{1} << c;
    if (k.free_blocks[c].size() < kMaxPerClass && k.bytes + bytes <= kMaxCachedBytes) {
      try {
        k.free_blocks[c].push_back(base);
        k.bytes += bytes;
        return;
      } catch (...) {
        // Out of memory for the list itself: fall through and free the block.
      }
    }
  }
  std::free(base);
}

void trim() noexcept {
  std::vector<void*> drop;
  {
    Cache& k = cache();
    std::lock_guard<std::mutex> lock(k.mu);
    for (auto& list : k.free_blocks) {
      for (void* p : list) {
        try {
          drop.push_back(p);
        } catch (...) {
          std::free(p);  // out of memory for the list: free it under the lock instead
        }
      }
      list.clear();
    }
    k.bytes = 0;
  }
  for (void* p : drop) std::free(p);
}

size_t cached_bytes() {
  Cache& k = cache();
  std::lock_guard<std::mutex> lock(k.mu);
  return k.bytes;
}

}  // namespace tbdfs::block_cache
