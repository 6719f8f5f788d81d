// A small per-thread hash set of offsets, for drawing distinct picks without allocating.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rng.h"

namespace tbdfs {

// Open-addressing set of non-negative offsets, one per thread, reused across destinations:
// its table grows only when a larger k arrives, so the sampling loop does not allocate.
class OffsetSet {
 public:
  // Empties the set and sizes it for up to n insertions (load factor <= 1/2).
  void reset(int64_t n) {
    size_t cap = 16;
    while (cap < static_cast<size_t>(2 * n)) cap <<= 1;
    if (table_.size() < cap) table_.resize(cap);
    mask_ = cap - 1;
    std::fill(table_.begin(), table_.begin() + cap, int64_t{-1});
  }
  // Inserts v; returns false when it was already there.
  bool insert(int64_t v) {
    size_t i = static_cast<size_t>(mix64(static_cast<uint64_t>(v))) & mask_;
    while (table_[i] != -1) {
      if (table_[i] == v) return false;
      i = (i + 1) & mask_;
    }
    table_[i] = v;
    return true;
  }

 private:
  std::vector<int64_t> table_;
  size_t mask_ = 0;
};

inline OffsetSet& scratch_set() {
  thread_local OffsetSet set;
  return set;
}

}  // namespace tbdfs
