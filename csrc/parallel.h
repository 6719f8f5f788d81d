// A blocking parallel-for over contiguous ranges, on a small persistent thread pool.
//
// We avoid OpenMP on purpose: torch ships its own OpenMP runtime, and OpenMP's spin-waiting
// made a competitor's 2-thread sampler 30x slower while another process held a core.
//
// Work is cut into more chunks than threads and claimed through an atomic counter.  The
// calling thread claims chunks too and waits only for chunks that another thread has
// already started, never for a helper to be scheduled: on a machine whose other cores are
// busy, a call degrades to the single-threaded time instead of stalling.  Helpers sleep on
// a condition variable between calls (no spinning).
#pragma once

#include <cstdint>
#include <functional>

namespace tbdfs {

// Calls fn(begin, end) on disjoint chunks covering [0, n), using up to num_threads threads
// (the caller included).  Which thread runs a chunk varies; callers keep results
// independent of it by writing only to index-addressed outputs.
void parallel_for(int64_t n, int num_threads, int64_t min_chunk,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tbdfs
