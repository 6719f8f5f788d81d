// Owning, uninitialised arrays backed by a small cache of large blocks.
//
// A sampled batch fills a few megabytes of fresh arrays.  Left to malloc, blocks that size
// are often mmap'ed and unmapped on every call, so each batch pays a page fault per 4 KiB
// (measured: ~1,400 faults and 4x the time of the sampling itself).  Blocks handed back
// here, also by numpy when an output array dies, are reused instead.  Outputs are written
// exactly once, so they are never zero-filled either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tbdfs {

namespace block_cache {
// Returns a 64-byte aligned block of at least `bytes` bytes.
void* allocate(size_t bytes);
// Returns a block from allocate() to the cache (or to the system when the cache is full).
void release(void* p) noexcept;
// Frees every parked block.
void trim() noexcept;
// Bytes currently parked in the cache (for tests and benchmarks).
size_t cached_bytes();
}  // namespace block_cache

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(int64_t n)
      : data_(n > 0 ? static_cast<T*>(block_cache::allocate(n * sizeof(T))) : nullptr),
        size_(n > 0 ? n : 0) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~Buffer() { reset(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }

  // Hands the block to a new owner, which must give it back with block_cache::release.
  T* release() {
    size_ = 0;
    return std::exchange(data_, nullptr);
  }

 private:
  void reset() {
    if (data_) block_cache::release(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace tbdfs
