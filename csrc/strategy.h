// How a destination instance picks its neighbours: one chooser per sampling strategy.
//
// Before any strategy runs, the time rule (strict t_e < t, or t_e <= t) has narrowed the
// destination's neighbour list to its eligible window: a prefix of the time-sorted list,
// offsets [0, n).  A strategy only chooses offsets inside that window, in ascending order.
// The sampler looks at the strategy once per chunk of destinations, never per destination.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common.h"
#include "offset_set.h"
#include "rng.h"

namespace tbdfs {

enum class Strategy : int32_t {
  kRecent = 0,          // the k latest eligible edges (all when fewer)
  kUniform = 1,         // k distinct eligible edges, uniformly at random (all when fewer)
  kUniformReplace = 2,  // k eligible edges uniformly at random, with replacement
};

// Throws InputError unless s is one of the enumerators: a value cast from an integer (as
// Python's Strategy(7) makes) would otherwise pick no chooser.
inline void check_strategy(Strategy s) {
  switch (s) {
    case Strategy::kRecent:
    case Strategy::kUniform:
    case Strategy::kUniformReplace:
      return;
  }
  fail("strategy ", static_cast<int32_t>(s),
       " is not a Strategy (RECENT, UNIFORM or UNIFORM_REPLACE)");
}

// Only sampling with replacement can pick more neighbours than a list holds.
inline bool draws_with_replacement(Strategy s) { return s == Strategy::kUniformReplace; }

// Above this many picks Floyd's membership test uses a hash set instead of a scan.
constexpr int64_t kFloydScanMax = 64;

// Every offset of the window [first, n), in order: what is left once a strategy has
// narrowed the window to no more than k entries.
inline int64_t take_window(int64_t first, int64_t n, int64_t* out) {
  for (int64_t i = first; i < n; ++i) out[i - first] = i;
  return n - first;
}

// Each chooser writes its offsets into the window [0, n) to out[0..return value), sorted.

// The most recent k: the window narrowed to its last k entries, all of them taken.
inline int64_t choose_recent(int64_t n, int64_t k, int64_t* out) {
  return take_window(std::max<int64_t>(0, n - k), n, out);
}

// k distinct offsets, every k-subset equally likely; the whole window when n <= k.
inline int64_t choose_uniform(int64_t n, int64_t k, InstanceRng&& rng, int64_t* out) {
  if (n <= k) return take_window(0, n, out);
  // Floyd's algorithm.  The membership test is a scan of the picks so far for small k
  // (fastest there) and a hash set above: both answer the same question, so the draws for
  // a (seed, stream) do not depend on k's side of the threshold, and the work is O(k)
  // expected instead of O(k^2).
  if (k <= kFloydScanMax) {
    int64_t c = 0;
    for (int64_t j = n - k; j < n; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(j + 1));
      bool seen = false;
      for (int64_t i = 0; i < c; ++i) seen |= (out[i] == t);
      out[c++] = seen ? j : t;
    }
  } else {
    OffsetSet& set = scratch_set();
    set.reset(k);
    int64_t c = 0;
    for (int64_t j = n - k; j < n; ++j) {
      const int64_t t = static_cast<int64_t>(rng.below(j + 1));
      // j itself is never in the set yet (offsets so far are < j), so it is always new.
      const int64_t v = set.insert(t) ? t : j;
      if (v == j) set.insert(j);
      out[c++] = v;
    }
  }
  std::sort(out, out + k);
  return k;
}

// k independent uniform offsets (none when the window is empty).
inline int64_t choose_uniform_replace(int64_t n, int64_t k, InstanceRng&& rng, int64_t* out) {
  if (n == 0) return 0;
  for (int64_t i = 0; i < k; ++i) out[i] = static_cast<int64_t>(rng.below(n));
  std::sort(out, out + k);
  return k;
}

}  // namespace tbdfs
