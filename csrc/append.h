// Streaming inserts: interactions appended to a built CSR in time order.
//
// Design.  Appended interactions are never earlier than the graph's latest time and get
// the next row ids, so each one belongs at the END of its endpoints' time-sorted lists:
// nothing already stored moves relative to its list, the twins (offsets from a list's
// start) stay valid, and the lists come out exactly as build_tcsr makes them from all the
// rows at once.  Each node's list keeps a (start, degree, capacity) segment in one pool:
//  - an entry goes into the list's spare slots when it has some (O(1));
//  - a full list moves to the end of the pool with capacity ~1.5x its length (geometric
//    growth: its copies are paid for by the appends that filled it), or grows in place
//    when it already ends the pool;
//  - the slots a list moved out of are left behind and reclaimed lazily: when the pool
//    would exceed kCompactRatio x the live entries, compact() repacks every list in node
//    order (lists keep their room, at least 1/kCompactSlack of their length, unless that
//    would use up half the headroom: then exactly that), in one O(pool) pass paid for by
//    the appends that made the waste.  The pool's capacity is reserved up to that limit.
// So a list stays one contiguous, sorted range (what the sampler reads), an append costs
// O(1) amortized whatever the graph's size, and the pool stays within kCompactRatio of a
// fresh build's entries.  The alternative, a per-node log of appended entries beside the
// packed CSR, would split every eligible window in two and put a branch in the sampler's
// hot loops; a global rebuild would cost O(E) per chunk.
#pragma once

#include <cstdint>

#include "tcsr.h"

namespace tbdfs {

// Pool size, in live entries, above which the pool is repacked (and a floor below which
// small graphs are never repacked).
constexpr double kCompactRatio = 1.5;
constexpr int64_t kCompactFloor = 4096;
// After a repack a list of length n has at least n / kCompactSlack spare slots.
constexpr int64_t kCompactSlack = 8;

// Appends rows (src[i], dst[i], ts[i]) as rows num_edges.. of g.  Every time must be finite
// and >= g.latest_time (the rows themselves may come in any order; ties keep row order);
// ids >= num_nodes grow the graph.  Checks everything before changing anything: on an
// InputError g is unchanged.  A mapped g is first copied into owned memory (own_storage).
// The caller holds g's lock exclusively.
void append_edges(TCSR& g, const int64_t* src, const int64_t* dst, const double* ts,
                  int64_t n);

// Repacks the pool: lists in node order, each with degree / slack_div spare slots
// (slack_div <= 0: none).  The caller holds g's lock exclusively.
void compact(TCSR& g, int64_t slack_div);

// A packed copy of g (the layout build_tcsr makes), e.g. for pickling.  The caller holds
// g's lock (shared is enough).
TCSR packed_copy(const TCSR& g);

}  // namespace tbdfs
