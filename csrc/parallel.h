// A blocking parallel-for over contiguous ranges, built on std::thread.
//
// We avoid OpenMP on purpose: torch ships its own OpenMP runtime, and OpenMP's spin-waiting
// made a competitor's 2-thread sampler 30x slower while another process held a core.
// Threads here are joined, never spun, so two threads cannot be slower than one for long.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace tbdfs {

// Calls fn(begin, end) on num_threads contiguous chunks of [0, n).  Chunks are fixed by
// (n, num_threads) alone; callers keep results independent of the split by writing to
// disjoint, index-addressed outputs.
template <class Fn>
void parallel_for(int64_t n, int num_threads, int64_t min_chunk, Fn&& fn) {
  if (n <= 0) return;
  int64_t useful = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  int threads = static_cast<int>(std::min<int64_t>(std::max(1, num_threads), useful));
  if (threads == 1) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) {
    int64_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) workers.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(int64_t{0}, std::min(n, chunk));
  for (auto& w : workers) w.join();
}

}  // namespace tbdfs
