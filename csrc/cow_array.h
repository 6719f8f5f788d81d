// An array that owns its elements or views read-only memory kept alive by an owner (a file
// mapping shared by several processes): what lets a saved graph be sampled straight from
// the page cache instead of being copied into each process.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tbdfs {

// Reads go through a cached pointer (no branch in the samplers' loops).  Writes need owned
// storage: an array that views memory refuses them (std::logic_error: a bug, not bad
// input) until own() has copied the view.  Copying a view shares it, which is safe since
// nothing writes through a view.
template <class T>
class CowArray {
 public:
  CowArray() = default;
  CowArray(std::vector<T> v) : vec_(std::move(v)) { sync(); }  // NOLINT: implicit on purpose
  CowArray(const CowArray& o) { *this = o; }
  CowArray(CowArray&& o) noexcept { *this = std::move(o); }
  CowArray& operator=(const CowArray& o) {
    if (this == &o) return *this;
    vec_ = o.vec_;
    owner_ = o.owner_;
    if (owner_) {
      data_ = o.data_;
      size_ = o.size_;
    } else {
      sync();
    }
    return *this;
  }
  CowArray& operator=(CowArray&& o) noexcept {
    vec_ = std::move(o.vec_);
    owner_ = std::move(o.owner_);
    data_ = o.data_;
    size_ = o.size_;
    if (!owner_) sync();
    o.vec_.clear();
    o.owner_.reset();
    o.sync();
    return *this;
  }

  // A view of n elements at data, alive as long as owner is.
  static CowArray view(const T* data, size_t n, std::shared_ptr<const void> owner) {
    CowArray a;
    a.data_ = data;
    a.size_ = n;
    a.owner_ = std::move(owner);
    return a;
  }

  bool is_view() const { return owner_ != nullptr; }
  // Copies a view into owned storage (no-op when owned).
  void own() {
    if (!owner_) return;
    vec_.assign(data_, data_ + size_);
    owner_.reset();
    sync();
  }

  // ---- reads
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return owner_ ? size_ : vec_.capacity(); }
  const T* data() const { return data_; }
  const T& operator[](size_t i) const { return data_[i]; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

  // ---- writes (owned storage only)
  T* data() { return writable().data(); }
  T& operator[](size_t i) { return writable()[i]; }
  void reserve(size_t n) { writable().reserve(n); sync(); }
  void resize(size_t n) { writable().resize(n); sync(); }
  void resize(size_t n, const T& value) { writable().resize(n, value); sync(); }
  void push_back(const T& value) { writable().push_back(value); sync(); }
  template <class It>
  void assign(It first, It last) {
    owner_.reset();
    vec_.assign(first, last);
    sync();
  }

 private:
  std::vector<T>& writable() {
    if (owner_) throw std::logic_error("write to a read-only mapped array (call own() first)");
    return vec_;
  }
  void sync() {
    data_ = vec_.data();
    size_ = vec_.size();
  }

  std::vector<T> vec_;
  const T* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;  // set while viewing someone else's memory
};

}  // namespace tbdfs
