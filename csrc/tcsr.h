// The time-sorted CSR: every node's temporal neighbours, sorted by (time, edge id).
#pragma once

#include <cstdint>
#include <vector>

#include "common.h"

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

struct TCSR {
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  bool directed = false;
  std::vector<int64_t> indptr;  // [N + 1]
  std::vector<Entry> entries;   // [M]
  std::vector<nid_t> src;       // [E] input endpoints, kept to give the edges back
  std::vector<nid_t> dst;       // [E]
  int64_t max_degree = 0;       // longest neighbour list: bounds a non-replacing fanout

  // Sets max_degree from indptr (after build or validate).
  void update_max_degree();

  // End (absolute position) of node u's entries with ts < t (strict) or ts <= t.
  int64_t eligible_end(int64_t u, double t, bool strict) const;

  // Eligible end of the instance reached through entry j: its neighbour at its time.
  int64_t child_eligible_end(int64_t j, bool strict) const;

  size_t nbytes() const;

  // Checks the invariants of arrays handed in from outside (unpickling, shared memory).
  void validate() const;
};

// Builds the CSR from input rows (src[i], dst[i], ts[i]).  Undirected: both endpoints see
// the edge (a self-loop once).  Directed: a node sees the sources of its in-edges, the
// direction in which DGL passes messages.  Throws InputError naming the first bad value.
TCSR build_tcsr(const int64_t* src, const int64_t* dst, const double* ts, int64_t num_edges,
                int64_t num_nodes, bool directed);

}  // namespace tbdfs
