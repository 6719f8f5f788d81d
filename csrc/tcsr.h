// The time-sorted CSR: every node's temporal neighbours, sorted by (time, edge id).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "common.h"
#include "cow_array.h"

namespace tbdfs {

// Entry j of node u's list is one interaction u saw: its time, the neighbour and the input
// row.  Lists are sorted by (time, row), so the edges eligible before a time are a prefix
// of the list.
//
// Undirected graphs also store the twin: the position of the same interaction in the
// neighbour's list, as an offset from that list's start.  A neighbour instance (v, t_e)
// reached through an entry is then told its own eligible prefix without a search: it ends
// at v's twin entry, less any entries that tie with t_e.
//
// The fields of an entry are stored together: uniform sampling touches entries at random,
// and one cache line per entry beats one per field.
struct Entry {
  double ts;
  nid_t nbr;
  eid_t row;
  eid_t twin;  // -1 in directed graphs
  int32_t reserved = 0;
};
static_assert(sizeof(Entry) == 24, "Entry must stay packed");

// Node u's list is entries[start[u], start[u] + degree[u]), with capacity[u] >= degree[u]
// slots reserved there.  build_tcsr packs the lists (start = prefix sum of degree, no spare
// slots); appended interactions (append.h) fill a list's spare slots or move the list to
// the end of the pool, so each list stays contiguous and sorted.
//
// The arrays are owned, or views of a saved graph's files mapped read-only (map_saved in
// the bindings): processes that load the same files then share one copy.  A mapped CSR
// is copied into owned memory (own_storage) before anything writes to it.
struct TCSR {
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  bool directed = false;
  CowArray<int64_t> start;     // [N] first position of node u's list in `entries`
  CowArray<int64_t> degree;    // [N] length of node u's list
  CowArray<int64_t> capacity;  // [N] slots reserved at start[u]
  CowArray<Entry> entries;     // the pool: every list's slots (plus space lists moved out of)
  CowArray<nid_t> src;         // [E] input endpoints, kept to give the edges back
  CowArray<nid_t> dst;         // [E]
  int64_t max_degree = 0;         // longest neighbour list: bounds a non-replacing fanout
  int64_t live_entries = 0;       // sum of degree
  double latest_time = -std::numeric_limits<double>::infinity();  // of any edge
  int64_t relocations = 0;        // lists moved to the end of the pool by appends
  int64_t compactions = 0;        // repacks of the pool by appends
  // Samplers read under a shared lock, appends write under an exclusive one.  Holders
  // never need the GIL, so taking it with the GIL held cannot deadlock.
  std::unique_ptr<std::shared_mutex> mutex = std::make_unique<std::shared_mutex>();

  int64_t list_begin(int64_t u) const { return start[u]; }
  int64_t list_end(int64_t u) const { return start[u] + degree[u]; }

  // Whether any array views a mapped file.
  bool mapped() const {
    return start.is_view() || degree.is_view() || capacity.is_view() || entries.is_view() ||
           src.is_view() || dst.is_view();
  }
  // Copies mapped arrays into owned memory (this process's own copy), so they can change.
  void own_storage() {
    start.own();
    degree.own();
    capacity.own();
    entries.own();
    src.own();
    dst.own();
  }

  // Sets max_degree, live_entries and latest_time from the lists (after build or validate).
  void update_summary();

  // Packs the lists from a CSR row pointer indptr [N + 1] over `entries` (pickles carry
  // the packed layout); throws InputError when indptr is not one.
  void set_packed_layout(const std::vector<int64_t>& indptr);

  // End (absolute position) of node u's entries with ts < t (strict) or ts <= t.
  int64_t eligible_end(int64_t u, double t, bool strict) const;

  // Eligible end of the instance reached through entry j: its neighbour at its time.
  int64_t child_eligible_end(int64_t j, bool strict) const;

  size_t nbytes() const;

  // Checks the invariants of arrays handed in from outside (unpickling, shared memory) and
  // of the layout after appends.
  void validate() const;
};

// Builds the CSR from input rows (src[i], dst[i], ts[i]).  Undirected: both endpoints see
// the edge (a self-loop once).  Directed: a node sees the sources of its in-edges, the
// direction in which DGL passes messages.  Throws InputError naming the first bad value.
TCSR build_tcsr(const int64_t* src, const int64_t* dst, const double* ts, int64_t num_edges,
                int64_t num_nodes, bool directed);

}  // namespace tbdfs
